"""Hard generality fixtures: `python -m tools.generality_hard` writes bench/generality_hard/.

Written by an outside engineer from VOCABULARY.md, DESIGN.md and tools/synth.py only,
to probe situations the playbooks' authors may not have planned for: early diagnosis,
short baselines, long diurnal fixtures, majorities of replicas affected, 1 of 64, pods
replaced mid-incident, fleet-only and replica-only series, coarse intervals and gaps,
missing key signals, causes hidden behind their mechanisms, and two non-incidents; and probes
and the gateway seen next to OOM kills, rollouts and a true capacity shortage.
Seeded: rerunning rewrites identical files.
"""

from __future__ import annotations

import math
import sys
from collections.abc import Callable, Iterable
from pathlib import Path

import numpy as np

from tools.synth import Fleet, _key

OUT = Path(__file__).resolve().parent.parent / "bench" / "generality_hard"
NO_SCALE = {"forbidden": ["scale_out"]}
SUMMED = {
    "request_rate",
    "prompt_tokens_rate",
    "generation_tokens_rate",
    "queue_waiting",
    "requests_running",
    "preemption_rate",
}
GENERATORS: list[Callable[[], None]] = []


def incident(fn: Callable[[], None]) -> Callable[[], None]:
    GENERATORS.append(fn)
    return fn


def expect(cause: str) -> dict[str, object]:
    if cause == "capacity_shortage":
        return {"cause": cause, "not_forbidden": ["scale_out"]}
    return {"cause": cause, **NO_SCALE}


def alert(name: str, summary: str) -> dict[str, object]:
    return {"labels": {"alertname": name, "severity": "page"}, "annotations": {"summary": summary}}


# --- helpers over Fleet's arrays -----------------------------------------------------------
def times(f: Fleet) -> np.ndarray:
    return np.arange(f.n) * f.step_s


def mult(f: Fleet, signal: str, curve: np.ndarray | float, replicas: Iterable[str] | None = None) -> None:
    for key in f.keys(signal, replicas):
        f.series[key] = f.series[key] * curve


def assign(f: Fleet, signal: str, curve: np.ndarray, replicas: Iterable[str] | None = None) -> None:
    for key in f.keys(signal, replicas):
        keep = ~np.isfinite(f.series[key])
        new = np.array(curve, dtype=float)
        new[keep] = f.series[key][keep]
        f.series[key] = new


def gap(f: Fleet, signal: str, start: str, end: str, replicas: Iterable[str] | None = None) -> None:
    i0, i1 = f.idx(start), f.idx(end)
    for key in f.keys(signal, replicas):
        f.series[key][i0:i1] = np.nan


def smooth_step(f: Fleet, start: str, width: str) -> np.ndarray:
    """0 before `start`, rising linearly to 1 over `width`."""
    i0, w = f.idx(start), max(1, f.idx(width))
    return np.clip((np.arange(f.n) - i0 + 1) / w, 0, 1)


def diurnal(f: Fleet, phase_h: float, amp: float = 0.2) -> np.ndarray:
    """Daily traffic curve, 1 +- amp, `phase_h` hours into the day at the start."""
    return 1 + amp * np.sin(2 * math.pi * (times(f) / 3600 + phase_h - 6) / 24)


def apply_load(f: Fleet, load: np.ndarray, replicas: Iterable[str] | None = None) -> None:
    """Mild, healthy load variation (a diurnal swing): everything follows it a little."""
    reps = list(replicas) if replicas is not None else None
    for s in ("request_rate", "prompt_tokens_rate", "generation_tokens_rate", "requests_running"):
        mult(f, s, load, reps)
    mult(f, "kv_usage_ratio", 1 + 0.8 * (load - 1), reps)
    mult(f, "gpu_util_ratio", 1 + 0.7 * (load - 1), reps)
    mult(f, "gpu_power_watts", 1 + 0.3 * (load - 1), reps)
    mult(f, "queue_waiting", load**2, reps)
    mult(f, "queue_time_p99_seconds", load, reps)
    for s in ("ttft_p99_seconds", "ttft_p50_seconds"):
        mult(f, s, 1 + 0.4 * (load - 1), reps)
    for s in ("tpot_p99_seconds", "tpot_p50_seconds"):
        mult(f, s, 1 + 0.15 * (load - 1), reps)
    mult(f, "e2e_p99_seconds", 1 + 0.2 * (load - 1), reps)


def add_pod(f: Fleet, new: str, template: str, at: str) -> None:
    """A new pod `new` reports from `at` on, starting from `template`'s values there."""
    i = f.idx(at)
    for key in list(f.series):
        labels = dict(key[1])
        if labels.get("instance") != template:
            continue
        labels["instance"] = new
        arr = np.full(f.n, np.nan)
        arr[i:] = f.series[key][i:]
        f.series[_key(key[0], labels)] = arr
    f.names.append(new)


def to_fleet(f: Fleet, signals: Iterable[str], drop: bool = True) -> None:
    """Replace per-replica series by one fleet series (sum for volumes, mean otherwise)."""
    for s in signals:
        rows = [k for k in f.keys(s) if "instance" in dict(k[1])]
        if not rows:
            continue
        mat = np.vstack([np.where(np.isfinite(f.series[k]), f.series[k], np.nan) for k in rows])
        agg = np.nansum(mat, axis=0) if s in SUMMED else np.nanmean(mat, axis=0)
        if s.endswith("p99_seconds"):
            agg = agg * 1.05
        f.series[_key(s, {})] = agg
        if drop:
            for k in rows:
                del f.series[k]


def write(
    f: Fleet, symptom: str | None, at: str, cause: str, al: dict[str, object] | None = None, header: str = ""
) -> None:
    f.write(str(OUT / f"{f.name}.yaml"), symptom, at=at, expect=expect(cause), alert=al, header=header)


