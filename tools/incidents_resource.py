"""Bundled incidents: GPU and memory faults, routing, rollouts and engine configuration.

Throttled and failed GPUs, OOM-killed engines, a router piling load on one replica, a
rolling restart, a batch grown by a config change, and long prefills stalling decode;
plus the confounders where a mechanism (KV pressure) shows up but a deeper cause
explains it, and a small fleet without GPU metrics.
"""

from __future__ import annotations

import numpy as np

from signals.timeparse import parse_duration
from tools.registry import incident, path
from tools.synth import Fleet

# What the engine's own /metrics endpoint exports: silent while the container restarts.
# Per-upstream error, timeout and truncation ratios and request rate come from the
# gateway, GPU series from DCGM on the node, restarts and OOM kills from
# kube-state-metrics; those keep reporting.
ENGINE_EXPORTED = (
    "ttft_p99_seconds",
    "ttft_p50_seconds",
    "tpot_p99_seconds",
    "tpot_p50_seconds",
    "e2e_p99_seconds",
    "prompt_tokens_p95",
    "output_tokens_p95",
    "long_prompt_ratio",
    "queue_waiting",
    "requests_running",
    "queue_time_p99_seconds",
    "prefill_time_p99_seconds",
    "prefix_hit_ratio",
    "prompt_tokens_rate",
    "generation_tokens_rate",
    "kv_usage_ratio",
    "preemption_rate",
    "build_info",
    "config_info",
)


def _down(f: Fleet, replica: str, start: str, end: str) -> None:
    """The engine on `replica` is not serving from `start` to `end` (reloading the model)."""
    i0, i1 = f.idx(start), f.idx(end)
    for signal in ENGINE_EXPORTED:
        for key in f.keys(signal, [replica]):
            f.series[key][i0:i1] = np.nan


def _scale(f: Fleet, signal: str, start: str, end: str, factor: float, replicas: list[str]) -> None:
    """Multiply a signal by `factor` on a window (load shifted to the others for a while)."""
    i0, i1 = f.idx(start), f.idx(end)
    for key in f.keys(signal, replicas):
        f.series[key][i0:i1] *= factor


@incident
def gpu_throttling_hot_node() -> None:
    f = Fleet(
        "gpu-throttling-hot-node",
        "A chassis fan failed on one node: its two GPUs climbed about 20 °C "
        "into thermal slowdown and their replicas decode slower; the other eight replicas are fine.",
        replicas=10,
        duration="120m",
        interval="30s",
        seed=51,
    )
    hot = f.who(4, 7)
    f.step("gpu_temp_celsius", "58m", to=86.5, replicas=hot, ramp="8m")
    f.set("gpu_throttle", "64m", 1, replicas=hot)
    f.step("gpu_power_watts", "64m", factor=0.8, replicas=hot, ramp="2m")
    f.step("gpu_util_ratio", "64m", to=0.95, replicas=hot, ramp="2m")
    f.step("tpot_p99_seconds", "64m", factor=1.9, replicas=hot, ramp="3m")
    f.step("tpot_p50_seconds", "64m", factor=1.7, replicas=hot, ramp="3m")
    f.step("e2e_p99_seconds", "64m", factor=1.7, replicas=hot, ramp="3m")
    f.step("prefill_time_p99_seconds", "64m", factor=1.6, replicas=hot, ramp="3m")
    f.step("ttft_p99_seconds", "65m", factor=1.6, replicas=hot, ramp="3m")
    f.step("requests_running", "65m", factor=1.5, replicas=hot, ramp="4m")
    f.step("kv_usage_ratio", "65m", to=0.68, replicas=hot, ramp="4m")
    f.step("queue_waiting", "66m", to=3.5, replicas=hot, ramp="4m")
    f.step("generation_tokens_rate", "64m", factor=0.9, replicas=hot, ramp="3m")
    f.write(
        path(f.name),
        "tpot_slow",
        at="100m",
        expect={"cause": "gpu_throttling", "forbidden": ["scale_out", "tune_sampling"]},
    )


