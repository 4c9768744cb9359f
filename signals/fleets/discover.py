"""Finding the fleets of one Prometheus from the label sets its exporters publish.

Pure: it takes the rows `signals.fleets.inventory` fetched once (each a label mapping)
and joins them on labels only, never on the shape of a pod's name:

- engine series (vLLM, SGLang) give the fleets: grouped by the fleet labels, a replica
  per `pod` (or `instance` where no pod label exists). Series with a `server` label are
  a router's view of its engines (the vLLM production-stack router re-exports the
  engines' gauges that way) and are joined to replicas through the pod IP instead;
- kube-state-metrics gives the workload: `kube_pod_owner` → `kube_replicaset_owner` →
  Deployment, or a StatefulSet. A LeaderWorkerSet has no collector: its leader pods
  belong to the leader StatefulSet `<lws>`, and each group's worker StatefulSet carries
  the leader pod's own name (the LWS contract: the leader pod owns it), so a worker pod
  is tied to its leader by that exact name;
- DCGM series map to a replica by `exported_pod`/`exported_namespace` (the GPU
  Operator's ServiceMonitor renames the workload's labels), by `pod`/`namespace` (an
  exporter whose labels are honoured), or, where the exporter maps no pod at all, by
  `Hostname` (`hostname` from dcgm-exporter's HEAD on) → node → the fleet's pods on that
  node (`kube_pod_info`).

Whatever cannot be joined becomes a `JoinProblem` naming the exporter and what was missing.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace

from signals.dcgm import host_label, host_of
from signals.fleets.model import Fleet, FleetMap, Gpu, JoinProblem, Workload
from signals.fleets.stacks import (
    EngineSpec,
    Identity,
    engine_specs,
    identify,
    orchestrator_selector,
    pod_labels,
    rows_by_worker,
)
from signals.vocabulary import DEFAULT_FLEET_LABELS

Row = Mapping[str, str]
ENGINES: Mapping[str, EngineSpec] = engine_specs()
"""Marker metric -> the engine whose replicas export it (signals/stacks.yaml)."""
MODEL_LABEL = "model_name"


@dataclass(frozen=True)
class Inventory:
    """The label sets discovery reads; each list may be empty (that exporter is absent)."""

    engines: Sequence[Row] = ()
    pods: Sequence[Row] = ()
    pod_owners: Sequence[Row] = ()
    replicaset_owners: Sequence[Row] = ()
    gpus: Sequence[Row] = ()
    pod_labels: Sequence[Row] = ()
    """kube_pod_labels rows: the pod labels orchestrators key fleets by (signals/stacks.yaml)."""
    serve: Sequence[Row] = ()
    """Ray Serve replica rows (`application`, `WorkerId`): Ray's engine series join them by worker."""
    problems: Sequence[JoinProblem] = field(default_factory=tuple)


class _Kube:
    """kube-state-metrics' pods, placement and owners, indexed for the joins."""

    def __init__(self, inv: Inventory) -> None:
        self.problems: list[JoinProblem] = []
        self.info: dict[tuple[str, str], Row] = {
            (r.get("namespace", ""), r.get("pod", "")): r for r in inv.pods
        }
        owners: dict[tuple[str, str], set[tuple[str, str]]] = defaultdict(set)
        for r in inv.pod_owners:
            if r.get("owner_kind") and r.get("owner_name"):
                owners[(r.get("namespace", ""), r.get("pod", ""))].add((r["owner_kind"], r["owner_name"]))
        self.owner: dict[tuple[str, str], tuple[str, str]] = {}
        for key, found in sorted(owners.items()):
            if len(found) > 1:
                claims = ", ".join(f"{k}/{n}" for k, n in sorted(found))
                self.problems.append(
                    JoinProblem(
                        "kube-state-metrics", f"pod {key[0]}/{key[1]} is claimed by {claims}: not joined"
                    )
                )
                continue
            self.owner[key] = next(iter(found))
        self.rs_owner: dict[tuple[str, str], tuple[str, str]] = {
            (r.get("namespace", ""), r.get("replicaset", "")): (
                r.get("owner_kind", ""),
                r.get("owner_name", ""),
            )
            for r in inv.replicaset_owners
            if r.get("owner_kind")
        }

    def workload(self, namespace: str, pod: str) -> Workload | None:
        owner = self.owner.get((namespace, pod))
        if owner is None:
            return None
        kind, name = owner
        if kind == "ReplicaSet":
            parent = self.rs_owner.get((namespace, name))
            return Workload(parent[0], parent[1]) if parent else Workload("ReplicaSet", name)
        return Workload(kind, name)

    def pods_of(self, namespace: str, kind: str, name: str) -> list[str]:
        return sorted(p for (ns, p), owner in self.owner.items() if ns == namespace and owner == (kind, name))

    def workload_pods(self, namespace: str, workload: Workload) -> list[str]:
        """Every pod kube-state-metrics shows under the workload (through its ReplicaSets)."""
        return sorted(p for (ns, p) in self.owner if ns == namespace and self.workload(ns, p) == workload)