def latency(f: Fleet, at: str, reps: Iterable[str] | None, ramp: str = "1m", **factors: float) -> None:
    """Multiply several signals from `at` (keys: short names below)."""
    names = {
        "ttft": ("ttft_p99_seconds",),
        "ttft50": ("ttft_p50_seconds",),
        "tpot": ("tpot_p99_seconds",),
        "tpot50": ("tpot_p50_seconds",),
        "e2e": ("e2e_p99_seconds",),
        "qt": ("queue_time_p99_seconds",),
        "qw": ("queue_waiting",),
        "run": ("requests_running",),
        "kv": ("kv_usage_ratio",),
        "util": ("gpu_util_ratio",),
        "prefill": ("prefill_time_p99_seconds",),
        "rate": ("request_rate", "prompt_tokens_rate", "generation_tokens_rate"),
    }
    reps = list(reps) if reps is not None else None
    for short, factor in factors.items():
        for s in names[short]:
            f.step(s, at, factor=factor, replicas=reps, ramp=ramp)


# --- the incidents ------------------------------------------------------------------------
@incident
def early_replica_down() -> None:
    f = Fleet(
        "hard-early-replica-down",
        "vllm-4 dies at 40m (node lost); 5 survivors absorb its traffic. Diagnosed 7 minutes in.",
        replicas=6,
        duration="60m",
        seed=101,
    )
    dead, surv = "vllm-4", f.who(0, 1, 2, 3, 5)
    f.set("error_ratio", "39m30s", 0.3, [dead])
    f.vanish(dead, "40m")
    f.set("replicas_ready", "40m30s", 5.0)
    latency(
        f,
        "40m",
        surv,
        ramp="2m",
        rate=1.2,
        run=1.25,
        kv=1.3,
        qw=7.0,
        qt=7.0,
        ttft=2.6,
        ttft50=1.9,
        tpot=1.12,
        e2e=1.3,
        util=1.2,
    )
    write(f, None, "47m", "replica_down", alert("LLMTTFTP99High", "TTFT P99 above 1s for 3m"))


@incident
def early_gpu_throttle() -> None:
    f = Fleet(
        "hard-early-gpu-throttle",
        "vllm-5's GPU overheats (fan failure): throttled from 55m; temperature rising from 45m. "
        "Diagnosed 7 minutes after throttling starts.",
        replicas=8,
        duration="75m",
        seed=102,
    )
    hot = [f.names[5]]
    f.ramp("gpu_temp_celsius", "45m", "55m", 89 / 66, hot)
    f.set("gpu_throttle", "55m", 1.0, hot)
    f.step("gpu_power_watts", "55m", factor=0.72, replicas=hot)
    f.step("gpu_util_ratio", "55m", to=0.97, replicas=hot)
    latency(
        f,
        "55m",
        hot,
        ramp="2m",
        tpot=2.1,
        tpot50=1.9,
        ttft=1.6,
        ttft50=1.4,
        e2e=1.9,
        qw=4.0,
        qt=3.0,
        run=1.35,
        kv=1.3,
        prefill=1.7,
    )
    write(f, "tpot_slow", "62m", "gpu_throttling")


@incident
def short_baseline_burst() -> None:
    f = Fleet(
        "hard-short-baseline-burst",
        "A client's retry storm at 12m (only 12 minutes of baseline): request rate x2.6 within a "
        "minute; queues and TTFT jump. Diagnosed at 20m.",
        replicas=6,
        duration="45m",
        seed=103,
    )
    latency(
        f,
        "12m",
        None,
        ramp="1m",
        rate=2.6,
        qw=30.0,
        qt=35.0,
        ttft=11.0,
        ttft50=8.0,
        run=2.6,
        kv=1.7,
        tpot=1.35,
        tpot50=1.25,
        e2e=1.6,
        util=1.33,
    )
    f.step("rejected_ratio", "13m", to=0.04)
    write(f, "ttft_slow", "20m", "traffic_burst")


@incident
def burst_then_kv() -> None:
    f = Fleet(
        "hard-burst-then-kv-saturation",
        "Tenant batch-etl starts a bulk job at 50m (its tokens x13, fleet request rate x2.2 in 2m); "
        "KV then fills to 99% with preemptions from 57m. Root cause: the burst. Diagnosed at 75m.",
        replicas=8,
        duration="90m",
        seed=104,
    )
    latency(f, "50m", None, ramp="2m", rate=2.2, qw=45.0, qt=25.0, ttft=7.0, ttft50=5.0, util=1.33)
    f.step("requests_running", "50m", to=70.0, ramp="6m")
    f.step("kv_usage_ratio", "52m", to=0.99, ramp="6m")
    f.step("preemption_rate", "57m", to=3.0, ramp="2m")
    latency(f, "56m", None, ramp="3m", tpot=3.0, tpot50=2.2, e2e=2.8)
    f.step("rejected_ratio", "53m", to=0.02)
    for tenant, base in (("chat", 23000.0), ("api", 11500.0), ("batch-etl", 3900.0)):
        arr = np.full(f.n, base)
        f.series[_key("prompt_tokens_rate", {"tenant": tenant})] = arr
    etl = f.series[_key("prompt_tokens_rate", {"tenant": "batch-etl"})]
    etl[:] = etl * (1 + 12 * smooth_step(f, "50m", "2m"))
    write(f, None, "75m", "traffic_burst", alert("LLMTPOTP99High", "TPOT P99 above 80ms for 5m"))


