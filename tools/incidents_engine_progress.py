"""Bundled incidents of engines that queue with their GPUs idle: an engine stalled while Ready,
a running batch pinned at a small cap, and requests deferred by admission while KV has room;
each with the confounder it must beat (a GPU fault that hangs a replica, a true capacity
shortage, KV pressure). The three signatures are recorded twice, as signals and as the raw
vLLM, DCGM and kube-state-metrics series behind them.
"""

from __future__ import annotations

import numpy as np

from tools.incidents_field import per_replica
from tools.incidents_raw import _twins, vllm_v1_kv_pressure
from tools.registry import incident, path
from tools.synth import Fleet

# What a replica's engine stops reporting when it produces nothing: its latency histograms get
# no observation, so their quantiles are undefined.
UNOBSERVED = (
    "ttft_p99_seconds",
    "ttft_p50_seconds",
    "tpot_p99_seconds",
    "tpot_p50_seconds",
    "e2e_p99_seconds",
    "queue_time_p99_seconds",
    "prefill_time_p99_seconds",
    "prompt_tokens_p95",
    "output_tokens_p95",
)


def stall(f: Fleet, replica: str, at: str, queue: float = 45.0) -> None:
    """The engine on `replica` stops making progress at `at` while it stays Ready and routed:
    its running batch is frozen, nothing finishes, no token is generated, the router keeps
    sending it requests that wait, and it is flagged stalled once a full window has passed."""
    for signal in ("generation_tokens_rate", "prompt_tokens_rate", "request_rate"):
        f.step(signal, at, to=0.0, replicas=[replica], ramp="30s")
    for signal in UNOBSERVED:
        f.set(signal, at, np.nan, replicas=[replica])
    f.step("queue_waiting", at, to=queue, replicas=[replica], ramp="10m")
    f.step("gpu_util_ratio", at, to=0.0, replicas=[replica], ramp="30s")
    f.step("gpu_power_watts", at, to=95.0, replicas=[replica], ramp="30s")
    per_replica(f, "replicas_stalled", 0.0)
    minutes = int(at.removesuffix("m"))
    f.set("replicas_stalled", f"{minutes + 5}m", 1, replicas=[replica])


@incident
def engine_stalled_ready_replica() -> None:
    f = Fleet(
        "engine-stalled-ready-replica",
        "One vLLM replica's engine core hung (its API server kept answering /health): "
        "its running batch froze, no token came out, nothing finished, and the router kept "
        "sending it a sixth of the traffic, which queued there and timed out. No XID, no OOM "
        "kill, no restart; the pod stayed Ready.",
        replicas=6,
        duration="70m",
        seed=261,
    )
    stalled = "vllm-2"
    stall(f, stalled, "40m")
    f.step("timeout_ratio", "41m", to=0.85, replicas=[stalled], ramp="5m")
    _twins(
        f,
        "rejected",
        at="62m",
        expect={
            "cause": "engine_stalled",
            "forbidden": ["scale_out", "restart_whole_fleet"],
            "not_forbidden": ["raise_max_num_seqs"],
        },
        flavour="vllm",
    )


@incident
def gpu_hang_xid_stalls_replica() -> None:
    f = Fleet(
        "gpu-hang-xid-stalls-replica",
        "A GPU stopped processing (XID 43) under one vLLM replica: its engine froze with "
        "requests in its batch and no token out, exactly like a hung engine, and the router kept "
        "feeding it. The XID says the hardware, not the engine, is what hung.",
        replicas=6,
        duration="70m",
        seed=262,
    )
    hung = "vllm-4"
    f.set("gpu_xid", "40m", 43, replicas=[hung])
    stall(f, hung, "40m")
    f.step("timeout_ratio", "41m", to=0.85, replicas=[hung], ramp="5m")
    f.write(
        path(f.name),
        "rejected",
        at="62m",
        expect={"cause": "gpu_fault", "forbidden": ["scale_out"]},
    )


def capped_fleet(f: Fleet, cap: int) -> None:
    """A fleet whose running batch sits at `cap` sequences: KV and GPUs mostly idle."""
    f.relabel("config_info", "0s", {"max_num_seqs": str(cap)})
    f.set("requests_running", "0s", float(cap))
    f.set("kv_usage_ratio", "0s", 0.09)
    f.set("gpu_util_ratio", "0s", 0.24)
    f.set("gpu_power_watts", "0s", 210.0)
    f.set("request_rate", "0s", 0.45)
    f.set("generation_tokens_rate", "0s", 190.0)
    f.set("prompt_tokens_rate", "0s", 800.0)


@incident
def batch_undersized_max_num_seqs() -> None:
    f = Fleet(
        "batch-undersized-max-num-seqs",
        "The fleet was deployed from a single-user test profile with max_num_seqs=4: each "
        "replica runs four sequences at a time. When the day's traffic rose a third, the queue "
        "grew on every replica while the running batch stayed at four, KV sat near 10% and the "
        "GPUs near a quarter busy. It looks like a capacity shortage; each engine uses a fraction "
        "of its capacity.",
        replicas=6,
        duration="150m",
        seed=263,
    )
    capped_fleet(f, 4)
    # arrivals rose a third; completions cannot follow them past four sequences per replica
    f.ramp("request_rate", "40m", "80m", 1.08)
    f.ramp("generation_tokens_rate", "40m", "80m", 1.08)
    f.step("queue_waiting", "80m", to=30, ramp="50m")
    f.step("queue_time_p99_seconds", "80m", factor=25, ramp="50m")
    f.step("ttft_p99_seconds", "80m", factor=6.0, ramp="50m")
    f.step("ttft_p50_seconds", "80m", factor=4.0, ramp="50m")
    f.step("e2e_p99_seconds", "80m", factor=2.0, ramp="50m")
    _twins(
        f,
        "ttft_slow",
        at="145m",
        expect={
            "cause": "batch_undersized",
            "forbidden": ["scale_out", "raise_gpu_memory_utilization"],
            "not_forbidden": ["raise_max_num_seqs"],
        },
        flavour="vllm",
    )