@dataclass
class _Draft:
    labels: tuple[tuple[str, str], ...]
    engine: str
    replica_label: str
    replicas: set[str] = field(default_factory=set)
    matchers: tuple[tuple[str, str], ...] = ()
    identity: Identity | None = None
    pools: dict[str, str] = field(default_factory=dict)
    revisions: dict[str, str] = field(default_factory=dict)
    pod_of: dict[str, str] = field(default_factory=dict)
    """Replica -> the pod its series came from, where a replica is not a pod (a Ray Serve actor)."""


def _engine_labels(
    row: Row, spec: EngineSpec | None, fleet_labels: Sequence[str]
) -> tuple[tuple[tuple[str, str], ...], tuple[tuple[str, str], ...]]:
    """The fleet labels of an engine row, and the same as the engine's own series spell them
    (the model under the engine's own model label; none where it exports none)."""
    model_label = spec.model_label if spec is not None else MODEL_LABEL
    labels, matchers = [], []
    for label in fleet_labels:
        own = label if label != MODEL_LABEL else model_label
        value = row.get(own, "") if own else ""
        labels.append((label, value))
        if own:
            matchers.append((own, value))
    return tuple(labels), tuple(matchers)


def _replica_label(row: Row, spec: EngineSpec | None) -> str:
    for label in (*(spec.replica_labels if spec else ()), "pod"):
        if row.get(label):
            return label
    return "instance"


def discover(inv: Inventory, fleet_labels: Sequence[str] = DEFAULT_FLEET_LABELS) -> FleetMap:
    """The fleets `inv` shows, each with its replicas, workload, GPUs and failed joins."""
    kube = _Kube(inv)
    problems: list[JoinProblem] = [*inv.problems, *kube.problems]
    drafts: dict[tuple[object, ...], _Draft] = {}
    routers: list[Row] = []
    missing: dict[str, int] = defaultdict(int)
    by_pod = {(r.get("namespace", ""), r.get("pod", "")): pod_labels(r) for r in inv.pod_labels}
    serve = rows_by_worker(inv.serve)
    for row in inv.engines:
        if row.get("server"):
            routers.append(row)
            continue
        spec = ENGINES.get(row.get("__name__", ""))
        labels, matchers = _engine_labels(row, spec, fleet_labels)
        for own, value in matchers:
            if not value:
                missing[own] += 1
        replica_label = _replica_label(row, spec)
        known = {**by_pod.get((row.get("namespace", ""), row.get("pod", "")), {}), **row}
        identity = identify(known, serve)
        name = spec.engine if spec else "engine"
        key = (labels, name, identity.kind if identity else "", identity.name if identity else "")
        draft = drafts.setdefault(
            key,
            _Draft(
                labels,
                name,
                replica_label,
                matchers=matchers if matchers != labels else (),
                identity=identity,
            ),
        )
        replica = row.get(replica_label)
        if replica:
            draft.replicas.add(replica)
            if identity is not None and identity.pool:
                draft.pools[replica] = identity.pool
            if identity is not None and identity.revision:
                draft.revisions[replica] = identity.revision
            if replica_label not in ("pod", "instance") and row.get("pod"):
                draft.pod_of[replica] = row["pod"]
    for label, count in sorted(missing.items()):
        problems.append(JoinProblem("engine", f"the fleet label '{label}' is missing", count))

    fleets = [_fleet(d, kube) for draft in drafts.values() for d in _by_workload(draft, kube)]
    fleets = _with_gpus(fleets, inv.gpus, kube, problems)
    fleets = _with_routers(fleets, routers, problems)
    fleets.sort(key=lambda f: f.name)
    idle = sum(1 for r in inv.gpus if _is_idle(r, inv.gpus))
    return FleetMap(tuple(fleets), tuple(problems), idle)


def _by_workload(draft: _Draft, kube: _Kube) -> list[_Draft]:
    """One draft per workload serving the same labels; pods whose owner is unknown stay with
    the one workload there is (reported), or stand apart when there are several."""
    if draft.replica_label != "pod" or draft.identity is not None:
        return [draft]
    namespace = dict(draft.labels).get("namespace", "")
    owned: dict[str, set[str]] = defaultdict(set)
    for replica in draft.replicas:
        workload = kube.workload(namespace, replica)
        owned[str(workload) if workload else ""].add(replica)
    known = [key for key in owned if key]
    if len(known) <= 1:
        return [draft]
    return [
        _Draft(draft.labels, draft.engine, draft.replica_label, replicas, draft.matchers)
        for _, replicas in sorted(owned.items())
    ]


