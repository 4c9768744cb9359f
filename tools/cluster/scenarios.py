"""The standard scenario: several fleets, each with its own incident, in one Prometheus.

`three_fleets()` lays out (defaults; every size is a parameter, for a benchmark's 10 x 100):

- `llm/vllm`: a vLLM V1 Deployment serving meta-llama/Llama-3.1-8B-Instruct, 3 replicas of one
  GPU, scraped by production-stack's engine ServiceMonitor, behind its router; KV pressure
  from minute 45 (cause kv_pressure, symptom tpot_slow);
- `llm/vllm-70b`: a LeaderWorkerSet of 4 groups (a leader serving the engine's metrics and
  one worker, 4 GPUs each) serving meta-llama/Llama-3.1-70B-Instruct, scraped by llm-d's
  decode PodMonitor; GPU 1 of group 2's leader reports XID 79 at minute 35, its engine
  crash-loops, 3 of 4 groups stay ready (cause gpu_fault, symptom errors);
- `llm/sglang-qwen`: an SGLang Deployment serving Qwen/Qwen2.5-7B-Instruct, 3 replicas,
  scraped by a ServiceMonitor of vllm-k8s-monitoring's shape; a traffic burst at minute 40
  (cause traffic_burst, symptom ttft_slow);
- `kubeai/model-qwen2-5-7b-instruct`: a healthy vLLM fleet serving the same model as
  sglang-qwen in another namespace, scraped by KubeAI's PodMonitor: a control that must
  stay without a cause;
- a DCGM exporter per GPU node (GPU Operator shape by default; idle GPUs included),
  kube-state-metrics (kube-prometheus-stack shape by default), the router.

More fleets repeat these four in namespaces `llm-2`, `kubeai-2`, ... Building runs the
synthesiser, serves every target, lets a real Prometheus scrape them through the
Operator's jobs, stops it, and backfills the history under the scraped label sets into a
second Prometheus that stays up until the scenario is closed:

    with three_fleets() as scenario:
        scenario.url            # the Prometheus holding the history
        scenario.truth.fleet("vllm-70b").faulty_gpus
"""

from __future__ import annotations

import os
import random
import time
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from types import TracebackType

from signals.tempprom import TemporaryPrometheus
from signals.timeparse import parse_duration, parse_instant
from tools.cluster.harness import Scrape, backfill, match, scrape
from tools.cluster.history import History, build_history
from tools.cluster.layout import layout
from tools.cluster.model import Cluster, ClusterError, FleetSpec, Gpu, Pod
from tools.cluster.servers import first_taken
from tools.cluster.stories import Story, tell

START = "2026-10-14T13:00:00Z"
_8B, _70B, _QWEN = (
    "meta-llama/Llama-3.1-8B-Instruct",
    "meta-llama/Llama-3.1-70B-Instruct",
    "Qwen/Qwen2.5-7B-Instruct",
)
TEMPLATES = (
    FleetSpec("vllm", "llm", "Deployment", "vllm", _8B, 3, "production-stack", "kv_pressure", seed=201),
    FleetSpec(
        "vllm-70b",
        "llm",
        "LeaderWorkerSet",
        "vllm",
        _70B,
        4,
        "llm-d",
        "gpu_fault",
        gpus_per_pod=4,
        group_size=2,
        seed=202,
    ),
    FleetSpec(
        "sglang-qwen",
        "llm",
        "Deployment",
        "sglang",
        _QWEN,
        3,
        "vllm-k8s-monitoring",
        "traffic_burst",
        seed=203,
    ),
    FleetSpec(
        "model-qwen2-5-7b-instruct", "kubeai", "Deployment", "vllm", _QWEN, 3, "kubeai", "healthy", seed=204
    ),
)


@dataclass(frozen=True)
class GpuTruth:
    node: str
    index: int
    uuid: str


@dataclass(frozen=True)
class PodTruth:
    """A fleet pod: its role (engine or worker), placement and GPUs; `address` is the engine's
    `instance` (`<podIP>:<port>`), None for a worker."""

    name: str
    ip: str
    node: str
    role: str
    replica: int
    gpus: tuple[GpuTruth, ...]
    address: str | None


@dataclass(frozen=True)
class FleetTruth:
    """What a correct fleet discovery and diagnosis must find (times in epoch seconds)."""

    namespace: str
    name: str
    model_name: str
    engine: str
    kind: str
    labels: Mapping[str, str]
    pods: tuple[PodTruth, ...]
    story: str
    cause: str | None
    also: tuple[str, ...]
    symptom: str | None
    start: float
    onset: float
    at: float
    job: str
    scrape_pool: str
    monitor: str
    statefulsets: tuple[str, ...]
    replicaset: str | None
    faulty_gpus: tuple[GpuTruth, ...] = ()
    crash_looping: tuple[str, ...] = ()


@dataclass(frozen=True)
class Truth:
    start: float
    end: float
    step: float
    fleets: tuple[FleetTruth, ...]
    idle_gpus: tuple[GpuTruth, ...]
    nodes: tuple[str, ...]

    def fleet(self, name: str, namespace: str | None = None) -> FleetTruth:
        found = [f for f in self.fleets if f.name == name and namespace in (None, f.namespace)]
        if len(found) != 1:
            raise KeyError(f"{len(found)} fleets named {name!r} in {namespace or 'any namespace'}")
        return found[0]


def _gpu(g: Gpu) -> GpuTruth:
    return GpuTruth(g.node, g.index, g.uuid)


def _pod(p: Pod) -> PodTruth:
    address = p.address if p.role == "engine" else None
    return PodTruth(p.name, p.ip, p.node, p.role, p.replica or 0, tuple(_gpu(g) for g in p.gpus), address)