@incident
def gpu_fault_xid79_replica_lost() -> None:
    f = Fleet(
        "gpu-fault-xid79-replica-lost",
        "A GPU fell off the bus (XID 79): its replica failed every "
        "request for two minutes, failed readiness and never came back; the other seven took its "
        "traffic and their queues rose a little.",
        replicas=8,
        duration="90m",
        interval="15s",
        seed=61,
    )
    dead = "vllm-5"
    survivors = [n for n in f.names if n != dead]
    f.set("gpu_xid", "47m", 79, replicas=[dead])
    f.step("error_ratio", "47m", to=0.72, replicas=[dead], ramp="30s")
    f.step("gpu_util_ratio", "47m", to=0.0, replicas=[dead], ramp="15s")
    f.step("gpu_power_watts", "47m", to=85.0, replicas=[dead], ramp="15s")
    f.step("requests_running", "47m", to=0.0, replicas=[dead], ramp="30s")
    f.step("generation_tokens_rate", "47m", to=0.0, replicas=[dead], ramp="30s")
    f.set("replicas_ready", "48m", 7)
    f.vanish(dead, "49m30s")
    # The gateway's own 5m error ratio: one upstream in eight failed ~70% of its requests
    # for two and a half minutes, then readiness took it out of rotation.
    f.add_fleet("error_ratio", 0.002)
    gateway = f.series[("error_ratio", ())]
    rise, top, fall, end = (f.idx(t) for t in ("47m", "49m30s", "52m", "54m30s"))
    gateway[rise:top] = np.linspace(0.002, 0.046, top - rise)
    gateway[top:fall] = 0.046
    gateway[fall:end] = np.linspace(0.046, 0.002, end - fall)
    f.step("request_rate", "48m", factor=8 / 7, replicas=survivors)
    f.step("prompt_tokens_rate", "48m", factor=8 / 7, replicas=survivors)
    f.step("generation_tokens_rate", "48m", factor=8 / 7, replicas=survivors)
    f.step("requests_running", "48m", factor=1.15, replicas=survivors)
    f.step("kv_usage_ratio", "48m", to=0.61, replicas=survivors, ramp="3m")
    f.step("queue_waiting", "48m", to=2.4, replicas=survivors, ramp="3m")
    f.step("queue_time_p99_seconds", "48m", factor=2.2, replicas=survivors, ramp="3m")
    f.step("ttft_p99_seconds", "48m", factor=1.3, replicas=survivors, ramp="3m")
    f.write(
        path(f.name),
        "errors",
        at="52m",
        expect={
            "cause": "gpu_fault",
            "also": ["replica_down"],
            "forbidden": ["scale_out", "blind_retry_streaming"],
        },
    )


@incident
def engine_oom_two_replicas() -> None:
    f = Fleet(
        "engine-oom-two-replicas",
        "A new multimodal client sends large image batches; the engine "
        "process's host memory grows past the container limit and the kernel OOM-kills it. Two of "
        "twelve replicas were killed, one of them twice; each restart costs about three minutes of "
        "model load and fails the requests in flight.",
        replicas=12,
        duration="120m",
        interval="30s",
        seed=83,
    )
    kills = [("vllm-3", "62m", "65m"), ("vllm-9", "66m30s", "69m30s"), ("vllm-3", "79m", "82m")]
    for replica, killed, back in kills:
        f.set("oom_killed", killed, 1, replicas=[replica])
        f.pulse("restarts", killed, 1, width="5m", replicas=[replica])
        f.step("error_ratio", killed, to=0.09, replicas=[replica], ramp="30s")
        f.step("error_ratio", _plus(killed, 5), to=0.003, replicas=[replica], ramp="1m")
        f.step("timeout_ratio", killed, to=0.02, replicas=[replica], ramp="30s")
        f.step("timeout_ratio", _plus(killed, 5), to=0.001, replicas=[replica], ramp="1m")
        _down(f, replica, killed, back)
        _scale(f, "request_rate", killed, back, 0.05, [replica])
        others = [n for n in f.names if n != replica]
        _scale(f, "request_rate", killed, back, 12 / 11, others)
        _scale(f, "queue_waiting", killed, back, 1.6, others)
        ready = f.series[("replicas_ready", ())]
        ready[f.idx(killed) : f.idx(back)] -= 1
    f.write(
        path(f.name),
        "errors",
        at="84m",
        expect={"cause": "engine_oom", "forbidden": ["scale_out", "raise_gpu_memory_utilization"]},
    )


