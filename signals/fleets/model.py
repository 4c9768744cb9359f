"""What a fleet is, as the tool finds it in one Prometheus.

A fleet is the replicas that serve one model in one workload: named by its labels
(`namespace` and `model_name` by default) and, where kube-state-metrics shows it, its
workload (Deployment, StatefulSet, LeaderWorkerSet). A replica is a pod, or `instance`
where the engine's series carry no pod. Each exporter names the replica its own way,
so a fleet also carries, per exporter, how its series were joined to the replicas, and
every join that could not be made, with the reason: never silently dropped.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

GpuJoin = str
"""How a GPU was tied to its replica: `exported_pod`, `pod` (the exporter honours the
workload's labels) or `node` (through `Hostname` or `hostname` and kube-state-metrics' pod
placement)."""


@dataclass(frozen=True)
class Workload:
    """The Kubernetes object that owns a fleet's pods, as kube-state-metrics shows it."""

    kind: str
    name: str

    def __str__(self) -> str:
        return f"{self.kind}/{self.name}"


@dataclass(frozen=True)
class Gpu:
    """One GPU serving a replica: its node, index and UUID, and how it was joined.

    `host_label` is the label that named the node on its series: `Hostname` (released
    dcgm-exporter) or `hostname` (its HEAD). It is not part of the GPU's identity: one GPU
    seen under both (an exporter upgraded within the window) is one GPU.
    """

    hostname: str
    gpu: str
    uuid: str
    replica: str
    joined_by: GpuJoin
    pod: str = ""
    host_label: str = field(default="Hostname", compare=False)


@dataclass(frozen=True)
class JoinProblem:
    """A join that could not be made: which exporter, what was missing, about what."""

    exporter: str
    message: str
    series: int = 0

    def __str__(self) -> str:
        count = f" ({self.series} series)" if self.series else ""
        return f"{self.exporter}: {self.message}{count}"


@dataclass(frozen=True)
class Fleet:
    """One fleet: its labels, engine, workload, replicas and every exporter's view of them."""

    labels: tuple[tuple[str, str], ...]
    engine: str
    workload: Workload | None
    replica_label: str
    replicas: tuple[str, ...]
    pod_ips: Mapping[str, str] = field(default_factory=dict)
    workers: Mapping[str, str] = field(default_factory=dict)
    gpus: tuple[Gpu, ...] = ()
    kube_pods: tuple[str, ...] = ()
    routers: tuple[str, ...] = ()
    backends: Mapping[str, str] = field(default_factory=dict)
    """A router's backend (`host:port` of its URL) -> the replica at that address."""
    problems: tuple[JoinProblem, ...] = ()
    orchestrator: str | None = None
    """The stack that keys this fleet beyond its workload (`kserve`, `dynamo`, `ray_serve`), whose
    own catalog sources it reads; None for a plain workload."""
    matchers: tuple[tuple[str, str], ...] = ()
    """The fleet's labels as the engine's own series spell them (Triton names the model `model`,
    TGI names none); empty when they are `labels`."""
    orchestrator_selector: str = ""
    """Matchers for the orchestrator's own series of this fleet (a Dynamo frontend's, a Ray
    Serve proxy's)."""
    pools: Mapping[str, str] = field(default_factory=dict)
    """Replica -> its pool (`prefill`, `decode`) where the stack disaggregates them."""
    revisions: Mapping[str, str] = field(default_factory=dict)
    """Replica -> the revision it runs (a Knative revision of an InferenceService)."""
    kube_workloads: tuple[Workload, ...] = ()
    """The Kubernetes workloads behind an orchestrated fleet (one Deployment per revision or pool)."""
    joins: tuple[str, ...] = ()
    """How the fleet was keyed and its series joined, one line each, for `triage fleets`."""

    @property
    def name(self) -> str:
        """`namespace/model` (and `@kind/workload` when known): what `--fleet` takes. A value the
        stack does not export (TGI's model) is left out; a model that is a storage path (KServe's
        `/mnt/models`, the same for every service) gives way to the service's own name."""
        spelled = {k for k, _ in self.matchers} if self.matchers else {k for k, _ in self.labels}
        own = {k: k2 for (k, _), (k2, _) in zip(self.labels, self.matchers, strict=False)}
        values = [v or ("?" if own.get(k, k) in spelled else "") for k, v in self.labels]
        values = [v for v in values if v]
        if self.workload is not None and self.orchestrator is not None:
            values = [self.workload.name.split("/")[0] if v.startswith("/") else v for v in values]
        head = "/".join(values) or "?"
        return f"{head}@{self.workload}" if self.workload is not None else head

    @property
    def engine_matchers(self) -> tuple[tuple[str, str], ...]:
        """The fleet's labels in the engine's own spelling, empty values left out."""
        return tuple((k, v) for k, v in (self.matchers or self.labels) if v)

    @property
    def identity(self) -> tuple[tuple[str, str], ...]:
        """The labels a diagnosis of this fleet carries: the fleet labels, and its workload."""
        workload = (("workload", str(self.workload)),) if self.workload is not None else ()
        return (*self.labels, *workload)

    @property
    def namespace(self) -> str | None:
        return dict(self.labels).get("namespace")

    @property
    def gpu_join(self) -> GpuJoin | None:
        """The one way this fleet's GPUs were joined (the most common), or None without GPUs."""
        if not self.gpus:
            return None
        counts: dict[str, int] = {}
        for gpu in self.gpus:
            counts[gpu.joined_by] = counts.get(gpu.joined_by, 0) + 1
        return max(sorted(counts), key=lambda k: counts[k])

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "labels": dict(self.labels),
            "engine": self.engine,
            "workload": {"kind": self.workload.kind, "name": self.workload.name} if self.workload else None,
            "replica_label": self.replica_label,
            "replicas": list(self.replicas),
            "workers": dict(self.workers),
            "kube_pods": list(self.kube_pods),
            "gpus": [
                {
                    "hostname": g.hostname,
                    "gpu": g.gpu,
                    "uuid": g.uuid,
                    "replica": g.replica,
                    "joined_by": g.joined_by,
                }
                for g in self.gpus
            ],
            "routers": list(self.routers),
            "orchestrator": self.orchestrator,
            "pools": dict(self.pools),
            "revisions": dict(self.revisions),
            "kube_workloads": [str(w) for w in self.kube_workloads],
            "joins": list(self.joins),
            "problems": [str(p) for p in self.problems],
        }


