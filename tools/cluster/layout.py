"""Laying out a cluster: nodes, pod placement, loopback addresses, controllers' names.

Each pod gets its own address in the cluster's 127.<subnet>.0.0/16 range (every 127.x.y.z is
loopback on Linux), so its exporter binds its own IP on the real port and Prometheus'
`instance` reads `<podIP>:<port>` as in a real cluster. Pod k is 127.<subnet>.<1 + k // 250>.
<1 + k % 250> (up to 59,750 pods), GPU node i 127.<subnet>.<240 + i // 250>.<1 + i % 250>,
the system node 127.<subnet>.0.254, so 10 fleets of 100 replicas fit easily.

GPU pods are placed on 8-GPU nodes (`gpu-node-00`, ...) first fit, largest first; if that
leaves no GPU idle, one more GPU node is added, so every cluster has idle GPUs whose DCGM
series carry no workload. kube-state-metrics and the router run on a `system-node-00`
without GPUs, where no DCGM exporter runs (the GPU Operator's DaemonSet only lands on GPU
nodes). A LeaderWorkerSet is laid out with `restartPolicy: None`, so a leader whose
container crashes restarts in place instead of its whole group being recreated.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from tools.cluster.model import (
    Cluster,
    Container,
    FleetSpec,
    Gpu,
    Labels,
    Monitor,
    Node,
    Owner,
    Pod,
    Service,
    Workload,
    digest,
    gpu_uuid,
    safe_string,
    uid,
)
from tools.cluster.monitors import (
    DCGM_NAMESPACE,
    KSM_NAMESPACE,
    Shape,
    dcgm_shape,
    engine_shape,
    ksm_shape,
    router_shape,
)

GPUS_PER_NODE = 8
SYSTEM_NODE = "system-node-00"


@dataclass
class _Placer:
    subnet: int
    gpus_per_node: int
    nodes: list[list[Gpu]] = field(default_factory=list)
    free: list[list[Gpu]] = field(default_factory=list)
    pods: int = 0
    placed: dict[tuple[str, int, int], tuple[str, tuple[Gpu, ...]]] = field(default_factory=dict)

    def node_name(self, i: int) -> str:
        return f"gpu-node-{i:02d}"

    def add_node(self) -> None:
        name = self.node_name(len(self.nodes))
        gpus = [Gpu(name, i, gpu_uuid(name, i)) for i in range(self.gpus_per_node)]
        self.nodes.append(gpus)
        self.free.append(list(gpus))

    def take(self, count: int, what: str) -> tuple[str, tuple[Gpu, ...]]:
        if count > self.gpus_per_node:
            raise ValueError(f"{what} needs {count} GPUs, more than a node has ({self.gpus_per_node})")
        for i, free in enumerate(self.free):
            if len(free) >= count:
                taken, self.free[i] = free[:count], free[count:]
                return self.node_name(i), tuple(taken)
        self.add_node()
        return self.take(count, what)

    def plan(self, specs: Sequence[FleetSpec]) -> None:
        """Place every GPU pod, largest first (first fit decreasing), before any pod is made."""
        wanted = [(s, g, w) for s in specs for g in range(s.replicas) for w in range(s.group_size)]
        for spec, g, w in sorted(wanted, key=lambda item: -item[0].gpus_per_pod):
            self.placed[(spec.key, g, w)] = self.take(spec.gpus_per_pod, f"{spec.key} replica {g}")

    def pod_ip(self) -> str:
        k, self.pods = self.pods, self.pods + 1
        if k >= 239 * 250:
            raise ValueError("more pods than the cluster's loopback /16 holds")
        return f"127.{self.subnet}.{1 + k // 250}.{1 + k % 250}"

    def node_ip(self, i: int) -> str:
        if i >= 15 * 250:
            raise ValueError("more nodes than the cluster's loopback /16 holds")
        return f"127.{self.subnet}.{240 + i // 250}.{1 + i % 250}"

    def host_ip(self, node: str) -> str:
        if node == SYSTEM_NODE:
            return f"127.{self.subnet}.0.254"
        return self.node_ip(int(node.rsplit("-", 1)[1]))


def _pod(
    placer: _Placer,
    *,
    namespace: str,
    name: str,
    node: str,
    labels: Labels,
    containers: tuple[Container, ...],
    owner: Owner,
    role: str,
    gpus: tuple[Gpu, ...] = (),
    fleet: str | None = None,
    replica: int | None = None,
    member: int = 0,
) -> Pod:
    return Pod(
        namespace=namespace,
        name=name,
        uid=uid(namespace, name),
        ip=placer.pod_ip(),
        node=node,
        host_ip=placer.host_ip(node),
        labels=labels,
        containers=containers,
        owner=owner,
        role=role,
        gpus=gpus,
        fleet=fleet,
        replica=replica,
        member=member,
    )


def _lws_labels(spec: FleetSpec, group: int, worker: int) -> Labels:
    revision = safe_string(10, spec.key, "lws-revision")
    return (
        ("leaderworkerset.sigs.k8s.io/name", spec.name),
        ("leaderworkerset.sigs.k8s.io/group-index", str(group)),
        ("leaderworkerset.sigs.k8s.io/group-key", digest(spec.key, str(group))[:40]),
        ("leaderworkerset.sigs.k8s.io/worker-index", str(worker)),
        ("leaderworkerset.sigs.k8s.io/template-revision-hash", revision),
    )


def _workload(spec: FleetSpec, placer: _Placer) -> tuple[Workload, Shape]:
    shape = engine_shape(spec)
    if spec.group_size > 1 and shape.worker is None:
        raise ValueError(f"fleet {spec.key}: the {spec.monitor} shape has no worker pods")
    ns, name = spec.namespace, spec.name
    engines: list[Pod] = []
    workers: list[Pod] = []
    if spec.kind == "Deployment":
        hash_ = safe_string(10, spec.key, "pod-template-hash")
        replicaset = f"{name}-{hash_}"
        for i in range(spec.replicas):
            pod_name = f"{replicaset}-{safe_string(5, spec.key, 'pod', str(i))}"
            node, gpus = placer.placed[(spec.key, i, 0)]
            labels = (*shape.pod_labels, ("pod-template-hash", hash_))
            engines.append(
                _pod(
                    placer,
                    namespace=ns,
                    name=pod_name,
                    node=node,
                    labels=labels,
                    containers=shape.containers,
                    owner=Owner("ReplicaSet", replicaset),
                    role="engine",
                    gpus=gpus,
                    fleet=spec.key,
                    replica=i,
                )
            )
        return Workload(spec, shape.monitor, tuple(engines), replicaset=replicaset), shape
    revision = f"{name}-{safe_string(10, spec.key, 'controller-revision')}"
    worker = shape.worker or shape.containers[0]
    for g in range(spec.replicas):
        for w in range(spec.group_size):
            lws = spec.kind == "LeaderWorkerSet"
            pod_name = f"{name}-{g}" if w == 0 else f"{name}-{g}-{w}"
            owner = Owner("StatefulSet", name if w == 0 else f"{name}-{g}")
            node, gpus = placer.placed[(spec.key, g, w)]
            labels = (
                *shape.pod_labels,
                *(_lws_labels(spec, g, w) if lws else ()),
                ("controller-revision-hash", revision),
                ("statefulset.kubernetes.io/pod-name", pod_name),
            )
            pod = _pod(
                placer,
                namespace=ns,
                name=pod_name,
                node=node,
                labels=labels,
                containers=shape.containers if w == 0 else (worker,),
                owner=owner,
                role="engine" if w == 0 else "worker",
                gpus=gpus,
                fleet=spec.key,
                replica=g,
                member=w,
            )
            (engines if w == 0 else workers).append(pod)
    sets = (name, *(f"{name}-{g}" for g in range(spec.replicas) if spec.group_size > 1))
    return Workload(spec, shape.monitor, tuple(engines), tuple(workers), statefulsets=sets), shape


def _add_unique(found: dict[tuple[str, str, str], object], key: tuple[str, str, str], item: object) -> None:
    if key in found and found[key] != item:
        raise ValueError(f"two different {key[0]} objects named {key[1]}/{key[2]}")
    found[key] = item


def layout(
    specs: Sequence[FleetSpec],
    *,
    subnet: int,
    dcgm: str = "gpu-operator",
    ksm: str = "kube-prometheus-stack",
    router: bool = True,
    gpus_per_node: int = GPUS_PER_NODE,
) -> Cluster:
    """The cluster for these fleets, its exporters and their monitors, on 127.<subnet>.0.0/16."""
    if not 1 <= subnet <= 254:
        raise ValueError(f"subnet must be 1..254, got {subnet}")
    keys = [s.key for s in specs]
    if len(set(keys)) != len(keys):
        raise ValueError(f"fleets must have distinct namespace/name, got {keys}")
    placer = _Placer(subnet, gpus_per_node)
    placer.plan(specs)

    workloads: list[Workload] = []
    objects: dict[tuple[str, str, str], object] = {}
    for spec in specs:
        workload, shape = _workload(spec, placer)
        workloads.append(workload)
        if shape.service is not None:
            _add_unique(objects, ("Service", spec.namespace, shape.service.name), shape.service)
        _add_unique(objects, (shape.monitor.kind, spec.namespace, shape.monitor.name), shape.monitor)
    if not any(placer.free):
        placer.add_node()
    pods = [p for w in workloads for p in w.pods]

    prefix, dshape = dcgm_shape(dcgm)
    for i in range(len(placer.nodes)):
        node = placer.node_name(i)
        pods.append(
            _pod(
                placer,
                namespace=DCGM_NAMESPACE,
                name=f"{prefix}-{safe_string(5, node, prefix)}",
                node=node,
                labels=(*dshape.pod_labels, ("pod-template-generation", "1")),
                containers=dshape.containers,
                owner=Owner("DaemonSet", prefix),
                role="dcgm",
            )
        )
    extra: list[tuple[str, str, str]] = []
    system: list[tuple[str, str, Shape, str]] = [(KSM_NAMESPACE, *ksm_shape(ksm), "ksm")]
    release = next((s for s in specs if s.monitor == "production-stack"), None)
    if router and release is not None:
        system.append((release.namespace, *router_shape(release.name, release.namespace), "router"))
    for namespace, deployment, shape, role in system:
        hash_ = safe_string(10, namespace, deployment, "pod-template-hash")
        replicaset = f"{deployment}-{hash_}"
        pods.append(
            _pod(
                placer,
                namespace=namespace,
                name=f"{replicaset}-{safe_string(5, namespace, deployment, 'pod')}",
                node=SYSTEM_NODE,
                labels=(*shape.pod_labels, ("pod-template-hash", hash_)),
                containers=shape.containers,
                owner=Owner("ReplicaSet", replicaset),
                role=role,
            )
        )
        extra.append((namespace, deployment, replicaset))
    for shape in (dshape, *(s for _, _, s, _ in system)):
        assert shape.service is not None
        _add_unique(objects, ("Service", shape.service.namespace, shape.service.name), shape.service)
        _add_unique(objects, (shape.monitor.kind, shape.monitor.namespace, shape.monitor.name), shape.monitor)

    nodes = tuple(Node(placer.node_name(i), placer.node_ip(i), tuple(g)) for i, g in enumerate(placer.nodes))
    return Cluster(
        subnet=subnet,
        nodes=(*nodes, Node(SYSTEM_NODE, placer.host_ip(SYSTEM_NODE), ())),
        workloads=tuple(workloads),
        pods=tuple(pods),
        services=tuple(o for k, o in objects.items() if k[0] == "Service" and isinstance(o, Service)),
        monitors=tuple(o for k, o in objects.items() if isinstance(o, Monitor)),
        dcgm=dcgm,
        ksm=ksm,
        extra_deployments=tuple(extra),
    )