def _fleet(draft: _Draft, kube: _Kube) -> Fleet:
    labels = dict(draft.labels)
    namespace = labels.get("namespace", "")
    replicas = tuple(sorted(draft.replicas))
    workload: Workload | None = None
    behind: tuple[Workload, ...] = ()
    workers: dict[str, str] = {}
    pod_ips: dict[str, str] = {}
    local: list[JoinProblem] = []
    if draft.replica_label == "pod":
        workloads = {w for w in (kube.workload(namespace, r) for r in replicas) if w is not None}
        behind = tuple(sorted(workloads, key=str))
        workload = next(iter(workloads)) if len(workloads) == 1 else None
        unowned = [r for r in replicas if kube.workload(namespace, r) is None]
        if unowned and kube.info:
            local.append(JoinProblem("kube-state-metrics", f"no owner for pod {', '.join(unowned[:3])}"))
        for replica in replicas:
            info = kube.info.get((namespace, replica))
            if info is None:
                if kube.info:
                    local.append(JoinProblem("kube-state-metrics", f"no kube_pod_info for pod {replica}"))
                continue
            if info.get("pod_ip"):
                pod_ips[replica] = info["pod_ip"]
            # A LeaderWorkerSet group: the worker StatefulSet carries the leader pod's name.
            for worker in kube.pods_of(namespace, "StatefulSet", replica):
                workers[worker] = replica
        for each in behind if draft.identity is not None else (workload,) if workload else ():
            silent = [p for p in kube.workload_pods(namespace, each) if p not in draft.replicas]
            if silent:
                local.append(
                    JoinProblem(
                        "engine",
                        f"pods of {each} with no engine series: {', '.join(silent[:5])}"
                        + (f" and {len(silent) - 5} more" if len(silent) > 5 else ""),
                    )
                )
        if workload is not None and workload.kind == "StatefulSet" and workers:
            workload = Workload("LeaderWorkerSet", workload.name)
    elif kube.info and draft.replica_label == "instance":
        local.append(
            JoinProblem(
                "engine", "series carry no pod label: replicas are named by instance, not joined to pods"
            )
        )
    kube_pods = tuple(sorted({*replicas, *workers})) if draft.replica_label == "pod" else ()
    if draft.pod_of:
        kube_pods, workers, found = _actor_pods(draft, kube, namespace)
        pod_ips = found
        if not kube_pods:
            local.append(
                JoinProblem(
                    "kube-state-metrics",
                    "several replicas share a pod: its restarts and GPUs are not split among them",
                )
            )
    identity = draft.identity
    joins: list[str] = []
    selector = ""
    if identity is not None:
        workload = Workload(identity.kind, identity.name)
        joins.append(f"{identity.kind} {identity.name} by {identity.how}")
        selector = orchestrator_selector(identity, _model(draft))
        if selector:
            joins.append(f"{identity.orchestrator}'s own series by {selector}")
    elif workload is not None:
        joins.append(f"{workload} by kube_pod_owner")
    if draft.pod_of and kube_pods:
        joins.append("each replica's pod by the pod label on its series (one replica per pod)")
    return Fleet(
        labels=draft.labels,
        engine=draft.engine,
        workload=workload,
        replica_label=draft.replica_label,
        replicas=replicas,
        pod_ips=pod_ips,
        workers=workers,
        kube_pods=kube_pods,
        problems=tuple(local),
        orchestrator=identity.orchestrator if identity is not None else None,
        matchers=draft.matchers,
        orchestrator_selector=selector,
        pools=dict(sorted(draft.pools.items())),
        revisions=dict(sorted(draft.revisions.items())),
        kube_workloads=behind if identity is not None else (),
        joins=tuple(joins),
    )


def _actor_pods(
    draft: _Draft, kube: _Kube, namespace: str
) -> tuple[tuple[str, ...], dict[str, str], dict[str, str]]:
    """Where replicas are actors inside pods (Ray Serve): the pods, each renamed to the one replica
    it hosts (so its restarts and GPUs count for that replica), and each replica's pod IP. Empty
    when some pod hosts several replicas: a pod's series cannot be split among them."""
    pods = set(draft.pod_of.values())
    if len(pods) != len(draft.pod_of):
        return (), {}, {}
    renames = {pod: replica for replica, pod in draft.pod_of.items()}
    ips = {
        replica: kube.info[(namespace, pod)]["pod_ip"]
        for replica, pod in draft.pod_of.items()
        if kube.info.get((namespace, pod), {}).get("pod_ip")
    }
    return tuple(sorted(pods)), renames, ips


def _model(draft: _Draft) -> str:
    return dict(draft.labels).get(MODEL_LABEL, "")


