"""Bundled incidents of the links: NVLink errors on a tensor-parallel replica, and KV transfers
of disaggregated prefill/decode that fail; each with the confounder it must beat (a throttled
tensor-parallel replica without link errors, decode engines OOM-killed while the transfer
path is healthy), and a raw twin of each cause in its exporters' shapes.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from signals.timeparse import parse_duration
from tools.rawsynth import write_raw
from tools.registry import incident, path
from tools.synth import GPU_HEALTHY, Fleet

LINK_SIGNALS = ("gpu_nvlink_errors", "gpu_pcie_replays")
PD_HEALTHY = {"kv_transfer_failures": 0.0, "kv_transfer_queue": 1.2, "kv_transfer_p99_seconds": 0.045}


def _gpu_key(signal: str, replica: str, gpu: int) -> tuple[str, tuple[tuple[str, str], ...]]:
    return signal, tuple(sorted({"instance": replica, "gpu": str(gpu)}.items()))


def tensor_parallel(f: Fleet, tp: int) -> None:
    """Give every replica `tp` GPUs (copies of its GPU 0, each a little apart) and their link
    error counters, silent: the exporter reports them, no link has failed."""
    for name in f.names:
        for signal in GPU_HEALTHY:
            base = f.series[_gpu_key(signal, name, 0)]
            for g in range(1, tp):
                jitter = 1.0 + (f.rng.normal(0, 0.02) if base[0] else 0.0)
                f.series[_gpu_key(signal, name, g)] = base.copy() * jitter
        for g in range(tp):
            for signal in LINK_SIGNALS:
                f.series[_gpu_key(signal, name, g)] = np.zeros(f.n)


def link_errors(f: Fleet, signal: str, replica: str, gpu: int, at: str, rate: float) -> None:
    """Errors per second on one GPU's links from `at`."""
    f.series[_gpu_key(signal, replica, gpu)][f.idx(at) :] = rate


def _twins(f: Fleet, symptom: str, at: str, expect: dict[str, Any], **spec: Any) -> None:
    """The signal-level fixture and its raw twin (`-raw`), as tools/incidents_raw.py writes them."""
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


def _tp_fleet(name: str, description: str, seed: int) -> Fleet:
    f = Fleet(name, description, replicas=6, duration="100m", interval="30s", seed=seed)
    tensor_parallel(f, 4)
    # a PCIe riser on another node has always logged a replay now and then: background
    link_errors(f, "gpu_pcie_replays", "vllm-5", 3, "0s", 0.02)
    return f


@incident
def interconnect_fault_nvlink_tp() -> None:
    f = _tp_fleet(
        "interconnect-fault-nvlink-tp",
        "Six vLLM replicas, each tensor-parallel over four H100s. On one replica an NVLink "
        "between GPUs 1 and 2 began logging CRC and replay errors: every decode step of that "
        "instance waits on its all-reduce over the degraded link, so the whole instance "
        "slows (TPOT more than doubles, a few requests time out) while its clocks, "
        "temperatures and the other five replicas stay normal.",
        seed=261,
    )
    bad = "vllm-2"
    at = "55m"
    link_errors(f, "gpu_nvlink_errors", bad, 1, at, 38.0)
    link_errors(f, "gpu_nvlink_errors", bad, 2, at, 21.0)
    f.step("tpot_p99_seconds", at, factor=2.6, replicas=[bad], ramp="2m")
    f.step("tpot_p50_seconds", at, factor=2.2, replicas=[bad], ramp="2m")
    f.step("e2e_p99_seconds", at, factor=2.3, replicas=[bad], ramp="2m")
    f.step("prefill_time_p99_seconds", at, factor=1.9, replicas=[bad], ramp="2m")
    f.step("ttft_p99_seconds", "56m", factor=1.35, replicas=[bad], ramp="3m")
    f.step("requests_running", "56m", factor=1.6, replicas=[bad], ramp="3m")
    f.step("kv_usage_ratio", "56m", to=0.7, replicas=[bad], ramp="4m")
    f.step("queue_waiting", "57m", to=4.0, replicas=[bad], ramp="3m")
    f.step("generation_tokens_rate", at, factor=0.7, replicas=[bad], ramp="2m")
    f.step("timeout_ratio", "57m", to=0.012, replicas=[bad], ramp="2m")
    _twins(
        f,
        "tpot_slow",
        at="90m",
        expect={"cause": "interconnect_fault", "forbidden": ["scale_out", "restart_replica_in_place"]},
        flavour="vllm",
    )


@incident
def gpu_throttling_tp_no_link_errors() -> None:
    f = _tp_fleet(
        "gpu-throttling-tp-no-link-errors",
        "Six vLLM replicas, each tensor-parallel over four H100s, with DCGM's NVLink and PCIe "
        "error counters exported. A failed fan heats the four GPUs of one replica into thermal "
        "slowdown: that instance decodes slower, exactly as a degraded link would make it, "
        "but its links log no error; only a PCIe riser elsewhere keeps its usual trickle of "
        "replays.",
        seed=262,
    )
    hot = "vllm-4"
    at = "52m"
    f.step("gpu_temp_celsius", "46m", to=88.0, replicas=[hot], ramp="6m")
    f.set("gpu_throttle", at, 1, replicas=[hot])
    f.step("gpu_power_watts", at, factor=0.8, replicas=[hot], ramp="2m")
    f.step("tpot_p99_seconds", at, factor=2.2, replicas=[hot], ramp="3m")
    f.step("tpot_p50_seconds", at, factor=1.9, replicas=[hot], ramp="3m")
    f.step("e2e_p99_seconds", at, factor=1.9, replicas=[hot], ramp="3m")
    f.step("prefill_time_p99_seconds", at, factor=1.7, replicas=[hot], ramp="3m")
    f.step("ttft_p99_seconds", "53m", factor=1.6, replicas=[hot], ramp="3m")
    f.step("requests_running", "53m", factor=1.5, replicas=[hot], ramp="3m")
    f.step("queue_waiting", "54m", to=3.5, replicas=[hot], ramp="3m")
    f.step("generation_tokens_rate", at, factor=0.8, replicas=[hot], ramp="2m")
    f.write(
        path(f.name),
        "tpot_slow",
        at="90m",
        expect={"cause": "gpu_throttling", "forbidden": ["scale_out", "tune_sampling"]},
    )