@incident
def capacity_ramp_3h() -> None:
    f = Fleet(
        "hard-capacity-ramp-3h-diurnal",
        "4h at 60s, daily traffic sine underneath; organic demand grows x1.9 linearly from 30m to "
        "3h30m (a product launch ramping up). Saturation shows only in the last hour. Diagnosed 3h45m.",
        replicas=6,
        duration="4h",
        interval="60s",
        seed=105,
    )
    load = diurnal(f, phase_h=7.0) * (1 + 0.9 * np.clip((times(f) - 1800) / (3 * 3600), 0, 1))
    sat = np.clip((load - 1.35) / 0.5, 0, 1.2)
    for s in ("request_rate", "prompt_tokens_rate", "generation_tokens_rate"):
        mult(f, s, load)
    mult(f, "requests_running", np.minimum(load, 1.7))
    mult(f, "kv_usage_ratio", np.minimum(load, 1.6))
    mult(f, "gpu_util_ratio", np.minimum(load, 1.35))
    mult(f, "gpu_power_watts", 1 + 0.25 * np.minimum(load - 1, 0.5))
    for key in f.keys("queue_waiting"):
        f.series[key] = f.series[key] * load + 25 * sat**2
    for key in f.keys("queue_time_p99_seconds"):
        f.series[key] = f.series[key] * load + 3.5 * sat**2
    for key in f.keys("ttft_p99_seconds"):
        f.series[key] = f.series[key] * (1 + 0.3 * (load - 1)) + 4.0 * sat**2
    for key in f.keys("ttft_p50_seconds"):
        f.series[key] = f.series[key] * (1 + 0.3 * (load - 1)) + 1.2 * sat**2
    for s in ("tpot_p99_seconds", "tpot_p50_seconds"):
        mult(f, s, 1 + 0.3 * np.minimum(load - 1, 0.7))
    for key in f.keys("e2e_p99_seconds"):
        f.series[key] = f.series[key] * (1 + 0.2 * (load - 1)) + 4.0 * sat**2
    assign(f, "rejected_ratio", 0.001 + 0.035 * sat**2)
    write(
        f,
        None,
        "3h45m",
        "capacity_shortage",
        alert("LLMGatewayRejectRateHigh", "gateway 429 ratio above 1% for 10m; engine queues growing"),
    )


@incident
def two_of_three_throttled() -> None:
    f = Fleet(
        "hard-two-of-three-throttled",
        "3 replicas; the chassis cooling of the node hosting vllm-0 and vllm-1 fails at 35m: both GPUs "
        "throttle, vllm-2 (other node) is fine. Diagnosed at 55m.",
        replicas=3,
        duration="60m",
        seed=106,
    )
    hot = f.who(0, 1)
    f.ramp("gpu_temp_celsius", "30m", "36m", 90 / 66, hot)
    f.set("gpu_throttle", "35m", 1.0, hot)
    f.step("gpu_power_watts", "35m", factor=0.75, replicas=hot)
    latency(
        f,
        "35m",
        hot,
        ramp="2m",
        tpot=2.0,
        tpot50=1.85,
        ttft=1.5,
        ttft50=1.35,
        e2e=1.9,
        run=1.35,
        kv=1.25,
        qw=3.0,
        qt=2.5,
        prefill=1.7,
    )
    write(f, "tpot_slow", "55m", "gpu_throttling")


@incident
def ecc_without_xid() -> None:
    f = Fleet(
        "hard-ecc-fault-no-xid",
        "gpu_xid is not exported here; vllm-6's GPU shows double-bit ECC errors from 38m and the replica "
        "fails 45% of its requests. Diagnosed at 48m.",
        replicas=8,
        duration="60m",
        seed=107,
        omit=("gpu_xid",),
    )
    bad = [f.names[6]]
    f.set("gpu_ecc_errors", "38m", 3.0, bad, until="42m")
    f.set("gpu_ecc_errors", "42m", 7.0, bad)
    f.step("error_ratio", "38m", to=0.45, replicas=bad)
    f.step("gpu_util_ratio", "38m", to=0.3, replicas=bad)
    f.step("ttft_p99_seconds", "38m", factor=2.5, replicas=bad)
    f.step("request_rate", "38m", factor=0.9, replicas=bad)
    write(f, None, "48m", "gpu_fault", alert("LLMErrorRateHigh", "5xx ratio above 2% for 5m"))


@incident
def oom_without_restarts() -> None:
    f = Fleet(
        "hard-oom-no-restarts-signal",
        "The restarts series is not collected. vllm-2's memory climbs from 40m; OOM-killed at 45m, 52m "
        "and 61m (crash loop with back-off: its series have gaps while down). Diagnosed at 66m.",
        replicas=6,
        duration="75m",
        seed=108,
        omit=("restarts",),
    )
    bad = [f.names[2]]
    others = f.who(0, 1, 3, 4, 5)
    f.step("gpu_memory_used_ratio", "40m", to=0.985, replicas=bad, ramp="5m")
    f.set("oom_killed", "45m", 1.0, bad)
    for down, up in (("45m", "47m"), ("52m", "55m"), ("61m", "65m")):
        f.set("error_ratio", f"{int(down[:-1]) - 1}m", 0.35, bad, until=down)
        for key in list(f.series):
            if dict(key[1]).get("instance") == bad[0] and key[0] not in ("build_info", "config_info"):
                f.series[key][f.idx(down) : f.idx(up)] = np.nan
        f.set("replicas_ready", down, 5.0, until=up)
        for s, fac in (("queue_waiting", 4.0), ("ttft_p99_seconds", 1.8), ("request_rate", 1.2)):
            for key in f.keys(s, others):
                f.series[key][f.idx(down) : f.idx(up)] *= fac
    f.set("gpu_memory_used_ratio", "47m", 0.93, bad, until="50m")
    f.set("error_ratio", "47m", 0.05, bad, until="51m")
    write(f, "errors", "66m", "engine_oom")


@incident
def one_of_64_xid() -> None:
    f = Fleet(
        "hard-1-of-64-xid",
        "64 replicas; vllm-37's GPU raises XID 48 (double-bit ECC) at 40m and keeps serving with 60% "
        "errors; fleet error ratio ~1%. Diagnosed at 48m.",
        replicas=64,
        duration="60m",
        seed=109,
        gaps=1,
    )
    bad = ["vllm-37"]
    f.set("gpu_xid", "40m", 48.0, bad)
    f.set("gpu_ecc_errors", "40m", 2.0, bad)
    f.step("error_ratio", "40m", to=0.6, replicas=bad)
    f.step("gpu_util_ratio", "40m", to=0.35, replicas=bad)
    f.step("ttft_p99_seconds", "40m", factor=1.8, replicas=bad)
    write(f, "errors", "48m", "gpu_fault")


