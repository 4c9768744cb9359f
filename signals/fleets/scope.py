"""One fleet as each exporter's own query scope.

The engine's series are scoped by the fleet labels and its pods (two workloads serving
one model stay apart, and a router's re-export of the engines' gauges, which carries a
`server` label, is left out); DCGM's by the label that names the workload's pod there
(`exported_pod` or `pod`) or, for GPUs joined by node, by their UUIDs; kube-state-metrics'
pod series (and the kubelet's prober counts) by pod, its Deployment or StatefulSet series
by the workload's own name, never by `pod` (in kube-prometheus-stack that label is
kube-state-metrics' own pod), and its Endpoints addresses by the pods' IPs. The gateway
keeps the user's selector (its series name no pod), and its per-backend series, named by
the backend's host:port, are renamed to the pod at that address. Worker pods of a
LeaderWorkerSet group are renamed to their leader, the replica they serve.
"""

from __future__ import annotations

import re
from collections import Counter

from signals.catalog import NOT_ROUTER, QueryOptions, Scope
from signals.fleets.model import Fleet, Gpu


def _quote(value: str) -> str:
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _any_of(values: tuple[str, ...] | list[str]) -> str:
    return _quote("|".join(re.escape(v) for v in sorted(values)))


def _join(*matchers: str) -> str:
    return ",".join(m for m in matchers if m)


def scoped_options(fleet: Fleet, base: QueryOptions) -> QueryOptions:
    """`base` with every exporter scoped to `fleet` (the user's selector still applies to the gateway);
    the replica label is the engine's, the name every replica goes by once joined."""
    labels = dict(fleet.labels)
    fleet_matchers = ",".join(f"{k}={_quote(v)}" for k, v in fleet.engine_matchers)
    replica_matcher = f"{fleet.replica_label}=~{_any_of(list(fleet.replicas))}" if fleet.replicas else ""
    scopes: dict[str, Scope] = {
        "engine": Scope(_join(fleet_matchers, replica_matcher, NOT_ROUTER), fleet.replica_label),
        "gateway": Scope(base.selector, fleet.replica_label, dict(fleet.backends)),
    }
    namespace = labels.get("namespace", "")
    ns = f"namespace={_quote(namespace)}" if namespace else ""
    if fleet.pod_ips:
        scopes["kube_endpoint"] = Scope(_join(ns, f"ip=~{_any_of(list(fleet.pod_ips.values()))}"), "ip")
    if fleet.kube_pods:
        scopes["kube_pod"] = Scope(
            _join(ns, f"pod=~{_any_of(list(fleet.kube_pods))}"), "pod", dict(fleet.workers)
        )
    workload = _kube_workload(fleet)
    if workload:
        scopes["kube_workload"] = Scope(_join(ns, workload), "pod")
    if fleet.orchestrator_selector:
        scopes["orchestrator"] = Scope(_join(ns, fleet.orchestrator_selector), fleet.replica_label)
    gpu = _gpu_scope(fleet)
    if gpu is not None:
        scopes["gpu"] = gpu
    return QueryOptions(
        replica_label=fleet.replica_label,
        selector=base.selector,
        window=base.window,
        extra=base.extra,
        scopes=scopes,
        engine=fleet.engine,
        orchestrator=fleet.orchestrator,
    )


def _kube_workload(fleet: Fleet) -> str:
    """The matcher of the Kubernetes workloads behind the fleet: its own, or those behind the
    orchestrator's object (a Deployment per Knative revision of an InferenceService)."""
    workloads = fleet.kube_workloads or ((fleet.workload,) if fleet.workload is not None else ())
    kinds = {w.kind for w in workloads}
    if not workloads or not kinds <= {"Deployment", "StatefulSet", "LeaderWorkerSet"} or len(kinds) > 1:
        return ""
    label = "deployment" if kinds == {"Deployment"} else "statefulset"
    names = [w.name for w in workloads]
    return f"{label}={_quote(names[0])}" if len(names) == 1 else f"{label}=~{_any_of(names)}"


def _gpu_scope(fleet: Fleet) -> Scope | None:
    how = fleet.gpu_join
    if how is None:
        return None
    namespace = fleet.namespace or ""
    gpus = [g for g in fleet.gpus if g.joined_by == how]
    if how == "exported_pod":
        pods = sorted({g.pod for g in gpus})
        ns = f"exported_namespace={_quote(namespace)}" if namespace else ""
        return Scope(_join(ns, f"exported_pod=~{_any_of(pods)}"), "exported_pod", dict(fleet.workers))
    if how == "pod":
        pods = sorted({g.pod for g in gpus})
        ns = f"namespace={_quote(namespace)}" if namespace else ""
        return Scope(_join(ns, f"pod=~{_any_of(pods)}"), "pod", dict(fleet.workers))
    return _node_scope(gpus)


def _node_scope(gpus: list[Gpu]) -> Scope:
    """GPUs joined by node, read by their `UUID` where every one has it: the node's label is
    `Hostname` or `hostname` depending on the exporter's version (and changes on an upgrade
    within the window), a GPU's UUID does not. Without UUIDs, by the node label their series
    carry (the more common one, should they differ)."""
    if all(g.uuid for g in gpus):
        return Scope(
            f"UUID=~{_any_of(sorted({g.uuid for g in gpus}))}", "UUID", {g.uuid: g.replica for g in gpus}
        )
    counts = Counter(g.host_label for g in gpus)
    label = max(sorted(counts), key=lambda k: counts[k])
    hosts = sorted({g.hostname for g in gpus if g.host_label == label})
    renames = {g.hostname: g.replica for g in gpus if g.host_label == label}
    return Scope(f"{label}=~{_any_of(hosts)}", label, renames)
