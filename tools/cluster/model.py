"""The cluster's objects as Kubernetes would report them: nodes, GPUs, pods, Services, monitors.

Frozen dataclasses, so a laid-out cluster can be shared by the exposition servers, the
scrape configuration and the truth record without anyone changing it underneath. Names
follow the controllers' own rules, because fleet discovery parses them: a Deployment's pod
is `<name>-<pod-template-hash>-<5 chars>` (both from Kubernetes' "safe" alphabet, no vowels),
a StatefulSet's is `<name>-<ordinal>`, a LeaderWorkerSet's leader `<lws>-<group>` and its
workers `<lws>-<group>-<index>`. Everything random is derived from a hash of the names, so
the same specs always give the same cluster.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from functools import cached_property

Labels = tuple[tuple[str, str], ...]

SAFE_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"
GPU_MODEL = "NVIDIA H100 80GB HBM3"
DRIVER_VERSION = "550.127.05"
ENGINE_PORTS = {"vllm": 8000, "sglang": 30000}
KINDS = ("Deployment", "StatefulSet", "LeaderWorkerSet")
ENGINES = ("vllm", "sglang")


class ClusterError(ValueError):
    """The harness was given something it cannot turn into a faithful cluster; the message says what."""


def digest(*parts: str) -> str:
    return hashlib.sha256("/".join(parts).encode()).hexdigest()


def safe_string(length: int, *parts: str) -> str:
    """Characters of Kubernetes' safe alphabet, as in pod name suffixes and template hashes."""
    h = digest(*parts)
    return "".join(SAFE_ALPHABET[int(h[2 * k : 2 * k + 2], 16) % len(SAFE_ALPHABET)] for k in range(length))


def uid(*parts: str) -> str:
    h = digest("uid", *parts)
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:32]}"


def gpu_uuid(node: str, index: int) -> str:
    h = digest("gpu", node, str(index))
    return f"GPU-{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:32]}"


def sanitize(name: str) -> str:
    """A Kubernetes label name as Prometheus' service discovery writes it in `__meta_*` labels."""
    return "".join(c if c.isalnum() or c == "_" else "_" for c in name)


@dataclass(frozen=True)
class Gpu:
    node: str
    index: int
    uuid: str
    model: str = GPU_MODEL

    @property
    def device(self) -> str:
        return f"nvidia{self.index}"


@dataclass(frozen=True)
class Node:
    name: str
    ip: str
    gpus: tuple[Gpu, ...]


@dataclass(frozen=True)
class Port:
    name: str
    number: int


@dataclass(frozen=True)
class Container:
    name: str
    image: str
    ports: tuple[Port, ...] = ()


@dataclass(frozen=True)
class Owner:
    kind: str
    name: str


@dataclass(frozen=True)
class Pod:
    """A pod. `role` says what it runs (engine, worker, dcgm, ksm, router); `fleet` and
    `replica` tie an engine or worker pod to its fleet (`replica` is the synthesised
    replica it stands for, the group index for a LeaderWorkerSet)."""

    namespace: str
    name: str
    uid: str
    ip: str
    node: str
    host_ip: str
    labels: Labels
    containers: tuple[Container, ...]
    owner: Owner
    role: str
    gpus: tuple[Gpu, ...] = ()
    fleet: str | None = None
    replica: int | None = None
    member: int = 0

    @property
    def container(self) -> Container:
        """The container that serves metrics (the first with a port), else the first one."""
        return next((c for c in self.containers if c.ports), self.containers[0])

    @property
    def serving(self) -> Port | None:
        """The port this pod's exporter listens on, or None (a worker pod serves no metrics)."""
        return self.container.ports[0] if self.container.ports else None

    @property
    def address(self) -> str:
        if self.serving is None:
            raise ValueError(f"pod {self.namespace}/{self.name} serves no metrics")
        return f"{self.ip}:{self.serving.number}"


@dataclass(frozen=True)
class ServicePort:
    name: str
    port: int
    target_port: int


@dataclass(frozen=True)
class Service:
    namespace: str
    name: str
    labels: Labels
    selector: Labels
    ports: tuple[ServicePort, ...]


@dataclass(frozen=True)
class Monitor:
    """A ServiceMonitor or PodMonitor, reduced to what the Operator's generated job depends on.

    `relabelings` and `metric_relabelings` are already in Prometheus' form (`source_labels`,
    `target_label`, ...), as the Operator writes them into the job. `source` names the real
    file in shared/real whose shape this monitor follows.
    """

    kind: str
    namespace: str
    name: str
    selector: Labels
    port: str
    honor_labels: bool
    source: str
    job_label: str | None = None
    namespaces: tuple[str, ...] = ()
    relabelings: tuple[tuple[tuple[str, object], ...], ...] = ()
    metric_relabelings: tuple[tuple[tuple[str, object], ...], ...] = ()
    path: str = "/metrics"

    @property
    def job_name(self) -> str:
        prefix = "serviceMonitor" if self.kind == "ServiceMonitor" else "podMonitor"
        return f"{prefix}/{self.namespace}/{self.name}/0"

    @property
    def watched(self) -> tuple[str, ...]:
        """The namespaces discovery looks in: the namespaceSelector's, else the monitor's own."""
        return self.namespaces or (self.namespace,)