@incident
def pod_replaced_imbalance() -> None:
    f = Fleet(
        "hard-pod-replaced-routing-imbalance",
        "Gateway session-affinity bug from 30m sends 3x traffic to vllm-1 (queue, KV, preemptions) while "
        "peers idle. At 50m on-call deletes the pod; its replacement vllm-6 (new name) starts at 51m and "
        "gets the same hot shard. Diagnosed at 62m.",
        replicas=6,
        duration="80m",
        seed=110,
    )
    hot, cold = [f.names[1]], f.who(0, 2, 3, 4, 5)
    latency(
        f,
        "30m",
        hot,
        ramp="2m",
        rate=3.0,
        qw=35.0,
        qt=30.0,
        ttft=9.0,
        ttft50=6.0,
        tpot=1.6,
        tpot50=1.4,
        e2e=2.0,
        util=1.3,
    )
    f.step("kv_usage_ratio", "30m", to=0.99, replicas=hot, ramp="4m")
    f.step("requests_running", "30m", to=120.0, replicas=hot, ramp="4m")
    f.step("preemption_rate", "33m", to=2.0, replicas=hot)
    f.step("prefix_hit_ratio", "30m", to=0.78, replicas=hot)
    latency(f, "30m", cold, ramp="2m", rate=0.6, run=0.6, kv=0.7, util=0.75, qw=0.5)
    f.step("prefix_hit_ratio", "30m", to=0.48, replicas=cold)
    add_pod(f, "vllm-6", hot[0], "51m")
    f.vanish(hot[0], "50m")
    f.set("replicas_ready", "50m", 5.0, until="51m30s")
    new = ["vllm-6"]
    i0 = f.idx("51m")
    warm = np.clip((np.arange(f.n) - i0) / f.idx("3m"), 0, 1)
    for s, base in (
        ("kv_usage_ratio", 0.3),
        ("requests_running", 10.0),
        ("queue_waiting", 1.0),
        ("prefix_hit_ratio", 0.1),
        ("preemption_rate", 0.0),
        ("ttft_p99_seconds", 0.6),
        ("queue_time_p99_seconds", 0.2),
    ):
        for key in f.keys(s, new):
            arr = f.series[key]
            arr[i0:] = base + (arr[i0:] - base) * warm[i0:]
    write(f, "ttft_slow", "62m", "routing_imbalance")


@incident
def fleet_only_long_prompt() -> None:
    f = Fleet(
        "hard-fleet-only-long-prompt",
        "Only fleet series (gateway and aggregated engine metrics, no instance label). A document-QA "
        "feature launches at 40m: prompt P95 1.8k -> 7.5k tokens. Diagnosed at 48m.",
        replicas=6,
        duration="70m",
        seed=111,
        gpu_signals=False,
        info_signals=False,
    )
    f.drop("restarts")
    f.drop("oom_killed")
    f.step("prompt_tokens_p95", "40m", to=7500.0, ramp="2m")
    f.step("long_prompt_ratio", "40m", to=0.22, ramp="2m")
    f.step("prompt_tokens_rate", "40m", factor=2.6, ramp="2m")
    latency(
        f,
        "40m",
        None,
        ramp="2m",
        prefill=4.2,
        ttft=5.0,
        ttft50=2.2,
        qt=7.0,
        qw=6.0,
        kv=1.4,
        tpot=1.2,
        util=1.2,
        e2e=1.3,
    )
    to_fleet(f, [s for s in {k[0] for k in f.series} if s not in ("replicas_ready", "replicas_desired")])
    write(f, None, "48m", "long_prompt_surge", alert("LLMTTFTP99High", "TTFT P99 above 1s for 3m"))


@incident
def replica_only_batch_oversized() -> None:
    f = Fleet(
        "hard-replica-only-batch-oversized",
        "Per-replica series only (no gateway, no kube). max_num_seqs raised 32 -> 256 in a config push at "
        "38m 'for throughput': running batch 30 -> 85, TPOT x2.4, KV 0.55 -> 0.93. Diagnosed at 46m.",
        replicas=6,
        duration="60m",
        seed=112,
        fleet_signals=False,
        kube_signals=False,
    )
    f.relabel("config_info", "0s", {"max_num_seqs": "32"})
    for i, name in enumerate(f.names):
        f.relabel("config_info", f"{38 * 60 + 20 * i}s", {"max_num_seqs": "256"}, [name])
    assign(f, "requests_running", np.full(f.n, 29.0))
    assign(f, "queue_waiting", np.full(f.n, 3.5))
    for i, name in enumerate(f.names):
        at = f"{38 * 60 + 20 * i}s"
        f.step("requests_running", at, to=85.0, replicas=[name], ramp="3m")
        f.step("queue_waiting", at, to=0.3, replicas=[name], ramp="1m")
        f.step("kv_usage_ratio", at, to=0.93, replicas=[name], ramp="3m")
        f.step("preemption_rate", at, to=0.15, replicas=[name], ramp="3m")
        latency(f, at, [name], ramp="3m", tpot=2.4, tpot50=2.2, e2e=2.2, ttft=1.3, util=1.25)
    write(f, "tpot_slow", "46m", "batch_oversized")


@incident
def kv_no_preemption_signal() -> None:
    f = Fleet(
        "hard-kv-pressure-no-preemption-signal",
        "A hot fleet (KV ~0.80) tips over at 50m: KV pinned at 98-99% on every replica, TPOT x2.4, TTFT "
        "x3. preemption_rate is not exported. Request mix drifts only slightly (+5%). Diagnosed at 75m.",
        replicas=6,
        duration="90m",
        seed=113,
        omit=("preemption_rate",),
    )
    assign(f, "kv_usage_ratio", np.full(f.n, 0.80))
    assign(f, "requests_running", np.full(f.n, 38.0))
    latency(f, "45m", None, ramp="5m", rate=1.05)
    f.step("output_tokens_p95", "45m", factor=1.06, ramp="5m")
    f.step("kv_usage_ratio", "50m", to=0.985, ramp="6m")
    latency(
        f,
        "50m",
        None,
        ramp="6m",
        tpot=2.4,
        tpot50=1.6,
        ttft=3.0,
        ttft50=2.0,
        qw=12.0,
        qt=6.0,
        e2e=2.2,
        run=0.9,
    )
    write(f, None, "75m", "kv_pressure", alert("LLMTPOTP99High", "TPOT P99 above 80ms for 5m"))


