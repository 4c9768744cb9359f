"""Bundled incidents recorded twice: as signals and as the raw exporter series behind them.

Each spec is told once as a `Fleet`; `_twins` writes the signal-level fixture `X` and
its raw twin `X-raw` (`level: raw`: what vLLM, SGLang, DCGM and kube-state-metrics would
have exposed, see `tools/rawsynth.py`) with the same `expect`. Replaying the raw twin
through a real Prometheus and the signal catalog must reach the same top cause: that is
the end-to-end test of the catalog's PromQL (tests/test_raw_fixtures.py).

The four exporter flavours covered: vLLM V1 (current names), a vLLM fleet in the
0.9-0.11 window where old and new names are exposed side by side (two replicas already
on a release without the old ones), SGLang, and DCGM with kube-state-metrics.
"""

from __future__ import annotations

from typing import Any

from signals.timeparse import format_duration, parse_duration
from tools.rawsynth import write_raw
from tools.registry import incident, path
from tools.synth import Fleet

SGLANG_BUILD = {"engine": "sglang", "engine_version": "0.5.3"}


def vllm_v1_kv_pressure(f: Fleet, onset: str) -> None:
    """KV fills from `onset` with longer prompts; preemption 2 minutes later, TPOT and e2e at 3,
    TTFT and the queue at 4. The raw vLLM V1 incident, and the scraped test cluster's KV story."""

    def after(minutes: int) -> str:
        return format_duration(parse_duration(onset) + 60 * minutes)

    f.step("kv_usage_ratio", onset, to=0.985, ramp="5m")
    f.step("preemption_rate", after(2), to=2.5, ramp="3m")
    f.step("tpot_p99_seconds", after(3), factor=2.6, ramp="3m")
    f.step("tpot_p50_seconds", after(3), factor=1.6, ramp="3m")
    f.step("ttft_p99_seconds", after(4), factor=2.2, ramp="3m")
    f.step("ttft_p50_seconds", after(4), factor=1.4, ramp="3m")
    f.step("e2e_p99_seconds", after(3), factor=1.8, ramp="3m")
    f.step("queue_waiting", after(4), to=6, ramp="3m")
    f.step("queue_time_p99_seconds", after(4), factor=5, ramp="3m")
    f.step("prompt_tokens_p95", onset, factor=1.25, ramp="5m")
    f.step("prompt_tokens_rate", onset, factor=1.2, ramp="5m")


def _twins(f: Fleet, symptom: str | None, at: str, expect: dict[str, Any], **spec: Any) -> None:
    """The signal-level fixture (named like the Fleet) and its raw twin (`-raw`)."""
    f.write(path(f.name), symptom, at=at, expect=expect)
    raw_name = f"{f.name}-raw"
    write_raw(
        f,
        path(raw_name),
        raw_name,
        symptom,
        at=at,
        expect=expect,
        description=f"Raw exporter series of the incident '{f.name}': {f.description}",
        **spec,
    )


@incident
def kv_pressure_vllm_v1() -> None:
    f = Fleet(
        "kv-pressure-vllm-v1",
        "vLLM V1 fleet (current metric names). A long-document batch job grew the "
        "contexts; KV filled on every replica within minutes and the scheduler began preempting. "
        "TPOT and TTFT tails rose together.",
        replicas=6,
        duration="70m",
        seed=111,
    )
    at = "40m"
    vllm_v1_kv_pressure(f, at)
    _twins(
        f,
        "tpot_slow",
        at="62m",
        expect={
            "cause": "kv_pressure",
            "forbidden": ["scale_out", "raise_gpu_memory_utilization", "raise_max_num_seqs", "tune_sampling"],
        },
        flavour="vllm",
    )