def _pd_fleet(name: str, description: str, seed: int) -> Fleet:
    f = Fleet(name, description, replicas=8, duration="90m", interval="15s", seed=seed, prefix="sglang")
    f.relabel("build_info", "0s", {"engine": "sglang", "engine_version": "0.5.3"})
    for name_ in f.names:
        for signal, value in PD_HEALTHY.items():
            f.series[(signal, (("instance", name_),))] = np.full(f.n, value)
    return f


@incident
def kv_transfer_fault_pd() -> None:
    f = _pd_fleet(
        "kv-transfer-fault-pd",
        "SGLang prefill/decode disaggregation: eight decode instances receive KV caches "
        "from the prefill pool over RDMA. A switch port on the transfer network began "
        "flapping: KV transfers to three decode instances slowed from ~45 ms to seconds and "
        "many failed, so those decode requests waited for KV that arrived late or never and "
        "ended in errors; the engines stayed up, nothing was killed or restarted.",
        seed=271,
    )
    bad = f.who(1, 4, 6)
    at = "50m"
    f.step("kv_transfer_p99_seconds", at, to=3.2, replicas=bad, ramp="1m")
    f.step("kv_transfer_failures", at, to=0.6, replicas=bad, ramp="1m")
    f.step("kv_transfer_queue", at, to=14.0, replicas=bad, ramp="2m")
    f.step("error_ratio", at, to=0.14, replicas=bad, ramp="1m")
    f.step("ttft_p99_seconds", at, factor=4.0, replicas=bad, ramp="2m")
    f.step("ttft_p50_seconds", at, factor=2.5, replicas=bad, ramp="2m")
    f.step("e2e_p99_seconds", at, factor=1.6, replicas=bad, ramp="2m")
    f.step("requests_running", at, factor=0.8, replicas=bad, ramp="2m")
    f.step("generation_tokens_rate", at, factor=0.8, replicas=bad, ramp="2m")
    _twins(
        f,
        "errors",
        at="75m",
        expect={"cause": "kv_transfer_fault", "forbidden": ["scale_out", "restart_decode_workers"]},
        flavour="sglang",
        sglang_tokens_histogram=False,
    )


@incident
def engine_oom_pd_decode() -> None:
    f = _pd_fleet(
        "engine-oom-pd-decode",
        "SGLang prefill/decode disaggregation, eight decode instances. Long conversations "
        "grew the decode instances' host memory past their container limit: two were "
        "OOM-killed (one twice) and reloaded for three minutes each, failing the requests in "
        "flight; the transfers those deaths cut show as a blip of failed KV transfers while "
        "the transfer path itself stays fast.",
        seed=272,
    )
    kills = [("sglang-2", "52m", "55m"), ("sglang-6", "57m", "60m"), ("sglang-2", "68m", "71m")]
    for replica, killed, back in kills:
        f.set("oom_killed", killed, 1, replicas=[replica])
        f.pulse("restarts", killed, 1, width="5m", replicas=[replica])
        f.step("error_ratio", killed, to=0.1, replicas=[replica], ramp="30s")
        f.step("error_ratio", _plus(killed, 5), to=0.003, replicas=[replica], ramp="1m")
        i0, i1 = f.idx(killed), f.idx(back)
        for key in f.keys("kv_transfer_failures", [replica]):
            f.series[key][i0 : i0 + 4] = 0.05
        for signal in (
            "ttft_p99_seconds",
            "ttft_p50_seconds",
            "tpot_p99_seconds",
            "tpot_p50_seconds",
            "e2e_p99_seconds",
            "queue_waiting",
            "requests_running",
            "kv_usage_ratio",
            "prefix_hit_ratio",
            "prompt_tokens_rate",
            "generation_tokens_rate",
            "queue_time_p99_seconds",
            "prefill_time_p99_seconds",
            "prompt_tokens_p95",
            "output_tokens_p95",
            "long_prompt_ratio",
            "preemption_rate",
            "kv_transfer_queue",
            "kv_transfer_p99_seconds",
            "kv_transfer_failures",
        ):
            for key in f.keys(signal, [replica]):
                f.series[key][i0 + 4 : i1] = np.nan
        ready = f.series[("replicas_ready", ())]
        ready[i0:i1] -= 1
    f.write(
        path(f.name),
        "errors",
        at="74m",
        expect={"cause": "engine_oom", "forbidden": ["scale_out", "raise_gpu_memory_utilization"]},
    )


def _plus(offset: str, minutes: float) -> str:
    return f"{int(parse_duration(offset) + 60 * minutes)}s"