def truth(cluster: Cluster, history: History, scraped: Scrape) -> Truth:
    """The truth record; the `job` label is read from the scrape (the relabeling decides it)."""
    fleets = []
    for fh in history.fleets:
        w, story = fh.workload, fh.story
        spec = w.spec
        faulty = tuple(
            _gpu(w.members(r)[g // spec.gpus_per_pod].gpus[g % spec.gpus_per_pod]) for r, g in story.faulty
        )
        monitor = w.monitor
        fleets.append(
            FleetTruth(
                namespace=spec.namespace,
                name=spec.name,
                model_name=spec.model_name,
                engine=spec.engine,
                kind=spec.kind,
                labels={"namespace": spec.namespace, "model_name": spec.model_name},
                pods=tuple(_pod(p) for p in w.pods),
                story=story.story,
                cause=story.cause,
                also=story.also,
                symptom=story.symptom,
                start=history.start,
                onset=history.start + story.onset,
                at=history.start + story.at,
                job=scraped.targets[w.engine_pods[0].address]["job"],
                scrape_pool=monitor.job_name,
                monitor=monitor.source,
                statefulsets=w.statefulsets,
                replicaset=w.replicaset,
                faulty_gpus=faulty,
                crash_looping=tuple(w.engine_pods[r].name for r, _ in story.crash),
            )
        )
    idle = tuple(_gpu(g) for g in cluster.gpus if cluster.holder(g) is None)
    end = history.start + (history.n - 1) * history.step
    return Truth(history.start, end, history.step, tuple(fleets), idle, tuple(n.name for n in cluster.nodes))


def specs(fleets: int = 4, replicas: int | None = None) -> list[FleetSpec]:
    """`fleets` fleets cycling through the four templates; `replicas` overrides every size."""
    out = []
    for i in range(fleets):
        base = TEMPLATES[i % len(TEMPLATES)]
        cycle = i // len(TEMPLATES)
        namespace = base.namespace if cycle == 0 else f"{base.namespace}-{cycle + 1}"
        out.append(
            replace(
                base, namespace=namespace, replicas=replicas or base.replicas, seed=base.seed + 10 * cycle
            )
        )
    return out


def free_cluster(fleet_specs: list[FleetSpec], *, dcgm: str, ksm: str, router: bool) -> Cluster:
    """The cluster on a random 127.x.0.0/16 whose every target address is free now: other
    clusters (another test run, a benchmark) may be using loopback ranges at the same time."""
    rng = random.Random(os.getpid() ^ time.monotonic_ns())
    for _ in range(20):
        cluster = layout(fleet_specs, subnet=rng.randint(16, 250), dcgm=dcgm, ksm=ksm, router=router)
        if first_taken(p.address for p in cluster.targets) is None:
            return cluster
    raise ClusterError("no free loopback /16 found for the cluster's targets after 20 tries")


def tell_all(fleet_specs: list[FleetSpec], duration: str, step: str, start: str = START) -> list[Story]:
    """Each fleet's story, on one clock."""
    return [
        tell(
            s.story,
            name=s.name,
            replicas=s.replicas,
            gpus=s.gpus_per_pod * s.group_size,
            duration=duration,
            interval=step,
            start=start,
            seed=s.seed,
        )
        for s in fleet_specs
    ]


@dataclass
class Scenario:
    """A built cluster and the Prometheus holding its history; close it (or use `with`)."""

    fleets: int = 4
    replicas: int | None = None
    duration: str = "90m"
    step: str = "30s"
    start: str = START
    interval: float = 1.0
    dcgm: str = "gpu-operator"
    ksm: str = "kube-prometheus-stack"
    router: bool = True
    cluster: Cluster | None = None
    history: History | None = None
    scraped: Scrape | None = None
    truth: Truth | None = None
    prometheus: TemporaryPrometheus | None = None
    timings: dict[str, float] = field(default_factory=dict)

    @property
    def url(self) -> str:
        if self.prometheus is None:
            raise RuntimeError("the scenario is not running")
        return self.prometheus.url

    def start_all(self) -> None:
        started = time.monotonic()
        fleet_specs = specs(self.fleets, self.replicas)
        cluster = free_cluster(fleet_specs, dcgm=self.dcgm, ksm=self.ksm, router=self.router)
        history = build_history(cluster, tell_all(fleet_specs, self.duration, self.step, self.start))
        self.timings["synthesise"] = time.monotonic() - started
        scraped = scrape(cluster, history, interval=self.interval)
        self.timings["scrape"] = time.monotonic() - started - self.timings["synthesise"]
        series = match(history, scraped)
        prometheus = backfill(history, series)
        prometheus.start()
        self.cluster, self.history, self.scraped, self.prometheus = cluster, history, scraped, prometheus
        self.truth = truth(cluster, history, scraped)
        self.timings["total"] = time.monotonic() - started
        self.timings["backfill"] = self.timings["total"] - self.timings["scrape"] - self.timings["synthesise"]

    def stop(self) -> None:
        prometheus, self.prometheus = self.prometheus, None
        if prometheus is not None:
            prometheus.stop()

    def __enter__(self) -> Scenario:
        try:
            self.start_all()
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()


def three_fleets(
    *,
    fleets: int = 4,
    replicas: int | None = None,
    duration: str = "90m",
    step: str = "30s",
    start: str = START,
    interval: float = 1.0,
    dcgm: str = "gpu-operator",
    ksm: str = "kube-prometheus-stack",
    router: bool = True,
) -> Scenario:
    """The standard scenario, not yet built: enter it (`with`) to build and start it."""
    parse_duration(duration)
    parse_duration(step)
    parse_instant(start)
    return Scenario(fleets, replicas, duration, step, start, interval, dcgm, ksm, router)