@incident
def long_output_gaps() -> None:
    f = Fleet(
        "hard-30s-long-output-gaps",
        "30s interval; a client ships a 'think step by step' template at 60m: output P95 420 -> 1500 "
        "tokens over 10m, KV and TPOT creep up. Scrape gaps of 4-8 minutes in KV, TPOT (one replica) "
        "and output length. Diagnosed at 95m.",
        replicas=6,
        duration="2h",
        interval="30s",
        seed=114,
    )
    f.step("output_tokens_p95", "60m", to=1500.0, ramp="10m")
    f.step("generation_tokens_rate", "60m", factor=2.4, ramp="10m")
    latency(
        f,
        "60m",
        None,
        ramp="20m",
        kv=1.7,
        run=2.2,
        tpot=1.7,
        tpot50=1.45,
        e2e=4.0,
        ttft=1.4,
        ttft50=1.2,
        qw=2.0,
        qt=1.5,
    )
    gap(f, "kv_usage_ratio", "70m", "76m")
    gap(f, "tpot_p99_seconds", "62m", "70m", [f.names[2]])
    gap(f, "output_tokens_p95", "80m", "84m")
    write(f, "tpot_slow", "95m", "long_output_shift")


@incident
def prefill_interference_config() -> None:
    f = Fleet(
        "hard-60s-prefill-interference-config",
        "60s interval; RAG service with long prompts all along (P95 6k, 8% over threshold). A rollout at "
        "44-47m (engine 0.11.0 -> 0.11.1) turns chunked prefill off: TPOT P99 spikes x3.5 while KV stays "
        "at 0.55 and prompts are unchanged. Diagnosed at 70m.",
        replicas=6,
        duration="90m",
        interval="60s",
        seed=115,
    )
    assign(f, "prompt_tokens_p95", np.full(f.n, 6000.0))
    assign(f, "long_prompt_ratio", np.full(f.n, 0.08))
    assign(f, "prefill_time_p99_seconds", np.full(f.n, 0.9))
    for i, name in enumerate(f.names):
        at = f"{44 * 60 + 30 * i}s"
        f.relabel("config_info", at, {"chunked_prefill": "false"}, [name])
        f.relabel("build_info", at, {"engine_version": "0.11.1"}, [name])
        f.pulse("restarts", at, 1.0, "5m", [name])
        latency(f, at, [name], ramp="1m", tpot=3.5, tpot50=1.25, e2e=1.5, prefill=0.85)
    write(f, None, "70m", "prefill_interference", alert("LLMTPOTP99High", "TPOT P99 above 80ms for 5m"))


@incident
def prefix_miss_routing_change() -> None:
    f = Fleet(
        "hard-prefix-miss-routing-change",
        "4h at 30s with a daily sine; at 3h the gateway's balancing policy moves from prefix-aware to "
        "round-robin: prefix hit 0.62 -> 0.15 on every replica, per-replica request share unchanged, "
        "prompts unchanged. Latencies fleet-only, engine signals per-replica only. Diagnosed 3h25m.",
        replicas=6,
        duration="4h",
        interval="30s",
        seed=116,
    )
    apply_load(f, diurnal(f, phase_h=8.0))
    f.step("prefix_hit_ratio", "3h", to=0.15, ramp="2m")
    latency(
        f,
        "3h",
        None,
        ramp="2m",
        prefill=2.4,
        ttft=2.3,
        ttft50=1.8,
        qt=2.5,
        qw=2.0,
        util=1.2,
        e2e=1.1,
        tpot=1.08,
    )
    to_fleet(
        f, ["ttft_p99_seconds", "ttft_p50_seconds", "tpot_p99_seconds", "tpot_p50_seconds", "e2e_p99_seconds"]
    )
    write(f, None, "3h25m", "prefix_cache_miss", alert("LLMTTFTP99High", "TTFT P99 above 1s for 3m"))


@incident
def cost_price_and_volume() -> None:
    f = Fleet(
        "hard-cost-price-plus-volume",
        "60s interval, 3h. At 2h the provider contract moves to a new model version billed at 0.0036 "
        "(was 0.0021, +71%); token volume also rose ~10% around then. Diagnosed at 2h40m.",
        replicas=6,
        duration="3h",
        interval="60s",
        seed=117,
    )
    f.relabel("build_info", "2h", {"model_version": "2026-11"})
    f.step("cost_per_1k_tokens", "2h", to=0.0036, ramp="1m")
    for s in ("prompt_tokens_rate", "generation_tokens_rate", "request_rate"):
        f.ramp(s, "1h50m", "2h10m", 1.10)
    tokens = np.sum(
        [f.series[k] for k in f.keys("prompt_tokens_rate") + f.keys("generation_tokens_rate")], axis=0
    )
    f.add_fleet("spend_rate", 0.0)
    f.series[_key("spend_rate", {})] = f.series[_key("cost_per_1k_tokens", {})] * tokens * 3.6
    write(f, "cost_up", "2h40m", "price_change")


@incident
def quality_version_plus_fallback() -> None:
    f = Fleet(
        "hard-quality-version-plus-fallback",
        "Rollout at 78-82m replaces fp8 2026-09 with an int4 2026-10 build on all replicas; fallback "
        "ratio rises a little at the same time (0.2% -> 1.5%). Users report worse answers. "
        "Diagnosed at 100m.",
        replicas=6,
        duration="2h",
        seed=118,
    )
    for i, name in enumerate(f.names):
        at = f"{78 * 60 + 45 * i}s"
        f.relabel("build_info", at, {"quantization": "int4-awq", "model_version": "2026-10"}, [name])
        f.pulse("restarts", at, 1.0, "5m", [name])
    f.step("fallback_ratio", "80m", to=0.015, ramp="3m")
    latency(f, "80m", None, tpot=0.8, tpot50=0.8, e2e=0.85)
    write(f, "quality_down", "100m", "version_change")


