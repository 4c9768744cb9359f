"""The incident told on each fleet, as signal-level stories for the existing synthesiser.

A story shapes a `tools.synth.Fleet` (one replica per engine pod or LeaderWorkerSet group)
the way the bundled raw incidents in `tools/incidents_raw.py` do, moved to this scenario's
clock, and says what a correct diagnosis concludes: the cause, the symptom, the onset and
the moment `at` to diagnose, which is when on-call would look (the incidents overlap in
time, but a transient symptom is diagnosed while it is visible, as the bundled fixtures
do). `tools.rawsynth.RawFleet` then plays the exporters forward.

- `kv_pressure` (the raw kv-pressure-vllm-v1 story, from minute 45; at 70): KV fills on
  every replica, the scheduler preempts, TPOT and TTFT tails rise. Symptom tpot_slow.
- `gpu_fault` (at minute 35; at 41): one GPU of one replica reports XID 79; its engine
  fails most requests, crashes at 37m30s and crash-loops (the container restarts with
  Kubernetes' doubling back-off, never serving again: its metrics vanish, its pod is not
  ready, the workload has one ready replica fewer); the survivors take its traffic. The
  errors last until the crash, so the symptom is diagnosed soon after. Symptom errors.
- `traffic_burst` (the raw traffic-burst-sglang story, at minute 40; at 60): the request
  rate doubles within two minutes on every replica and queues grow. Symptom ttft_slow.
- `healthy`: nothing happens; no cause must be named (its `at` is minute 70).

A replica may own several GPUs (tensor parallelism, and a group's workers): the Fleet then
carries GPU series `gpu="0"` to `gpu="<n-1>"` per replica, leader's first.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from signals.timeparse import parse_duration
from tools.incidents_raw import vllm_v1_kv_pressure
from tools.synth import GPU_HEALTHY, HEALTHY, Fleet

STORIES = ("kv_pressure", "gpu_fault", "traffic_burst", "healthy")
HEALTHY_AT = "70m"
MIN_DURATION = "75m"
CRASH_BACKOFF = (10, 20, 40, 80, 160, 300)
FAULT_REPLICA = 2
FAULT_GPU = 1


@dataclass(frozen=True)
class Story:
    """A shaped Fleet and what its diagnosis must find (offsets in seconds from the start)."""

    fleet: Fleet
    story: str
    cause: str | None
    symptom: str | None
    onset: float
    at: float
    also: tuple[str, ...] = ()
    faulty: tuple[tuple[int, int], ...] = ()
    crash: tuple[tuple[int, float], ...] = ()


def add_gpus(fleet: Fleet, count: int) -> None:
    """GPU series `gpu="1"..` beside the Fleet's `gpu="0"`, each a healthy GPU of its own."""
    rng = np.random.default_rng(fleet.seed * 31 + count)
    for name in fleet.names:
        for g in range(1, count):
            for signal, (base, _) in GPU_HEALTHY.items():
                jitter = float(1 + rng.normal(0, 0.02)) if base else 1.0
                key = (signal, tuple(sorted({"instance": name, "gpu": str(g)}.items())))
                fleet.series[key] = np.full(fleet.n, base * jitter)


def _replica_keys(fleet: Fleet, signal: str, replica: str) -> list[tuple[str, tuple[tuple[str, str], ...]]]:
    return [k for k in fleet.series if k[0] == signal and dict(k[1]).get("instance") == replica]


def _kv_pressure(f: Fleet) -> tuple[str, str, str, str, tuple[str, ...]]:
    at = "45m"
    vllm_v1_kv_pressure(f, at)
    return "kv_pressure", "tpot_slow", at, "70m", ()


def _crash_times(start: float, until: float) -> list[float]:
    """When a crash-looping container restarts: a failed start of ~20 s, then the back-off."""
    times, t, k = [], start, 0
    while t < until:
        times.append(t)
        t += 20 + CRASH_BACKOFF[min(k, len(CRASH_BACKOFF) - 1)]
        k += 1
    return times