@incident
def routing_imbalance_sticky_sessions() -> None:
    f = Fleet(
        "routing-imbalance-sticky-sessions",
        "A router config change turned on session affinity; "
        "one large customer's sessions all hash to one replica, which now gets three times its "
        "share of requests and queues while the other seven idle. Fleet TTFT P99 is up.",
        replicas=8,
        duration="110m",
        interval="30s",
        seed=71,
    )
    hot = ["vllm-6"]
    cold = [n for n in f.names if n not in hot]
    at = "52m"
    # total traffic unchanged: hot gets 3x the share of each cold one (3y + 7y = 8).
    for signal in ("request_rate", "prompt_tokens_rate"):
        f.step(signal, at, factor=2.4, replicas=hot, ramp="2m")
        f.step(signal, at, factor=0.8, replicas=cold, ramp="2m")
    f.step("generation_tokens_rate", at, factor=1.9, replicas=hot, ramp="3m")
    f.step("generation_tokens_rate", at, factor=0.8, replicas=cold, ramp="2m")
    f.step("requests_running", at, to=58, replicas=hot, ramp="4m")
    f.step("requests_running", at, factor=0.8, replicas=cold, ramp="2m")
    f.step("kv_usage_ratio", at, to=0.88, replicas=hot, ramp="5m")
    f.step("kv_usage_ratio", at, factor=0.85, replicas=cold, ramp="3m")
    f.step("queue_waiting", "54m", to=24, replicas=hot, ramp="5m")
    f.step("queue_time_p99_seconds", "54m", factor=18, replicas=hot, ramp="5m")
    f.step("ttft_p99_seconds", "54m", factor=5.5, replicas=hot, ramp="5m")
    f.step("tpot_p99_seconds", "54m", factor=1.5, replicas=hot, ramp="4m")
    f.step("e2e_p99_seconds", "54m", factor=2.0, replicas=hot, ramp="4m")
    f.step("prefix_hit_ratio", at, to=0.78, replicas=hot, ramp="5m")
    f.step("prefix_hit_ratio", at, factor=0.93, replicas=cold, ramp="5m")
    f.step("gpu_util_ratio", at, to=0.97, replicas=hot, ramp="3m")
    f.step("gpu_util_ratio", at, factor=0.82, replicas=cold, ramp="3m")
    f.write(
        path(f.name), "ttft_slow", at="90m", expect={"cause": "routing_imbalance", "forbidden": ["scale_out"]}
    )


@incident
def routing_imbalance_kv_pressure_hot_replica() -> None:
    f = Fleet(
        "routing-imbalance-kv-pressure-hot-replica",
        "A prefix-aware router kept sending one hot "
        "system prompt to the replica that cached it; that replica took nearly three times its "
        "share, its KV filled and it preempts, while the other fifteen run at normal KV. KV "
        "pressure is real but only the mechanism: routing is the cause.",
        replicas=16,
        duration="75m",
        interval="15s",
        seed=73,
    )
    hot = ["vllm-11"]
    cold = [n for n in f.names if n not in hot]
    at = "35m"
    # total traffic unchanged: 3y + 15y = 16.
    for signal in ("request_rate", "prompt_tokens_rate"):
        f.step(signal, at, factor=2.65, replicas=hot, ramp="2m")
        f.step(signal, at, factor=0.89, replicas=cold, ramp="2m")
    f.step("generation_tokens_rate", at, factor=1.7, replicas=hot, ramp="3m")
    f.step("generation_tokens_rate", at, factor=0.89, replicas=cold, ramp="2m")
    f.step("kv_usage_ratio", at, to=0.99, replicas=hot, ramp="4m")
    f.step("kv_usage_ratio", at, factor=0.9, replicas=cold, ramp="3m")
    f.step("preemption_rate", "38m", to=1.8, replicas=hot, ramp="2m")
    f.step("requests_running", at, to=64, replicas=hot, ramp="4m")
    f.step("requests_running", at, factor=0.9, replicas=cold, ramp="2m")
    f.step("queue_waiting", "37m", to=30, replicas=hot, ramp="4m")
    f.step("queue_time_p99_seconds", "37m", factor=25, replicas=hot, ramp="4m")
    f.step("ttft_p99_seconds", "37m", factor=6.0, replicas=hot, ramp="4m")
    f.step("tpot_p99_seconds", "38m", factor=2.2, replicas=hot, ramp="3m")
    f.step("tpot_p50_seconds", "38m", factor=1.5, replicas=hot, ramp="3m")
    f.step("e2e_p99_seconds", "38m", factor=2.4, replicas=hot, ramp="3m")
    f.step("prefix_hit_ratio", at, to=0.88, replicas=hot, ramp="3m")
    f.step("prefix_hit_ratio", at, factor=0.9, replicas=cold, ramp="5m")
    f.step("gpu_util_ratio", at, to=0.98, replicas=hot, ramp="3m")
    f.step("gpu_util_ratio", at, factor=0.9, replicas=cold, ramp="3m")
    f.write(
        path(f.name),
        "ttft_slow",
        at="65m",
        expect={
            "cause": "routing_imbalance",
            "also": ["kv_pressure"],
            "forbidden": ["scale_out", "raise_gpu_memory_utilization"],
        },
    )