@incident
def slow_replica_no_incident() -> None:
    f = Fleet(
        "hard-noisy-slow-replica-no-incident",
        "8 replicas, noisy; vllm-3 (older host) is consistently 30% slower than its peers from the "
        "first sample. Nothing changes. Diagnosed at 70m.",
        replicas=8,
        duration="90m",
        seed=119,
        gaps=4,
    )
    slow = [f.names[3]]
    for s in (
        "ttft_p99_seconds",
        "ttft_p50_seconds",
        "tpot_p99_seconds",
        "tpot_p50_seconds",
        "e2e_p99_seconds",
        "prefill_time_p99_seconds",
    ):
        mult(f, s, 1.3, slow)
    mult(f, "gpu_util_ratio", 1.15, slow)
    mult(f, "requests_running", 1.25, slow)
    mult(f, "kv_usage_ratio", 1.2, slow)
    rng = np.random.default_rng(7)
    for key in f.keys("ttft_p99_seconds") + f.keys("tpot_p99_seconds") + f.keys("queue_waiting"):
        arr = f.series[key]
        arr *= np.exp(rng.normal(0, 0.08, f.n).cumsum() * 0.05)  # slow wander
        spikes = rng.random(f.n) < 0.01
        arr[spikes] *= 1.8
    f.write(str(OUT / f"{f.name}.yaml"), None, at="70m", expect={"cause": "none", **NO_SCALE})


@incident
def planned_scale_up() -> None:
    f = Fleet(
        "hard-planned-scale-up-no-incident",
        "Planned scale-up ahead of peak: replicas_desired 6 -> 10 at 40m, new pods vllm-6..9 ready one by "
        "one 41-44m with cold prefix caches; traffic spreads, old pods get lighter. Diagnosed at 50m.",
        replicas=6,
        duration="70m",
        seed=120,
    )
    f.set("replicas_desired", "40m", 10.0)
    for j, name in enumerate(["vllm-6", "vllm-7", "vllm-8", "vllm-9"]):
        at = f"{41 + j}m"
        add_pod(f, name, "vllm-0", at)
        f.set("replicas_ready", at, 7.0 + j)
        i0 = f.idx(at)
        warm = np.clip((np.arange(f.n) - i0) / f.idx("10m"), 0, 1)
        for key in f.keys("prefix_hit_ratio", [name]):
            f.series[key][i0:] = 0.1 + (0.62 - 0.1) * warm[i0:]
        first = np.clip((np.arange(f.n) - i0) / f.idx("3m"), 0, 1)
        for key in f.keys("ttft_p99_seconds", [name]) + f.keys("prefill_time_p99_seconds", [name]):
            f.series[key][i0:] *= 1.5 - 0.5 * first[i0:] - 0.1 * warm[i0:]
        for key in f.keys("kv_usage_ratio", [name]):
            f.series[key][i0:] *= 0.3 + 0.4 * first[i0:]
    old = f.who(0, 1, 2, 3, 4, 5)
    ready = np.clip(6 + np.floor((times(f) - 41 * 60) / 60 + 1), 6, 10)
    share = 6 / ready * 1.04
    for s in ("request_rate", "prompt_tokens_rate", "generation_tokens_rate", "requests_running"):
        mult(f, s, share, old)
    mult(f, "kv_usage_ratio", 1 - 0.7 * (1 - share), old)
    mult(f, "gpu_util_ratio", 1 - 0.6 * (1 - share), old)
    for s in ("request_rate", "prompt_tokens_rate", "generation_tokens_rate", "requests_running"):
        mult(f, s, 0.65 * 1.04, ["vllm-6", "vllm-7", "vllm-8", "vllm-9"])
    f.write(str(OUT / f"{f.name}.yaml"), None, at="50m", expect={"cause": "none", **NO_SCALE})


@incident
def rollout_early() -> None:
    f = Fleet(
        "hard-rollout-early-short-baseline",
        "A rolling restart (engine 0.11.0 -> 0.11.1) starts 10 minutes into the data, one replica every "
        "2 minutes; each restarting replica aborts its streams and is unready ~90s. Diagnosed at 18m.",
        replicas=6,
        duration="40m",
        seed=121,
    )
    for i, name in enumerate(reversed(f.names)):
        t0 = 600 + 120 * i
        f.set("error_ratio", f"{t0 - 30}s", 0.3, [name], until=f"{t0}s")
        f.set("truncated_ratio", f"{t0 - 30}s", 0.15, [name], until=f"{t0}s")
        f.pulse("restarts", f"{t0}s", 1.0, "5m", [name])
        f.relabel("build_info", f"{t0}s", {"engine_version": "0.11.1"}, [name])
        for key in list(f.series):
            if dict(key[1]).get("instance") == name and key[0] not in (
                "build_info",
                "config_info",
                "restarts",
            ):
                f.series[key][f.idx(f"{t0}s") : f.idx(f"{t0 + 90}s")] = np.nan
        f.set("replicas_ready", f"{t0}s", 5.0, until=f"{t0 + 90}s")
        f.step("prefix_hit_ratio", f"{t0 + 90}s", to=0.2, replicas=[name], ramp="15s")
        f.step("prefix_hit_ratio", f"{t0 + 105}s", to=0.62, replicas=[name], ramp="6m")
    write(f, None, "18m", "rollout_disruption", alert("LLMErrorRateHigh", "5xx ratio above 2% for 2m"))


# --- the edge: gateway, router, kubelet probes --------------------------------------------
EDGE_FLAGS = {"backends_routed", "probe_failures", "terminated_error", "exit_code"}
EDGE_COUNTS = {"gateway_queue", "gateway_inflight"}
# Series that go on while an engine is down: the kubelet's, the gateway's and the info series.
NOT_ENGINE = {"restarts", "oom_killed", "build_info", "config_info", "upstream_error_ratio"} | EDGE_FLAGS


class EdgeFleet(Fleet):
    """A Fleet with the edge's series too. tools/synth.py has no healthy values or noise for them:
    event counts and codes are written as they are, gateway counts get Poisson noise, the gateway's
    latency and upstream error ratio relative noise."""

    def _noisy(self, signal: str, values: np.ndarray) -> np.ndarray:
        out = values.copy()
        finite = np.isfinite(out)
        if signal in EDGE_FLAGS:
            return out
        if signal in EDGE_COUNTS:
            out[finite] = self.rng.poisson(np.clip(out[finite], 0, None)).astype(float)
            return out
        if signal == "gateway_latency_p99_seconds":
            out[finite] = np.clip(out[finite] * (1 + self.rng.normal(0, 0.07, finite.sum())), 0, None)
            return out
        if signal == "upstream_error_ratio":
            out[finite] = np.clip(out[finite] * (1 + self.rng.normal(0, 0.35, finite.sum())), 0, 1)
            return out
        return super()._noisy(signal, values)


