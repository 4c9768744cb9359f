"""The cluster's history: every series each target exposes, at every step of the incident.

Values come from the existing synthesiser. For each fleet, `tools.rawsynth.RawFleet` plays
the Fleet's story forward into exporter series labelled by replica (`instance="vllm-0"`);
here each series is moved onto the cluster: replica i is the fleet's pod i (a
LeaderWorkerSet's group i, whose GPUs are the leader's then the workers'), and its labels
become what that exporter really writes (shared/real/exposition-*.txt):

- vLLM V1 keeps `model_name` and `engine` (plus `finished_reason`, `le` and the
  `cache_config_info` fields); the replica label goes, the scrape adds the pod's own.
- SGLang is given the 0.5.10 shape of the real dump: `model_name` and `tp_rank` on gauges and
  counters, `model_name` alone on histograms (the synthesiser's newer `engine_type`,
  `pp_rank`, `moe_ep_rank`, `is_streaming` and `cache_source` are dropped).
- DCGM writes `gpu`, `UUID`, `device`, `modelName`, `Hostname` (the node),
  `DCGM_FI_DRIVER_VERSION` and the `container`, `namespace`, `pod` of the workload holding
  the GPU, empty for an idle GPU; no `pci_bus_id`, and the last XID as one series whose
  value changes (the synthesiser's per-code `err_code`/`err_msg` series are merged, which is
  the only merge allowed: any other two series landing on one label set is an error).
- kube-state-metrics: see `tools.cluster.kube`. The router re-exports each backend's
  running and waiting counts with `server="http://<podIP>:<port>"`.

Idle GPUs, which no Fleet has, get quiet series of their own. Stale markers become gaps.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

from signals.timeparse import parse_instant
from tools.cluster.exposition import family_of, render
from tools.cluster.kube import kube_series
from tools.cluster.model import DRIVER_VERSION, Cluster, ClusterError, Gpu, Labels, Pod, Workload
from tools.cluster.stories import Story
from tools.rawsynth import RawFleet, RawSpec

FloatArray = npt.NDArray[np.float64]
SGLANG_KEPT = {"model_name", "tp_rank", "le"}
DCGM_DROPPED = {"pci_bus_id", "err_code", "err_msg", "instance"}
FB_TOTAL_MIB = 81559.0
FB_RESERVED_MIB = 570.0


def describe(name: str, labels: Mapping[str, str] | Labels) -> str:
    pairs = labels.items() if isinstance(labels, Mapping) else labels
    return name + "{" + ",".join(f'{k}="{v}"' for k, v in pairs) + "}"


@dataclass(frozen=True)
class Exposed:
    """One series a target exposes: exposition labels (the exporter's, in its order) and history."""

    target: str
    name: str
    labels: Labels
    values: FloatArray
    origin: str

    def last(self) -> float | None:
        finite = np.flatnonzero(np.isfinite(self.values))
        return float(self.values[finite[-1]]) if finite.size else None


@dataclass(frozen=True)
class FleetHistory:
    workload: Workload
    story: Story
    raw: RawFleet


@dataclass(frozen=True)
class History:
    start: float
    step: float
    n: int
    series: tuple[Exposed, ...]
    fleets: tuple[FleetHistory, ...]
    styles: Mapping[str, str]
    _by_target: dict[str, list[Exposed]] = field(default_factory=dict, init=False, compare=False, repr=False)

    def __post_init__(self) -> None:
        for s in self.series:
            self._by_target.setdefault(s.target, []).append(s)

    def of(self, target: str) -> list[Exposed]:
        return self._by_target.get(target, [])

    def presence(self, target: str) -> npt.NDArray[np.bool_]:
        """Steps at which the target answered (it exposed at least one sample)."""
        present = np.zeros(self.n, dtype=bool)
        for s in self.of(target):
            present |= np.isfinite(s.values)
        return present

    def page(self, target: str) -> str:
        """The target's exposition at the last moment; a series that ended earlier is served with
        its last value, so that its label set is learnt by the scrape too."""
        samples = [(s.name, s.labels, v) for s in self.of(target) if (v := s.last()) is not None]
        return render(samples, self.styles[target])


class Rows:
    """Exposed series being collected, by target; two series on one label set is an error."""

    def __init__(self, n: int) -> None:
        self.n = n
        self.targets: dict[str, dict[tuple[str, Labels], Exposed]] = {}

    def add(
        self, target: str, name: str, labels: Labels, values: FloatArray, origin: str, merge: bool = False
    ) -> None:
        family_of(name)
        clean = np.where(np.isneginf(values), np.nan, np.asarray(values, dtype=float))
        if len(clean) != self.n:
            raise ClusterError(f"{origin}: {len(clean)} steps, the history has {self.n}")
        rows = self.targets.setdefault(target, {})
        old = rows.get((name, labels))
        if old is not None:
            if not merge or (np.isfinite(old.values) & np.isfinite(clean)).any():
                raise ClusterError(
                    f"{origin} and {old.origin} both become {describe(name, labels)} on target {target}"
                )
            clean = np.where(np.isfinite(clean), clean, old.values)
        rows[(name, labels)] = Exposed(target, name, labels, clean, origin)

    def of(self, target: str) -> list[Exposed]:
        return list(self.targets.get(target, {}).values())

    def presence(self, target: str) -> npt.NDArray[np.bool_]:
        present = np.zeros(self.n, dtype=bool)
        for s in self.of(target):
            present |= np.isfinite(s.values)
        return present

    def all(self) -> tuple[Exposed, ...]:
        return tuple(s for rows in self.targets.values() for s in rows.values())


def engine_labels(name: str, labels: Mapping[str, str]) -> Labels:
    if name.startswith("sglang:"):
        histogram = family_of(name)[1] == "histogram"
        kept = {k: v for k, v in labels.items() if k in SGLANG_KEPT}
        if not histogram:
            kept.setdefault("tp_rank", "0")
        else:
            kept.pop("tp_rank", None)
        labels = kept
    else:
        labels = {k: v for k, v in labels.items() if k != "instance"}
    return tuple(sorted(labels.items(), key=lambda kv: (kv[0] == "le", kv[0])))


def dcgm_labels(gpu: Gpu, holder: Pod | None) -> Labels:
    return (
        ("gpu", str(gpu.index)),
        ("UUID", gpu.uuid),
        ("device", gpu.device),
        ("modelName", gpu.model),
        ("Hostname", gpu.node),
        ("DCGM_FI_DRIVER_VERSION", DRIVER_VERSION),
        ("container", holder.container.name if holder else ""),
        ("namespace", holder.namespace if holder else ""),
        ("pod", holder.name if holder else ""),
    )


def _fleet_gpu(workload: Workload, replica: int, gpu: int) -> tuple[Gpu, Pod]:
    members = workload.members(replica)
    per_pod = workload.spec.gpus_per_pod
    if gpu // per_pod >= len(members):
        raise ClusterError(f"fleet {workload.spec.key}: replica {replica} has no GPU {gpu}")
    pod = members[gpu // per_pod]
    return pod.gpus[gpu % per_pod], pod


def _fleet_rows(cluster: Cluster, fh: FleetHistory, rows: Rows) -> None:
    workload, raw = fh.workload, fh.raw
    names = raw.f.names
    for (metric, pairs), values in raw.out.series.items():
        labels = dict(pairs)
        origin = f"{describe(metric, pairs)} of fleet {workload.spec.key}"
        if metric.startswith("kube_"):
            continue
        replica = labels.get("instance")
        if replica not in names:
            raise ClusterError(f"{origin}: no replica of the fleet is called {replica!r}")
        index = names.index(replica)
        if metric.startswith(("vllm:", "sglang:")):
            pod = workload.engine_pods[index]
            rows.add(pod.address, metric, engine_labels(metric, labels), values, origin)
        elif metric.startswith("DCGM_"):
            slot = raw.node_of[replica][1]
            gpu, holder = _fleet_gpu(workload, index, int(labels["gpu"]) - slot)
            exposed = dcgm_labels(gpu, holder)
            rows.add(
                cluster.dcgm_pod(gpu.node).address,
                metric,
                exposed,
                values,
                origin,
                merge=metric == "DCGM_FI_DEV_XID_ERRORS",
            )
        else:
            raise ClusterError(f"{origin}: no exporter of the cluster exposes {metric}")


def _idle_rows(cluster: Cluster, rows: Rows, seed: int) -> None:
    for gpu in cluster.gpus:
        if cluster.holder(gpu) is not None:
            continue
        rng = np.random.default_rng(seed + 7 * gpu.index + 1000 * int(gpu.node.rsplit("-", 1)[1]))
        n = rows.n
        used = np.full(n, 1.0)
        quiet = {
            "DCGM_FI_DEV_GPU_TEMP": np.round(31 + rng.normal(0, 0.6, n)),
            "DCGM_FI_DEV_POWER_USAGE": np.round(68 + rng.normal(0, 1.5, n), 3),
            "DCGM_FI_DEV_GPU_UTIL": np.zeros(n),
            "DCGM_FI_DEV_FB_USED": used,
            "DCGM_FI_DEV_FB_FREE": FB_TOTAL_MIB - FB_RESERVED_MIB - used,
            "DCGM_FI_DEV_FB_RESERVED": np.full(n, FB_RESERVED_MIB),
            "DCGM_FI_DEV_XID_ERRORS": np.zeros(n),
            "DCGM_FI_DEV_THERMAL_VIOLATION": np.full(n, 2.4e11),
            "DCGM_FI_DEV_POWER_VIOLATION": np.full(n, 6.1e11),
            "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL": np.zeros(n),
        }
        target = cluster.dcgm_pod(gpu.node).address
        for metric, values in quiet.items():
            rows.add(target, metric, dcgm_labels(gpu, None), values, f"idle GPU {gpu.node}/{gpu.index}")


def _router_rows(cluster: Cluster, rows: Rows) -> None:
    router = next((p for p in cluster.pods if p.role == "router"), None)
    if router is None:
        return
    release = next(w for w in cluster.workloads if w.spec.monitor == "production-stack")
    for pod in release.engine_pods:
        for metric in ("vllm:num_requests_running", "vllm:num_requests_waiting"):
            for s in (s for s in rows.of(pod.address) if s.name == metric):
                labels = (("server", f"http://{pod.address}"),)
                rows.add(router.address, metric, labels, s.values, f"router view of {s.origin}")


def _check_gpus(cluster: Cluster, rows: Rows) -> None:
    covered = {dict(s.labels)["UUID"] for s in rows.all() if s.name == "DCGM_FI_DEV_GPU_TEMP"}
    missing = [f"{g.node}/{g.index}" for g in cluster.gpus if g.uuid not in covered]
    if missing:
        raise ClusterError(
            f"no DCGM series for GPU(s) {', '.join(missing)}: their fleet's story has fewer GPUs"
        )


def build_history(cluster: Cluster, stories: Sequence[Story], *, seed: int = 1) -> History:
    """Every target's series over the stories' common clock (one story per workload, in order)."""
    if len(stories) != len(cluster.workloads):
        raise ClusterError(f"{len(stories)} stories for {len(cluster.workloads)} fleets")
    first = stories[0].fleet
    if any(
        (s.fleet.n, s.fleet.step_s, s.fleet.start) != (first.n, first.step_s, first.start) for s in stories
    ):
        raise ClusterError("every story must share one clock (start, duration, interval)")
    fleets = []
    for workload, story in zip(cluster.workloads, stories, strict=True):
        spec = workload.spec
        raw_spec = RawSpec(
            flavour=spec.engine,
            model=spec.model_name,
            namespace=spec.namespace,
            deployment=spec.name,
            driver=DRIVER_VERSION,
        )
        fleets.append(FleetHistory(workload, story, RawFleet(story.fleet, raw_spec).build()))
    rows = Rows(first.n)
    for fh in fleets:
        _fleet_rows(cluster, fh, rows)
    _idle_rows(cluster, rows, seed)
    _check_gpus(cluster, rows)
    _router_rows(cluster, rows)
    ksm = cluster.pod_by_role("ksm")
    presence = {p.address: rows.presence(p.address) for w in cluster.workloads for p in w.engine_pods}
    for name, labels, values, origin in kube_series(cluster, fleets, presence, first.n, first.step_s):
        rows.add(ksm.address, name, labels, values, origin)
    styles = {p.address: "go" if p.role in ("dcgm", "ksm") else "python" for p in cluster.targets}
    start = float(parse_instant(first.start))
    if not math.isfinite(start):
        raise ClusterError(f"bad start {first.start}")
    return History(start, first.step_s, first.n, rows.all(), tuple(fleets), styles)