@incident
def capacity_shortage_full_batches() -> None:
    f = Fleet(
        "capacity-shortage-full-batches",
        "Demand rose steadily for two hours across every tenant; each replica's running "
        "batch grew with it, KV filled to the mid-80s and the GPUs ran near full before the "
        "queues grew everywhere. The batch cap (max_num_seqs=256) is not what holds them: the "
        "fleet is short of capacity.",
        replicas=6,
        duration="180m",
        seed=264,
    )
    f.relabel("config_info", "0s", {"max_num_seqs": "256"})
    f.ramp("request_rate", "30m", "150m", 1.7)
    f.ramp("prompt_tokens_rate", "30m", "150m", 1.7)
    f.ramp("generation_tokens_rate", "30m", "150m", 1.7)
    f.ramp("requests_running", "30m", "150m", 1.9)
    f.ramp("kv_usage_ratio", "30m", "150m", 1.65)
    f.ramp("gpu_util_ratio", "30m", "150m", 1.3)
    f.step("queue_waiting", "120m", to=12, ramp="30m")
    f.step("queue_time_p99_seconds", "120m", factor=8, ramp="30m")
    f.step("ttft_p99_seconds", "120m", factor=3.0, ramp="30m")
    per_replica(f, "queue_deferred", 0.0)
    f.write(
        path(f.name),
        "ttft_slow",
        at="175m",
        expect={"cause": "capacity_shortage", "not_forbidden": ["scale_out"], "forbidden": ["tune_sampling"]},
    )


@incident
def admission_stall_lora_budget() -> None:
    f = Fleet(
        "admission-stall-lora-budget",
        "A vLLM 0.24 fleet serving LoRA adapters with max_loras=4. A new product sent "
        "requests for a dozen adapters at once: requests whose adapter could not be loaded were "
        "deferred by the scheduler (waiting for reason deferred) while KV sat at a third, the "
        "running batch thinned and time to first token rose five-fold at an unchanged request rate.",
        replicas=6,
        duration="80m",
        seed=265,
    )
    per_replica(f, "queue_deferred", 0.0)
    at = "45m"
    f.step("queue_deferred", at, to=14, ramp="4m")
    f.step("requests_running", at, factor=0.55, ramp="3m")
    f.step("kv_usage_ratio", at, to=0.33, ramp="3m")
    f.step("gpu_util_ratio", at, factor=0.7, ramp="3m")
    f.step("queue_time_p99_seconds", at, factor=12, ramp="4m")
    f.step("ttft_p99_seconds", at, factor=5.0, ramp="4m")
    f.step("ttft_p50_seconds", at, factor=2.5, ramp="4m")
    f.step("e2e_p99_seconds", at, factor=1.6, ramp="4m")
    _twins(
        f,
        "ttft_slow",
        at="72m",
        expect={
            "cause": "admission_stall",
            "forbidden": ["scale_out", "raise_gpu_memory_utilization"],
        },
        flavour="vllm",
    )


@incident
def kv_pressure_with_deferred_requests() -> None:
    f = Fleet(
        "kv-pressure-with-deferred-requests",
        "A vLLM 0.24 fleet. A long-document batch job grew the contexts; KV filled on every "
        "replica and the scheduler preempted. A few requests were counted as deferred while "
        "blocks ran out, beside a growing queue waiting for capacity: KV is full, admission is "
        "not what holds them.",
        replicas=6,
        duration="70m",
        seed=266,
    )
    per_replica(f, "queue_deferred", 0.0)
    vllm_v1_kv_pressure(f, "40m")
    f.step("queue_deferred", "43m", to=4, ramp="3m")
    f.write(
        path(f.name),
        "ttft_slow",
        at="62m",
        expect={
            "cause": "kv_pressure",
            "forbidden": ["scale_out", "raise_gpu_memory_utilization", "raise_max_num_seqs"],
        },
    )


@incident
def engine_stalled_clients_time_out() -> None:
    f = Fleet(
        "engine-stalled-clients-time-out",
        "Behind a gateway, one vLLM replica's engine hung after a collective never "
        "returned: the pod stayed Ready and routed, its batch froze with no token out, and the "
        "gateway answered its share of requests with upstream timeouts. The gateway's backend set "
        "is right: the backend is there, it just does not progress.",
        replicas=8,
        duration="70m",
        seed=267,
    )
    f.add_edge()
    stalled = "vllm-5"
    stall(f, stalled, "38m", queue=60.0)
    f.step("timeout_ratio", "39m", to=0.9, replicas=[stalled], ramp="4m")
    f.step("upstream_error_ratio", "39m", to=0.9, replicas=[stalled], ramp="4m")
    f.step("gateway_latency_p99_seconds", "39m", factor=40.0, ramp="4m")
    f.write(
        path(f.name),
        "errors",
        at="60m",
        expect={"cause": "engine_stalled", "forbidden": ["scale_out", "blind_retry_streaming"]},
    )