def fleet_view(f: Fleet, signal: str, how: str) -> np.ndarray:
    """The replicas' noise-free values combined (max or sum), as a gateway in front would see them."""
    rows = [np.where(np.isfinite(f.series[k]), f.series[k], np.nan) for k in f.keys(signal)]
    mat = np.vstack(rows)
    return np.nanmax(mat, axis=0) if how == "max" else np.nansum(mat, axis=0)


def with_edge(f: Fleet, inflight: bool = True, probes: bool = True) -> None:
    """Call after shaping the engines: a healthy gateway follows them. Its latency is the slowest
    engine's TTFT plus routing, it holds what the engines hold as in flight, routes to the ready
    replicas, and fails almost nothing upstream; the kubelet's probes pass."""
    f.add_fleet("gateway_latency_p99_seconds", 0.0)
    f.series[_key("gateway_latency_p99_seconds", {})] = 1.1 * fleet_view(f, "ttft_p99_seconds", "max") + 0.06
    f.add_fleet("gateway_queue", 0.8)
    if inflight:
        held = fleet_view(f, "requests_running", "sum") + fleet_view(f, "queue_waiting", "sum")
        f.series[_key("gateway_inflight", {})] = held
    f.series[_key("backends_routed", {})] = f.series[_key("replicas_ready", {})].copy()
    for name in f.names:
        f.series[_key("upstream_error_ratio", {"instance": name})] = np.full(f.n, 0.001)
        if probes:
            for s in ("probe_failures", "terminated_error", "exit_code"):
                f.series[_key(s, {"instance": name})] = np.zeros(f.n)


def windowed(f: Fleet, events: list[float], window: float = 300.0) -> np.ndarray:
    """A windowed count (restarts, probe failures) from event times in seconds: events in (t-w, t]."""
    ev = np.sort(np.asarray(events, dtype=float))
    t = times(f)
    return (np.searchsorted(ev, t, side="right") - np.searchsorted(ev, t - window, side="right")).astype(
        float
    )


def since(f: Fleet, t0: float, value: float) -> np.ndarray:
    """`value` from second `t0` on (a last termination's reason or code), 0 before."""
    return np.where(times(f) >= t0, value, 0.0)


def engine_gap(f: Fleet, name: str, t0: float, t1: float) -> None:
    """The engine's /metrics is down from t0 to t1 (seconds): loading, or killed; kube still reports."""
    i0, i1 = f.idx(t0), f.idx(t1)
    for key in list(f.series):
        labels = dict(key[1])
        if labels.get("instance") == name and "gpu" not in labels and key[0] not in NOT_ENGINE:
            f.series[key][i0:i1] = np.nan


def put(f: Fleet, signal: str, name: str, arr: np.ndarray) -> None:
    f.series[_key(signal, {"instance": name})] = np.asarray(arr, dtype=float)


@incident
def probe_loop_cold_weights() -> None:
    f = EdgeFleet(
        "hard-probe-loop-cold-weight-cache",
        "A node drain at 30m moved vllm-1, vllm-4 and vllm-6 to a node whose local model cache is "
        "empty: weights now stream from object storage (~6 min), but the liveness probe (initial delay "
        "120 s, period 10 s, 3 failures) kills each container at ~145 s. Probe failures come before "
        "every restart; termination reason Error, exit 137, no OOM kill, no version change. Ready 5/8; "
        "the five survivors queue. Diagnosed at 52m.",
        replicas=8,
        duration="70m",
        seed=122,
    )
    loop = f.who(1, 4, 6)
    surv = [n for n in f.names if n not in loop]
    end = f.n * f.step_s
    cycles: dict[str, tuple[list[float], list[float]]] = {}
    for k, name in enumerate(loop):
        start, backoff = 30 * 60 + 40 + 10 * k, 10.0
        fails: list[float] = []
        kills: list[float] = []
        while start < end:
            fails += [start + 120 + 10 * j for j in range(3)]
            kills.append(start + 145)
            start = kills[-1] + backoff
            backoff = min(2 * backoff, 300.0)
        cycles[name] = (fails, kills)
        engine_gap(f, name, 30 * 60, end)
        f.set("gpu_util_ratio", "30m", 0.03, [name])
        f.set("gpu_memory_used_ratio", "30m", 0.0, [name])
        f.set("gpu_power_watts", "30m", 90.0, [name])
        put(f, "restarts", name, windowed(f, kills))
    f.set("replicas_ready", "30m", 5.0)
    latency(
        f,
        "30m",
        surv,
        ramp="2m",
        rate=1.6,
        run=1.4,
        kv=1.55,
        qw=9.0,
        qt=6.0,
        ttft=2.4,
        ttft50=1.7,
        tpot=1.15,
        e2e=1.3,
        util=1.25,
    )
    with_edge(f)
    for name, (fails, kills) in cycles.items():
        put(f, "probe_failures", name, windowed(f, fails))
        put(f, "terminated_error", name, since(f, kills[0], 1.0))
        put(f, "exit_code", name, since(f, kills[0], 137.0))
    write(f, None, "52m", "probe_restart_loop", alert("LLMTTFTP99High", "TTFT P99 above 1s for 5m"))