@dataclass(frozen=True)
class FleetSpec:
    """One fleet to lay out: the replicas serving one model in one workload.

    `replicas` counts pods for a Deployment or StatefulSet and groups for a
    LeaderWorkerSet (`group_size` pods each: a leader serving the engine's metrics and
    `group_size - 1` workers). `monitor` is the scrape shape (see `tools.cluster.monitors`),
    `story` the incident told on it (see `tools.cluster.stories`).
    """

    name: str
    namespace: str
    kind: str
    engine: str
    model_name: str
    replicas: int
    monitor: str
    story: str = "healthy"
    gpus_per_pod: int = 1
    group_size: int = 1
    seed: int = 1

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"fleet {self.name}: unknown kind {self.kind!r}; known: {', '.join(KINDS)}")
        if self.engine not in ENGINES:
            raise ValueError(
                f"fleet {self.name}: unknown engine {self.engine!r}; known: {', '.join(ENGINES)}"
            )
        if self.replicas < 1 or self.gpus_per_pod < 1 or self.group_size < 1:
            raise ValueError(f"fleet {self.name}: replicas, gpus_per_pod and group_size must be >= 1")
        if self.group_size > 1 and self.kind != "LeaderWorkerSet":
            raise ValueError(f"fleet {self.name}: only a LeaderWorkerSet has groups")

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"

    @property
    def port(self) -> int:
        return ENGINE_PORTS[self.engine]


@dataclass(frozen=True)
class Workload:
    """A laid-out fleet: its monitor, controller objects and pods, in replica order.

    `replicaset` is a Deployment's current ReplicaSet; `statefulsets` are the StatefulSets
    kube-state-metrics sees (a LeaderWorkerSet's leader set first, then one worker set per
    group, named `<lws>-<group>` and owned by that group's leader pod).
    """

    spec: FleetSpec
    monitor: Monitor
    engine_pods: tuple[Pod, ...]
    worker_pods: tuple[Pod, ...] = ()
    replicaset: str | None = None
    statefulsets: tuple[str, ...] = ()

    @property
    def pods(self) -> tuple[Pod, ...]:
        return self.engine_pods + self.worker_pods

    def members(self, replica: int) -> tuple[Pod, ...]:
        """The pods of one replica: the pod itself, or a group's leader then its workers."""
        workers = tuple(p for p in self.worker_pods if p.replica == replica)
        return (self.engine_pods[replica], *sorted(workers, key=lambda p: p.member))


@dataclass(frozen=True)
class Cluster:
    """Everything laid out; `subnet` is the second octet of its 127.x.0.0/16 loopback range."""

    subnet: int
    nodes: tuple[Node, ...]
    workloads: tuple[Workload, ...]
    pods: tuple[Pod, ...]
    services: tuple[Service, ...]
    monitors: tuple[Monitor, ...]
    dcgm: str
    ksm: str
    extra_deployments: tuple[tuple[str, str, str], ...] = field(default=())
    """(namespace, Deployment, its ReplicaSet) of the Deployments that are no fleet (router, KSM)."""

    @property
    def targets(self) -> tuple[Pod, ...]:
        """The pods whose metrics endpoint a monitor scrapes (engine leaders and exporters)."""
        return tuple(p for p in self.pods if p.role != "worker")

    @property
    def gpus(self) -> tuple[Gpu, ...]:
        return tuple(g for n in self.nodes for g in n.gpus)

    @cached_property
    def _holders(self) -> dict[Gpu, Pod]:
        return {g: p for p in self.pods for g in p.gpus}

    def holder(self, gpu: Gpu) -> Pod | None:
        """The pod a GPU is allocated to, or None for an idle GPU."""
        return self._holders.get(gpu)

    def workload(self, key: str) -> Workload:
        for w in self.workloads:
            if w.spec.key == key:
                return w
        raise KeyError(f"no fleet {key}")

    @cached_property
    def _dcgm_pods(self) -> dict[str, Pod]:
        return {p.node: p for p in self.pods if p.role == "dcgm"}

    def dcgm_pod(self, node: str) -> Pod:
        return self._dcgm_pods[node]

    def pod_by_role(self, role: str) -> Pod:
        return next(p for p in self.pods if p.role == role)