@dataclass(frozen=True)
class FleetMap:
    """Every fleet found, and what could not be tied to any fleet."""

    fleets: tuple[Fleet, ...]
    problems: tuple[JoinProblem, ...] = ()
    idle_gpus: int = 0

    def find(self, wanted: str) -> list[Fleet]:
        """Fleets matching `--fleet`: a name as `triage fleets` prints it (or its start), or labels
        `key=value,...` (`{namespace="llm",model_name="..."}` works too)."""
        text = wanted.strip()
        if "=" in text:
            pairs = _label_pairs(text)
            return [f for f in self.fleets if _matches(f, pairs)]
        exact = [f for f in self.fleets if f.name == text]
        return exact or [f for f in self.fleets if f.name.startswith(text)]

    def one(self, wanted: str, where: str) -> Fleet:
        """The one fleet `wanted` names (as `find` reads it); ValueError naming the fleets `where`
        holds when it names none, or the ones it matches when it names several."""
        matches = self.find(wanted)
        if not matches:
            names = ", ".join(f.name for f in self.fleets) or "none found"
            raise ValueError(f"no fleet '{wanted}' in {where}; the fleets are: {names}")
        if len(matches) > 1:
            several = ", ".join(f.name for f in matches)
            raise ValueError(f"'{wanted}' matches {len(matches)} fleets ({several}); name one")
        return matches[0]

    def to_json(self) -> dict[str, Any]:
        return {
            "fleets": [f.to_json() for f in self.fleets],
            "idle_gpus": self.idle_gpus,
            "problems": [str(p) for p in self.problems],
        }


def _label_pairs(text: str) -> dict[str, str]:
    body = text.strip().removeprefix("{").removesuffix("}")
    pairs: dict[str, str] = {}
    for part in body.split(","):
        if not part.strip():
            continue
        key, sep, value = part.partition("=")
        if not sep:
            raise ValueError(f"'{part.strip()}' is not key=value")
        pairs[key.strip()] = value.strip().strip('"').strip("'")
    return pairs


def _matches(fleet: Fleet, pairs: Mapping[str, str]) -> bool:
    labels = dict(fleet.labels)
    for key, value in pairs.items():
        if key in ("workload", "deployment", "statefulset", "leaderworkerset"):
            if fleet.workload is None or fleet.workload.name != value:
                return False
        elif labels.get(key) != value:
            return False
    return True