@incident
def oom_then_readiness_warmup() -> None:
    f = EdgeFleet(
        "hard-oom-kills-readiness-fails-while-reloading",
        "Image-heavy requests from one client push engine memory on vllm-3 and vllm-9 to 0.986 from "
        "38m; vllm-3 is OOM-killed at 42m and 54m, vllm-9 at 47m (exit 137, reason OOMKilled). Each "
        "restarted container fails its readiness probe for ~2 min while it reloads weights: the probe "
        "failures come after the restarts, not before. Ready dips to 11/12. Diagnosed at 60m.",
        replicas=12,
        duration="70m",
        seed=123,
    )
    victims = {"vllm-3": [42 * 60, 54 * 60], "vllm-9": [47 * 60]}
    f.step("prompt_tokens_p95", "38m", factor=1.25, ramp="3m")
    warmups: dict[str, list[float]] = {}
    for name, kills in victims.items():
        f.step("gpu_memory_used_ratio", "38m", to=0.986, replicas=[name], ramp="4m")
        put(f, "restarts", name, windowed(f, kills))
        put(f, "oom_killed", name, since(f, kills[0], 1.0))
        warmups[name] = []
        for t in kills:
            f.set("error_ratio", f"{t - 45}s", 0.3, [name], until=f"{t}s")
            engine_gap(f, name, t, t + 150)
            f.set("gpu_memory_used_ratio", f"{t}s", 0.2, [name], until=f"{t + 90}s")
            f.set("gpu_memory_used_ratio", f"{t + 90}s", 0.91, [name], until=f"{t + 150}s")
            f.set("gpu_util_ratio", f"{t}s", 0.05, [name], until=f"{t + 150}s")
            f.set("replicas_ready", f"{t}s", 11.0, until=f"{t + 150}s")
            warmups[name] += [t + 15 + 10 * j for j in range(14)]
    with_edge(f)
    for name, kills in victims.items():
        put(f, "probe_failures", name, windowed(f, warmups[name]))
        put(f, "exit_code", name, since(f, kills[0], 137.0))
    write(f, "errors", "60m", "engine_oom")


@incident
def rollout_readiness_warmup() -> None:
    f = EdgeFleet(
        "hard-rollout-readiness-probes-during-warmup",
        "An engine upgrade 0.11.0 -> 0.11.2 replaces one of 8 replicas every 3 minutes from 30m "
        "(maxUnavailable 1). Each old container aborts its streams at shutdown (clean exit); each new "
        "one fails readiness for ~2 min while it loads and is then ready. Ready 7/8 during each step. "
        "Diagnosed at 50m, seven replicas in.",
        replicas=8,
        duration="65m",
        seed=124,
    )
    warmups: dict[str, list[float]] = {}
    for i, name in enumerate(f.names):
        t0 = 30 * 60 + 180 * i
        f.set("error_ratio", f"{t0 - 30}s", 0.25, [name], until=f"{t0}s")
        f.set("truncated_ratio", f"{t0 - 30}s", 0.12, [name], until=f"{t0}s")
        f.pulse("restarts", f"{t0}s", 1.0, "5m", [name])
        f.relabel("build_info", f"{t0}s", {"engine_version": "0.11.2"}, [name])
        engine_gap(f, name, t0, t0 + 120)
        f.set("gpu_util_ratio", f"{t0}s", 0.05, [name], until=f"{t0 + 120}s")
        f.set("replicas_ready", f"{t0}s", 7.0, until=f"{t0 + 120}s")
        f.step("prefix_hit_ratio", f"{t0 + 120}s", to=0.2, replicas=[name], ramp="15s")
        f.step("prefix_hit_ratio", f"{t0 + 135}s", to=0.62, replicas=[name], ramp="6m")
        others = [n for n in f.names if n != name]
        for key in f.keys("ttft_p99_seconds", others) + f.keys("queue_waiting", others):
            f.series[key][f.idx(f"{t0}s") : f.idx(f"{t0 + 120}s")] *= 1.3
        warmups[name] = [t0 + 10 + 10 * j for j in range(11)]
    with_edge(f)
    for name, fails in warmups.items():
        put(f, "probe_failures", name, windowed(f, fails))
    write(f, None, "50m", "rollout_disruption", alert("LLMErrorRateHigh", "5xx ratio above 2% for 2m"))


@incident
def capacity_gateway_tracks_engines() -> None:
    f = EdgeFleet(
        "hard-capacity-ramp-gateway-latency-tracks-engines",
        "3h at 30s: a new integration grows demand x1.7 linearly from 20m to 2h40m on 10 replicas; "
        "every engine saturates evenly in the last 40 minutes (queues, TTFT, KV 0.85). The gateway's "
        "P99 latency alert fires, but its latency is the engines' TTFT plus routing, its own queue "
        "stays near empty and its in-flight count equals what the engines hold. Diagnosed at 2h50m.",
        replicas=10,
        duration="3h",
        interval="30s",
        seed=125,
    )
    load = 1 + 0.7 * np.clip((times(f) - 20 * 60) / (140 * 60), 0, 1)
    sat = np.clip((load - 1.45) / 0.25, 0, 1)
    for s in ("request_rate", "prompt_tokens_rate", "generation_tokens_rate"):
        mult(f, s, load)
    mult(f, "requests_running", np.minimum(load, 1.6))
    mult(f, "kv_usage_ratio", np.minimum(load, 1.65))
    mult(f, "gpu_util_ratio", np.minimum(load, 1.33))
    for key in f.keys("queue_waiting"):
        f.series[key] = f.series[key] * load + 18 * sat**2
    for key in f.keys("queue_time_p99_seconds"):
        f.series[key] = f.series[key] * load + 2.5 * sat**2
    for key in f.keys("ttft_p99_seconds"):
        f.series[key] = f.series[key] * (1 + 0.3 * (load - 1)) + 2.8 * sat**2
    for key in f.keys("ttft_p50_seconds"):
        f.series[key] = f.series[key] * (1 + 0.3 * (load - 1)) + 0.9 * sat**2
    for s in ("tpot_p99_seconds", "tpot_p50_seconds"):
        mult(f, s, 1 + 0.3 * (load - 1))
    for key in f.keys("e2e_p99_seconds"):
        f.series[key] = f.series[key] * (1 + 0.2 * (load - 1)) + 3.0 * sat**2
    assign(f, "rejected_ratio", 0.001 + 0.02 * sat**2)
    with_edge(f)
    write(
        f,
        None,
        "2h50m",
        "capacity_shortage",
        alert("LLMGatewayLatencyP99High", "gateway P99 latency above 2s for 10m"),
    )


def main(argv: list[str] | None = None) -> int:
    """Write every hard incident, into `--out DIR` when given."""
    global OUT
    args = list(sys.argv[1:] if argv is None else argv)
    if args[:1] == ["--out"] and len(args) == 2:
        OUT = Path(args[1])
    elif args:
        sys.stderr.write("usage: python -m tools.generality_hard [--out DIR]\n")
        return 2
    OUT.mkdir(parents=True, exist_ok=True)
    for fn in GENERATORS:
        fn()
    print(f"wrote {len(GENERATORS)} fixtures to {OUT}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