@incident
def prefix_cache_miss_vllm_mixed() -> None:
    f = Fleet(
        "prefix-cache-miss-vllm-mixed",
        "A vLLM fleet mid-upgrade: four replicas on 0.10 expose both the old and the "
        "new metric names (gpu_cache_usage_perc and kv_cache_usage_perc, "
        "time_per_output_token_seconds and inter_token_latency_seconds, gpu_prefix_cache_* and "
        "prefix_cache_*), two already run a release with only the new ones. A template change put "
        "a request id on the first line of the system prompt: the prefix hit ratio fell from ~0.62 "
        "to ~0.15 everywhere at once, prefills ran in full, and TTFT rose at unchanged prompt "
        "length and request rate.",
        replicas=6,
        duration="70m",
        seed=121,
    )
    at = "42m"
    f.step("prefix_hit_ratio", at, to=0.15, ramp="1m")
    f.step("prefill_time_p99_seconds", at, factor=2.6, ramp="2m")
    f.step("queue_time_p99_seconds", at, factor=3.0, ramp="3m")
    f.step("queue_waiting", at, to=2.0, ramp="3m")
    f.step("ttft_p99_seconds", at, factor=2.4, ramp="2m")
    f.step("ttft_p50_seconds", at, factor=2.0, ramp="2m")
    f.step("e2e_p99_seconds", at, factor=1.1, ramp="2m")
    f.step("tpot_p99_seconds", at, factor=1.1, ramp="2m")
    f.step("gpu_util_ratio", at, factor=1.17, ramp="2m")
    f.step("gpu_power_watts", at, factor=1.1, ramp="2m")
    _twins(
        f,
        "ttft_slow",
        at="62m",
        expect={"cause": "prefix_cache_miss", "forbidden": ["scale_out", "force_prefix_cache"]},
        flavour="vllm-mixed",
        flavours={"vllm-4": "vllm", "vllm-5": "vllm"},
    )


@incident
def traffic_burst_sglang() -> None:
    f = Fleet(
        "traffic-burst-sglang",
        "An SGLang fleet. A batch client started hammering the endpoint: the request "
        "rate doubled within two minutes and the queues grew at once on every replica; KV and "
        "GPUs were healthy before it.",
        replicas=6,
        duration="70m",
        seed=131,
        prefix="sglang",
    )
    f.relabel("build_info", "0s", SGLANG_BUILD)
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
    f.step("rejected_ratio", "42m", to=0.04, ramp="2m")
    f.step("gpu_util_ratio", "41m", to=0.93, ramp="2m")
    _twins(
        f,
        "ttft_slow",
        at="58m",
        expect={"cause": "traffic_burst", "forbidden": ["scale_out", "tune_sampling"]},
        flavour="sglang",
        sglang_tokens_histogram=False,
    )


@incident
def gpu_fault_xid79_dcgm_kube() -> None:
    f = Fleet(
        "gpu-fault-xid79-dcgm-kube",
        "DCGM and kube-state-metrics view of a GPU that fell off the bus (XID 79): "
        "its vLLM replica failed most requests for two and a half minutes, failed readiness "
        "(ready 5 of 6 desired) and its series stopped; the five survivors took its traffic and "
        "their queues rose a little.",
        replicas=6,
        duration="70m",
        seed=141,
    )
    dead = "vllm-3"
    survivors = [n for n in f.names if n != dead]
    f.set("gpu_xid", "40m", 79, replicas=[dead])
    f.step("error_ratio", "40m", to=0.72, replicas=[dead], ramp="30s")
    f.step("gpu_util_ratio", "40m", to=0.0, replicas=[dead], ramp="15s")
    f.step("gpu_power_watts", "40m", to=85.0, replicas=[dead], ramp="15s")
    f.step("requests_running", "40m", to=0.0, replicas=[dead], ramp="30s")
    f.step("generation_tokens_rate", "40m", to=0.0, replicas=[dead], ramp="30s")
    f.set("replicas_ready", "41m", 5)
    f.vanish(dead, "42m30s")
    f.step("request_rate", "41m", factor=6 / 5, replicas=survivors)
    f.step("prompt_tokens_rate", "41m", factor=6 / 5, replicas=survivors)
    f.step("generation_tokens_rate", "41m", factor=6 / 5, replicas=survivors)
    f.step("requests_running", "41m", factor=1.2, replicas=survivors)
    f.step("kv_usage_ratio", "41m", to=0.63, replicas=survivors, ramp="3m")
    f.step("queue_waiting", "41m", to=2.6, replicas=survivors, ramp="3m")
    f.step("queue_time_p99_seconds", "41m", factor=2.5, replicas=survivors, ramp="3m")
    f.step("ttft_p99_seconds", "41m", factor=1.35, replicas=survivors, ramp="3m")
    _twins(
        f,
        "errors",
        at="46m",
        expect={
            "cause": "gpu_fault",
            "also": ["replica_down"],
            "forbidden": ["scale_out", "blind_retry_streaming"],
        },
        flavour="vllm",
    )