def _gpu_fault(f: Fleet) -> tuple[str, str, str, str, tuple[str, ...], tuple[tuple[int, float], ...]]:
    at, crash = "35m", "37m30s"
    dead = f.names[FAULT_REPLICA % len(f.names)]
    survivors = [n for n in f.names if n != dead]
    xid = f.series[("gpu_xid", (("gpu", str(FAULT_GPU)), ("instance", dead)))]
    xid[f.idx(at) :] = 79
    f.step("error_ratio", at, to=0.72, replicas=[dead], ramp="30s")
    f.step("requests_running", at, to=0.0, replicas=[dead], ramp="30s")
    f.step("generation_tokens_rate", at, to=0.0, replicas=[dead], ramp="30s")
    for key in _replica_keys(f, "gpu_util_ratio", dead):
        f.series[key][f.idx(at) :] = 0.0
    for key in _replica_keys(f, "gpu_power_watts", dead):
        f.series[key][f.idx(at) :] = 85.0
    i_crash = f.idx(crash)
    for signal in HEALTHY:
        for key in _replica_keys(f, signal, dead):
            f.series[key][i_crash:] = np.nan
    restarts = f.series[("restarts", (("instance", dead),))]
    end = (f.n - 1) * f.step_s
    for t in _crash_times(parse_duration(crash), end):
        restarts[f.idx(t) :] += 1
    f.set("replicas_ready", crash, float(len(survivors)))
    share = len(f.names) / len(survivors)
    f.step("request_rate", "36m", factor=share, replicas=survivors)
    f.step("prompt_tokens_rate", "36m", factor=share, replicas=survivors)
    f.step("generation_tokens_rate", "36m", factor=share, replicas=survivors)
    f.step("requests_running", "36m", factor=1.2, replicas=survivors)
    f.step("kv_usage_ratio", "36m", to=0.63, replicas=survivors, ramp="3m")
    f.step("queue_waiting", "36m", to=2.6, replicas=survivors, ramp="3m")
    f.step("queue_time_p99_seconds", "36m", factor=2.5, replicas=survivors, ramp="3m")
    f.step("ttft_p99_seconds", "36m", factor=1.35, replicas=survivors, ramp="3m")
    crashed = ((f.names.index(dead), parse_duration(crash)),)
    return "gpu_fault", "errors", at, "41m", ("replica_down",), crashed


def _traffic_burst(f: Fleet) -> tuple[str, str, str, str, tuple[str, ...]]:
    at = "40m"
    f.step("request_rate", at, factor=2.1, ramp="2m")
    f.step("prompt_tokens_rate", at, factor=2.1, ramp="2m")
    f.step("generation_tokens_rate", at, factor=2.0, ramp="2m")
    f.step("queue_waiting", "41m", to=15, ramp="2m")
    f.step("requests_running", "41m", factor=1.6, ramp="2m")
    f.step("queue_time_p99_seconds", "41m", factor=10, ramp="2m")
    f.step("ttft_p99_seconds", "41m", factor=4, ramp="2m")
    f.step("ttft_p50_seconds", "41m", factor=2, ramp="2m")
    f.step("kv_usage_ratio", "41m", to=0.8, ramp="3m")
    f.step("gpu_util_ratio", "41m", to=0.93, ramp="2m")
    return "traffic_burst", "ttft_slow", at, "60m", ()


def tell(
    story: str,
    *,
    name: str,
    replicas: int,
    gpus: int,
    duration: str,
    interval: str,
    start: str,
    seed: int,
) -> Story:
    """The Fleet of one fleet's replicas (`gpus` per replica) with `story` told on it."""
    if story not in STORIES:
        raise ValueError(f"unknown story {story!r}; known: {', '.join(STORIES)}")
    if parse_duration(duration) < parse_duration(MIN_DURATION):
        raise ValueError(f"the stories need at least {MIN_DURATION} of history, got {duration}")
    if story == "gpu_fault" and (replicas < 2 or gpus <= FAULT_GPU):
        raise ValueError(f"a gpu_fault story needs >= 2 replicas and >= {FAULT_GPU + 1} GPUs each")
    f = Fleet(
        name,
        f"{story} on {name}",
        replicas=replicas,
        duration=duration,
        interval=interval,
        start=start,
        seed=seed,
        prefix=name,
        fleet_signals=False,
    )
    add_gpus(f, gpus)
    if story == "healthy":
        at = parse_duration(HEALTHY_AT)
        return Story(f, story, None, None, at, at)
    if story == "gpu_fault":
        cause, symptom, onset, at_text, also, crash = _gpu_fault(f)
        faulty = ((FAULT_REPLICA % replicas, FAULT_GPU),)
        return Story(
            f, story, cause, symptom, parse_duration(onset), parse_duration(at_text), also, faulty, crash
        )
    cause, symptom, onset, at_text, also = _kv_pressure(f) if story == "kv_pressure" else _traffic_burst(f)
    return Story(f, story, cause, symptom, parse_duration(onset), parse_duration(at_text), also)