@incident
def rollout_disruption_rolling_restart() -> None:
    f = Fleet(
        "rollout-disruption-rolling-restart",
        "An engine upgrade (vLLM 0.11.0 to 0.11.1) rolls "
        "through six replicas with maxUnavailable 1 and no preStop drain: each pod is killed with "
        "streams in flight, reloads for two and a half minutes, and the next one follows.",
        replicas=6,
        duration="100m",
        interval="15s",
        seed=81,
    )
    order = f.who(2, 0, 5, 1, 4, 3)
    for k, replica in enumerate(order):
        t = 50 + 4 * k
        killed, back = f"{t}m", _plus(f"{t}m", 2.5)
        f.pulse("restarts", killed, 1, width="5m", replicas=[replica])
        f.step("error_ratio", killed, to=0.045, replicas=[replica], ramp="15s")
        f.step("error_ratio", _plus(killed, 5), to=0.002, replicas=[replica], ramp="1m")
        f.step("truncated_ratio", killed, to=0.07, replicas=[replica], ramp="15s")
        f.step("truncated_ratio", _plus(killed, 5), to=0.012, replicas=[replica], ramp="1m")
        _down(f, replica, killed, back)
        f.relabel("build_info", back, {"engine_version": "0.11.1"}, replicas=[replica])
        _scale(f, "request_rate", killed, back, 0.05, [replica])
        others = [n for n in f.names if n != replica]
        _scale(f, "request_rate", killed, back, 6 / 5, others)
        _scale(f, "queue_waiting", killed, back, 1.8, others)
        _scale(f, "ttft_p99_seconds", killed, back, 1.3, others)
        # a fresh engine starts with an empty prefix cache
        i0, i1 = f.idx(back), f.idx(_plus(back, 4))
        for key in f.keys("prefix_hit_ratio", [replica]):
            f.series[key][i0:i1] *= np.linspace(0.45, 1.0, i1 - i0)
        ready = f.series[("replicas_ready", ())]
        ready[f.idx(killed) : f.idx(back)] -= 1
    # diagnosed while the fifth replica is still reloading
    f.write(
        path(f.name),
        "errors",
        at="68m",
        expect={"cause": "rollout_disruption", "forbidden": ["scale_out", "blind_retry_streaming"]},
    )


@incident
def batch_oversized_after_max_num_seqs_raise() -> None:
    f = Fleet(
        "batch-oversized-after-max-num-seqs-raise",
        "max_num_seqs was raised from 128 to 512 "
        "fleet-wide to get more throughput; the running batch grew two and a half times at the "
        "same request rate, every decode step got slower on every replica, and KV filled to "
        "preemption.",
        replicas=12,
        duration="140m",
        interval="30s",
        seed=91,
    )
    at = "70m"
    f.relabel("config_info", at, {"max_num_seqs": "512"})
    f.step("requests_running", at, factor=2.5, ramp="5m")
    f.step("kv_usage_ratio", at, to=0.97, ramp="6m")
    f.step("preemption_rate", "74m", to=0.6, ramp="3m")
    f.step("tpot_p99_seconds", "71m", factor=1.9, ramp="5m")
    f.step("tpot_p50_seconds", "71m", factor=1.7, ramp="5m")
    f.step("e2e_p99_seconds", "71m", factor=1.8, ramp="5m")
    f.step("ttft_p99_seconds", "73m", factor=1.5, ramp="4m")
    f.step("gpu_util_ratio", at, to=0.9, ramp="3m")
    f.step("gpu_power_watts", at, factor=1.15, ramp="3m")
    f.step("generation_tokens_rate", at, factor=1.05, ramp="3m")
    f.write(
        path(f.name),
        "tpot_slow",
        at="120m",
        expect={
            "cause": "batch_oversized",
            "also": ["kv_pressure"],
            "forbidden": ["scale_out", "raise_max_num_seqs"],
        },
    )


