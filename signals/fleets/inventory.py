"""The label sets fleet discovery reads, fetched once in one round of instant queries.

Six `group by` queries, each returning one row per label set (never per sample), so the
cost does not grow with history: engines, pods and their placement, pod and ReplicaSet
owners, and the GPUs. An exporter that is absent answers with no rows; a query that
fails is kept as a `JoinProblem` naming it, and discovery works with the rest.
"""

from __future__ import annotations

from collections.abc import Mapping

from signals.errors import SignalError
from signals.fleets.discover import ENGINES, Inventory
from signals.fleets.model import JoinProblem
from signals.prometheus import PrometheusSource

_ENGINE_NAMES = "|".join(ENGINES)
QUERIES: Mapping[str, tuple[str, str]] = {
    "engines": (
        "engine",
        "group by (__name__, namespace, pod, instance, model_name, server) "
        f'({{__name__=~"{_ENGINE_NAMES}"}})',
    ),
    "pods": ("kube-state-metrics", "group by (namespace, pod, node, pod_ip) (kube_pod_info)"),
    "pod_owners": (
        "kube-state-metrics",
        "group by (namespace, pod, owner_kind, owner_name) (kube_pod_owner)",
    ),
    "replicaset_owners": (
        "kube-state-metrics",
        "group by (namespace, replicaset, owner_kind, owner_name) (kube_replicaset_owner)",
    ),
    "gpus": (
        "dcgm",
        "group by (Hostname, hostname, gpu, UUID, pod, namespace, exported_pod, exported_namespace) "
        '({__name__=~"DCGM_FI_DEV_GPU_TEMP|DCGM_FI_DEV_FB_USED|DCGM_FI_DEV_GPU_UTIL"})',
    ),
}
"""Key -> (the exporter it reads, the query)."""


def fetch_inventory(prometheus: PrometheusSource, at: float | None = None) -> Inventory:
    """Every label set discovery needs, as of `at` (now by default); SignalError when none can be read."""
    results = prometheus.instant_queries({key: query for key, (_, query) in QUERIES.items()}, at)
    if all(r.error is not None for r in results.values()):
        raise SignalError(f"{prometheus.url}: no fleet query could be answered ({results['engines'].error})")
    rows: dict[str, list[dict[str, str]]] = {key: [] for key in QUERIES}
    problems: list[JoinProblem] = []
    for key, (exporter, _) in QUERIES.items():
        result = results[key]
        if result.error is not None:
            problems.append(JoinProblem(exporter, f"could not be read: {result.error}"))
            continue
        rows[key] = [dict(labels) for labels, _, _ in result.series]
    return Inventory(
        engines=rows["engines"],
        pods=rows["pods"],
        pod_owners=rows["pod_owners"],
        replicaset_owners=rows["replicaset_owners"],
        gpus=rows["gpus"],
        problems=tuple(problems),
    )