def _is_idle(row: Row, rows: Iterable[Row]) -> bool:
    """A GPU no pod uses: its exporter names the workload's pod as `exported_pod` elsewhere on
    the node, but not here (so any `pod` here is the exporter's own)."""
    if row.get("exported_pod"):
        return False
    host = host_of(row)
    return any(r.get("exported_pod") and host_of(r) == host for r in rows)


def _workload_pod(row: Row) -> str:
    """`pod` when it names the workload (no `exported_pod` label means the exporter's labels
    were honoured); empty when `pod` is the exporter's own."""
    if "exported_pod" in row or "exported_namespace" in row:
        return ""
    return row.get("pod", "")


def _with_gpus(
    fleets: list[Fleet], rows: Sequence[Row], kube: _Kube, problems: list[JoinProblem]
) -> list[Fleet]:
    owner: dict[tuple[str, str], tuple[int, str]] = {}
    for i, fleet in enumerate(fleets):
        if not fleet.kube_pods:
            continue
        for pod in fleet.kube_pods:
            owner[(fleet.namespace or "", pod)] = (i, fleet.workers.get(pod, pod))
    gpus: dict[int, list[Gpu]] = defaultdict(list)
    on_node: dict[str, set[tuple[int, str]]] = defaultdict(set)
    for (namespace, pod), (i, replica) in owner.items():
        node = kube.info.get((namespace, pod), {}).get("node")
        if node:
            on_node[node].add((i, replica))
    unjoined = elsewhere = 0
    for row in rows:
        host, index, uuid = host_of(row), row.get("gpu", ""), row.get("UUID", "")
        if row.get("exported_pod"):
            key, how = (row.get("exported_namespace", ""), row["exported_pod"]), "exported_pod"
        elif _is_idle(row, rows):
            continue
        elif _workload_pod(row):
            key, how = (row.get("namespace", ""), row["pod"]), "pod"
        else:
            holders = on_node.get(host, set())
            if not holders:
                unjoined += 1
                continue
            for i, replica in sorted(holders):
                gpus[i].append(Gpu(host, index, uuid, replica, "node", host_label=host_label(row)))
            continue
        found = owner.get(key)
        if found is None:
            elsewhere += 1
            continue
        i, replica = found
        gpus[i].append(Gpu(host, index, uuid, replica, how, pod=key[1]))
    if unjoined:
        problems.append(
            JoinProblem(
                "dcgm",
                "GPUs with no pod label, on nodes no fleet pod runs on (or no kube_pod_info to place pods)",
                unjoined,
            )
        )
    if elsewhere:
        problems.append(JoinProblem("dcgm", "GPUs used by pods that serve no fleet found here", elsewhere))
    out = []
    for i, fleet in enumerate(fleets):
        mine = sorted(set(gpus.get(i, [])), key=lambda g: (g.hostname, g.gpu, g.replica))
        local = list(fleet.problems)
        if any(g.joined_by == "node" for g in mine):
            per_gpu: dict[tuple[str, str], int] = defaultdict(int)
            for g in mine:
                per_gpu[(g.hostname, g.gpu)] += 1
            shared = {host for (host, _), n in per_gpu.items() if n > 1}
            note = "GPUs joined by node (the exporter names no pod)"
            if shared:
                nodes = ", ".join(sorted(shared))
                note += f"; nodes {nodes} run several replicas, which share their GPUs' series"
            local.append(JoinProblem("dcgm", note))
        elif not mine and rows and fleet.replica_label == "pod":
            local.append(JoinProblem("dcgm", "no GPU series names this fleet's pods or their nodes"))
        out.append(replace(fleet, gpus=tuple(mine), problems=tuple(local)))
    return out


def _with_routers(fleets: list[Fleet], routers: Sequence[Row], problems: list[JoinProblem]) -> list[Fleet]:
    if not routers:
        return fleets
    by_ip: dict[str, tuple[int, str]] = {}
    for i, fleet in enumerate(fleets):
        for replica, ip in fleet.pod_ips.items():
            by_ip[ip] = (i, replica)
    seen: dict[int, set[str]] = defaultdict(set)
    backends: dict[int, dict[str, str]] = defaultdict(dict)
    unknown = 0
    for row in routers:
        server = row.get("server", "")
        address = server.split("://", 1)[-1].split("/", 1)[0]
        ip = address.rsplit(":", 1)[0].strip("[]")
        found = by_ip.get(ip)
        if found is None:
            unknown += 1
            continue
        seen[found[0]].add(found[1])
        backends[found[0]][address] = found[1]
    if unknown:
        problems.append(
            JoinProblem("router", "backends whose IP is no known pod's (kube_pod_info pod_ip)", unknown)
        )
    return [
        replace(f, routers=tuple(sorted(seen.get(i, ()))), backends=dict(sorted(backends.get(i, {}).items())))
        for i, f in enumerate(fleets)
    ]