@incident
def prefill_interference_long_documents() -> None:
    f = Fleet(
        "prefill-interference-long-documents",
        "A document-QA feature launched and a quarter of the "
        "requests now carry 6k-token documents. Chunked prefill is off, so each long prefill runs as "
        "one step and every streaming sequence on that replica stalls behind it: TPOT P99 spikes "
        "while KV still has room.",
        replicas=8,
        duration="130m",
        interval="15s",
        seed=101,
    )
    f.relabel("config_info", "0s", {"chunked_prefill": "false", "max_num_batched_tokens": "16384"})
    at = "65m"
    f.step("long_prompt_ratio", at, to=0.25, ramp="5m")
    f.step("prompt_tokens_p95", at, factor=3.1, ramp="5m")
    f.step("prompt_tokens_rate", at, factor=2.3, ramp="5m")
    f.step("prefill_time_p99_seconds", at, factor=3.5, ramp="5m")
    f.step("ttft_p99_seconds", at, factor=2.2, ramp="5m")
    f.step("tpot_p99_seconds", at, factor=2.6, ramp="5m")
    f.step("tpot_p50_seconds", at, factor=1.12, ramp="5m")
    f.step("e2e_p99_seconds", at, factor=1.5, ramp="5m")
    f.step("kv_usage_ratio", at, to=0.68, ramp="6m")
    f.step("prefix_hit_ratio", at, factor=0.9, ramp="5m")
    f.step("gpu_util_ratio", at, to=0.82, ramp="4m")
    f.step("queue_waiting", "66m", to=1.6, ramp="4m")
    f.write(
        path(f.name),
        "tpot_slow",
        at="105m",
        expect={"cause": "prefill_interference", "forbidden": ["scale_out"]},
    )


@incident
def engine_oom_small_fleet_no_gpu_metrics() -> None:
    f = Fleet(
        "engine-oom-small-fleet-no-gpu-metrics",
        "A three-replica staging fleet without the DCGM "
        "exporter and without prefix-cache metrics: a tokenizer memory leak drives one engine "
        "container past its memory limit; it is OOM-killed twice in twenty minutes, and the two "
        "others carry the load while it reloads.",
        replicas=3,
        duration="60m",
        interval="15s",
        seed=85,
        gpu_signals=False,
        omit=("prefix_hit_ratio",),
    )
    victim = "vllm-1"
    others = [n for n in f.names if n != victim]
    for killed, back in (("28m", "31m"), ("44m", "47m")):
        f.set("oom_killed", killed, 1, replicas=[victim])
        f.pulse("restarts", killed, 1, width="5m", replicas=[victim])
        f.step("error_ratio", killed, to=0.11, replicas=[victim], ramp="15s")
        f.step("error_ratio", _plus(killed, 5), to=0.002, replicas=[victim], ramp="1m")
        _down(f, victim, killed, back)
        _scale(f, "request_rate", killed, back, 0.05, [victim])
        _scale(f, "request_rate", killed, back, 1.5, others)
        _scale(f, "requests_running", killed, back, 1.45, others)
        _scale(f, "kv_usage_ratio", killed, back, 1.35, others)
        _scale(f, "queue_waiting", killed, back, 4.0, others)
        _scale(f, "ttft_p99_seconds", killed, back, 1.8, others)
        ready = f.series[("replicas_ready", ())]
        ready[f.idx(killed) : f.idx(back)] -= 1
    f.write(
        path(f.name),
        "errors",
        at="49m",
        expect={"cause": "engine_oom", "forbidden": ["scale_out", "raise_gpu_memory_utilization"]},
    )


def _plus(offset: str, minutes: float) -> str:
    """`offset` plus some minutes, as seconds."""
    return f"{int(parse_duration(offset) + minutes * 60)}s"
