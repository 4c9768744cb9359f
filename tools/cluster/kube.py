"""kube-state-metrics' view of the cluster: the pods, their owners, workloads and nodes.

Families and labels follow shared/real/ref-kube-state-metrics-v2.20.0-*.md (label order as
kube-state-metrics writes them). What moves during the incident comes from the
synthesiser: each engine container's restart counter, its `last_terminated_reason`, and
the workload's desired and ready replicas (`tools.rawsynth.RawFleet` writes them as
`kube_deployment_*`; for a StatefulSet or LeaderWorkerSet they become the
`kube_statefulset_*` series of the same meaning, and `..._replicas_unavailable`, which
kube-state-metrics has no StatefulSet counterpart for, is not exposed). A crash-looping
engine (a story's `crash`) also gets `last_terminated_reason="Error"`, its exit code and
`waiting_reason="CrashLoopBackOff"` while it is down, as kube-state-metrics shows it.

The rest is the cluster's standing state, constant over the history: `kube_pod_info`
(with `pod_ip` and `host_ip`, the join from a scrape's `instance` to a pod and node),
`kube_pod_owner`, `kube_replicaset_owner` (the link from a Deployment's pod to the
Deployment), the worker StatefulSets of a LeaderWorkerSet, the Deployments that are no
fleet, restart counters and container info of every other container, and `kube_node_info`.
A pod is ready while its engine answers (one missed scrape is not a readiness failure).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

import numpy as np
import numpy.typing as npt

from tools.cluster.model import Cluster, ClusterError, Container, Labels, Pod, digest, uid

if TYPE_CHECKING:
    from tools.cluster.history import FleetHistory

FloatArray = npt.NDArray[np.float64]
KubeRow = tuple[str, Labels, FloatArray, str]
STATEFULSET_NAMES: dict[str, str | None] = {
    "kube_deployment_spec_replicas": "kube_statefulset_replicas",
    "kube_deployment_status_replicas": "kube_statefulset_status_replicas",
    "kube_deployment_status_replicas_ready": "kube_statefulset_status_replicas_ready",
    "kube_deployment_status_replicas_available": "kube_statefulset_status_replicas_available",
    "kube_deployment_status_replicas_unavailable": None,
}
POD_KEYS = (
    "namespace",
    "pod",
    "uid",
    "container",
    "instance",
    "image",
    "image_id",
    "image_spec",
    "container_id",
)
KUBERNETES = "v1.31.6"


def _container_labels(pod: Pod, container: Container) -> Labels:
    return (("namespace", pod.namespace), ("pod", pod.name), ("uid", pod.uid), ("container", container.name))


def _container_info(pod: Pod, container: Container) -> Labels:
    image = container.image
    return (
        *_container_labels(pod, container),
        ("image_spec", image),
        ("image", image),
        ("image_id", f"docker.io/{image.split(':')[0]}@sha256:{digest(image)}"),
        ("container_id", f"containerd://{digest(pod.uid, container.name)}"),
    )


def _ready(present: npt.NDArray[np.bool_]) -> npt.NDArray[np.bool_]:
    """Presence with single missed scrapes filled: readiness does not flap with the scraper."""
    ready = present.copy()
    inner = ~present[1:-1] & present[:-2] & present[2:]
    ready[1:-1] |= inner
    return ready


def _from_synthesiser(fh: FleetHistory) -> list[KubeRow]:
    out: list[KubeRow] = []
    workload, raw = fh.workload, fh.raw
    spec = workload.spec
    for (metric, pairs), values in raw.out.series.items():
        if not metric.startswith("kube_"):
            continue
        labels = dict(pairs)
        origin = metric + "{" + ",".join(f'{k}="{v}"' for k, v in pairs) + f"}} of fleet {spec.key}"
        if "instance" in labels:
            pod = workload.engine_pods[raw.f.names.index(labels["instance"])]
            if metric == "kube_pod_container_info":
                exposed = _container_info(pod, pod.container)
            else:
                extra = tuple((k, v) for k, v in pairs if k not in POD_KEYS)
                exposed = (*_container_labels(pod, pod.container), *extra)
            out.append((metric, exposed, values, origin))
        elif "deployment" in labels:
            if spec.kind == "Deployment":
                out.append(
                    (metric, (("namespace", spec.namespace), ("deployment", spec.name)), values, origin)
                )
                continue
            if metric not in STATEFULSET_NAMES:
                raise ClusterError(f"{origin}: no StatefulSet counterpart is known for {metric}")
            renamed = STATEFULSET_NAMES[metric]
            if renamed is not None:
                out.append(
                    (renamed, (("namespace", spec.namespace), ("statefulset", spec.name)), values, origin)
                )
        else:
            raise ClusterError(f"{origin}: neither a pod's nor a workload's series")
    return out


def _crash_loops(
    fh: FleetHistory, presence: Mapping[str, npt.NDArray[np.bool_]], step: float
) -> list[KubeRow]:
    out: list[KubeRow] = []
    for replica, crash_at in fh.story.crash:
        pod = fh.workload.engine_pods[replica]
        present = presence[pod.address]
        crashed = np.arange(len(present)) * step >= crash_at
        base = _container_labels(pod, pod.container)
        origin = f"crash loop of {pod.namespace}/{pod.name}"
        out += [
            (
                "kube_pod_container_status_last_terminated_reason",
                (*base, ("reason", "Error")),
                np.where(crashed, 1.0, np.nan),
                origin,
            ),
            (
                "kube_pod_container_status_last_terminated_exitcode",
                base,
                np.where(crashed, 1.0, np.nan),
                origin,
            ),
            (
                "kube_pod_container_status_waiting_reason",
                (*base, ("reason", "CrashLoopBackOff")),
                np.where(crashed & ~_ready(present), 1.0, np.nan),
                origin,
            ),
        ]
    return out


def _pod_rows(pod: Pod, ready: npt.NDArray[np.bool_], n: int) -> list[KubeRow]:
    one, zero = np.ones(n), np.zeros(n)
    ident = (("namespace", pod.namespace), ("pod", pod.name), ("uid", pod.uid))
    origin = f"pod {pod.namespace}/{pod.name}"
    rows: list[KubeRow] = [
        (
            "kube_pod_info",
            (
                *ident,
                ("host_ip", pod.host_ip),
                ("pod_ip", pod.ip),
                ("node", pod.node),
                ("created_by_kind", pod.owner.kind),
                ("created_by_name", pod.owner.name),
                ("priority_class", ""),
                ("host_network", "false"),
            ),
            one,
            origin,
        ),
        (
            "kube_pod_owner",
            (
                *ident,
                ("owner_kind", pod.owner.kind),
                ("owner_name", pod.owner.name),
                ("owner_is_controller", "true"),
            ),
            one,
            origin,
        ),
    ]
    for condition, values in (("true", ready), ("false", ~ready), ("unknown", np.zeros(n, dtype=bool))):
        rows.append(
            ("kube_pod_status_ready", (*ident, ("condition", condition)), values.astype(float), origin)
        )
    for container in pod.containers:
        if pod.role == "engine" and container == pod.container:
            continue
        rows.append(
            ("kube_pod_container_status_restarts_total", _container_labels(pod, container), zero, origin)
        )
        rows.append(("kube_pod_container_info", _container_info(pod, container), one, origin))
    return rows


def _standing(cluster: Cluster, n: int) -> list[KubeRow]:
    one = np.ones(n)
    rows: list[KubeRow] = []
    owned = [(w.spec.namespace, w.spec.name, w.replicaset) for w in cluster.workloads if w.replicaset]
    for namespace, deployment, replicaset in (*owned, *cluster.extra_deployments):
        owner = (("owner_kind", "Deployment"), ("owner_name", deployment), ("owner_is_controller", "true"))
        rows.append(
            (
                "kube_replicaset_owner",
                (("namespace", namespace), ("replicaset", replicaset), *owner),
                one,
                replicaset,
            )
        )
    for namespace, deployment, _ in cluster.extra_deployments:
        labels: Labels = (("namespace", namespace), ("deployment", deployment))
        for metric in (
            "kube_deployment_spec_replicas",
            "kube_deployment_status_replicas",
            "kube_deployment_status_replicas_ready",
            "kube_deployment_status_replicas_available",
        ):
            rows.append((metric, labels, one, deployment))
    for w in cluster.workloads:
        for name in w.statefulsets[1:]:
            size = np.full(n, float(w.spec.group_size - 1))
            labels = (("namespace", w.spec.namespace), ("statefulset", name))
            for renamed in STATEFULSET_NAMES.values():
                if renamed is not None:
                    rows.append((renamed, labels, size, f"worker StatefulSet {name}"))
    for i, node in enumerate(cluster.nodes):
        labels = (
            ("node", node.name),
            ("kernel_version", "5.15.0-1071-nvidia"),
            ("os_image", "Ubuntu 22.04.5 LTS"),
            ("container_runtime_version", "containerd://1.7.27"),
            ("kubelet_version", KUBERNETES),
            ("kubeproxy_version", KUBERNETES),
            ("provider_id", ""),
            ("pod_cidr", f"10.244.{i}.0/24"),
            ("system_uuid", uid("node", node.name)),
            ("internal_ip", node.ip),
        )
        rows.append(("kube_node_info", labels, one, f"node {node.name}"))
    return rows


def kube_series(
    cluster: Cluster,
    fleets: Sequence[FleetHistory],
    presence: Mapping[str, npt.NDArray[np.bool_]],
    n: int,
    step: float,
) -> list[KubeRow]:
    """Every kube-state-metrics series: (name, exposition labels, values, where it came from)."""
    rows: list[KubeRow] = []
    for fh in fleets:
        rows += _from_synthesiser(fh)
        rows += _crash_loops(fh, presence, step)
    for pod in cluster.pods:
        ready = _ready(presence[pod.address]) if pod.role == "engine" else np.ones(n, dtype=bool)
        rows += _pod_rows(pod, ready, n)
    rows += _standing(cluster, n)
    return rows
