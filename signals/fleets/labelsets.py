"""Which labels each exporter's discovery rows keep, and those rows read from series in hand.

Discovery reads one row per label set (`group by` over the window): the same projection
serves a live Prometheus (`signals.fleets.inventory` asks for it in PromQL) and a raw
fixture's series, read here without any server, so a fixture's fleets can be checked
when it loads and are the ones its replay through a temporary Prometheus finds.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from signals.dcgm import HOST_LABELS
from signals.fleets.discover import ENGINES, Inventory
from signals.fleets.stacks import POD_LABELS, SERVE_BY, SERVE_REPLICA, engine_labels, pod_label_names

ENGINE_BY = tuple(dict.fromkeys(("namespace", "pod", "instance", "model_name", "server", *engine_labels())))
POD_LABELS_BY = ("namespace", "pod", *pod_label_names())
POD_BY = ("namespace", "pod", "node", "pod_ip")
POD_OWNER_BY = ("namespace", "pod", "owner_kind", "owner_name")
REPLICASET_OWNER_BY = ("namespace", "replicaset", "owner_kind", "owner_name")
GPU_BY = (*HOST_LABELS, "gpu", "UUID", "pod", "namespace", "exported_pod", "exported_namespace")
DCGM = ("DCGM_FI_DEV_GPU_TEMP", "DCGM_FI_DEV_FB_USED", "DCGM_FI_DEV_GPU_UTIL")
KUBE = {
    "kube_pod_info": "pods",
    "kube_pod_owner": "pod_owners",
    "kube_replicaset_owner": "replicaset_owners",
    POD_LABELS: "pod_labels",
    SERVE_REPLICA: "serve",
}
KUBE_BY = {
    "pods": POD_BY,
    "pod_owners": POD_OWNER_BY,
    "replicaset_owners": REPLICASET_OWNER_BY,
    "pod_labels": POD_LABELS_BY,
    "serve": (*SERVE_BY, "namespace"),
}


def project(labels: Mapping[str, str], keep: Iterable[str]) -> dict[str, str]:
    """What `group by (keep)` leaves of a label set: the kept labels that have a value."""
    return {k: labels[k] for k in keep if labels.get(k)}


def inventory_from_series(series: Iterable[tuple[str, Mapping[str, str]]]) -> Inventory:
    """The inventory a Prometheus holding these `(metric, labels)` series would answer."""
    rows: dict[str, dict[tuple[tuple[str, str], ...], dict[str, str]]] = {
        kind: {} for kind in ("engine", "gpus", *KUBE_BY)
    }
    for metric, labels in series:
        if metric in ENGINES:
            kind, row = "engine", {**project(labels, ENGINE_BY), "__name__": metric}
        elif metric in KUBE:
            kind = KUBE[metric]
            row = project(labels, KUBE_BY[kind])
        elif metric in DCGM:
            kind, row = "gpus", project(labels, GPU_BY)
        else:
            continue
        rows[kind].setdefault(tuple(sorted(row.items())), row)
    return Inventory(
        engines=list(rows["engine"].values()),
        pods=list(rows["pods"].values()),
        pod_owners=list(rows["pod_owners"].values()),
        replicaset_owners=list(rows["replicaset_owners"].values()),
        gpus=list(rows["gpus"].values()),
        pod_labels=list(rows["pod_labels"].values()),
        serve=list(rows["serve"].values()),
    )
