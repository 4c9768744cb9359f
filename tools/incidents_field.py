"""Bundled incidents of the mechanisms public reports show: the blended price, releases that
regress speed, decode starved by ordinary prefills, the prompt tail, CUDA OOM ending as
Error, a rollout that removes the only replica, one replica's hardware under a modest rise,
and chains named both ways; each with the confounder it must beat."""

from __future__ import annotations

import numpy as np

from tools.registry import incident, path
from tools.synth import Fleet, _key


def per_replica(f: Fleet, signal: str, value: float) -> None:
    """A per-replica series the synthesiser does not make by default, flat at `value`."""
    for name in f.names:
        f.series[_key(signal, {"instance": name})] = np.full(f.n, value)


@incident
def cost_blended_price_cache_collapse() -> None:
    f = Fleet(
        "cost-blended-price-cache-collapse",
        "A system-prompt template began with a timestamp: the prefix-cache hit ratio "
        "collapsed, cached input (billed at a fraction) became full-price input, and the "
        "price paid per 1k tokens rose with no price change and no new version.",
        replicas=6,
        duration="100m",
        seed=211,
    )
    at = "50m"
    f.step("prefix_hit_ratio", at, to=0.12, ramp="3m")
    f.step("cost_per_1k_tokens", at, factor=1.45, ramp="3m")
    f.step("prefill_time_p99_seconds", at, factor=1.8, ramp="3m")
    f.step("ttft_p99_seconds", at, factor=1.5, ramp="3m")
    f.write(
        path(f.name),
        "cost_up",
        at="90m",
        expect={"cause": "prefix_cache_miss", "forbidden": ["scale_out", "tune_sampling"]},
    )


@incident
def cost_output_share_growth() -> None:
    f = Fleet(
        "cost-output-share-growth",
        "A client turned on long reasoning: output tokens per request nearly doubled at "
        "the same request rate and prompts. Output is billed at a premium, so the blended "
        "price per 1k tokens rose though no price moved.",
        replicas=5,
        duration="100m",
        seed=212,
    )
    at = "50m"
    f.step("output_tokens_p95", at, factor=1.9, ramp="4m")
    f.step("generation_tokens_rate", at, factor=1.85, ramp="4m")
    f.step("cost_per_1k_tokens", at, factor=1.3, ramp="4m")
    f.step("requests_running", at, factor=1.3, ramp="4m")
    f.step("kv_usage_ratio", at, factor=1.2, ramp="4m")
    f.write(
        path(f.name),
        "cost_up",
        at="90m",
        expect={"cause": "long_output_shift", "forbidden": ["scale_out", "tune_sampling"]},
    )


@incident
def release_regresses_decode() -> None:
    f = Fleet(
        "release-regresses-decode",
        "An engine release changed the attention kernel for this GPU: decode throughput "
        "fell about four-fold on every replica at once, with the batch, prompts and "
        "arrivals as they were.",
        replicas=6,
        duration="100m",
        seed=213,
    )
    at = "50m"
    f.relabel("build_info", at, {"engine_version": "0.12.0"})
    f.step("tpot_p99_seconds", at, factor=4.2, ramp="2m")
    f.step("tpot_p50_seconds", at, factor=4.0, ramp="2m")
    f.step("e2e_p99_seconds", at, factor=3.5, ramp="2m")
    f.step("generation_tokens_rate", at, factor=0.95, ramp="2m")
    f.write(
        path(f.name),
        "tpot_slow",
        at="90m",
        expect={"cause": "version_change", "forbidden": ["scale_out", "tune_sampling"]},
    )


@incident
def decode_starved_by_ordinary_prefills() -> None:
    f = Fleet(
        "decode-starved-by-ordinary-prefills",
        "A document-QA feature sent ordinary 3-6k-token prompts at a higher share; with "
        "prefill-first scheduling the engines spent their steps on prefill, and TPOT P99 "
        "rose five-fold while KV stayed low, nothing was preempted and the queue held.",
        replicas=6,
        duration="100m",
        seed=214,
    )
    at = "50m"
    f.step("prompt_tokens_rate", at, factor=1.7, ramp="3m")
    f.step("prefill_time_p99_seconds", at, factor=2.2, ramp="3m")
    f.step("tpot_p99_seconds", at, factor=5.0, ramp="3m")
    f.step("tpot_p50_seconds", at, factor=1.2, ramp="3m")
    f.step("request_rate", at, factor=1.1, ramp="3m")
    f.write(
        path(f.name),
        "tpot_slow",
        at="90m",
        expect={"cause": "prefill_interference", "forbidden": ["scale_out", "tune_sampling"]},
    )


@incident
def traffic_burst_slows_decode() -> None:
    f = Fleet(
        "traffic-burst-slows-decode",
        "A load test was pointed at production: arrivals doubled within two minutes, the "
        "batch grew, queues grew at once on every replica, and TPOT rose with the batch.",
        replicas=6,
        duration="90m",
        seed=215,
    )
    at = "50m"
    f.step("request_rate", at, factor=2.1, ramp="2m")
    f.step("prompt_tokens_rate", at, factor=2.1, ramp="2m")
    f.step("generation_tokens_rate", at, factor=2.0, ramp="2m")
    f.step("queue_waiting", "51m", to=14, ramp="2m")
    f.step("requests_running", "51m", factor=1.6, ramp="2m")
    f.step("tpot_p99_seconds", "51m", factor=2.2, ramp="2m")
    f.step("prefill_time_p99_seconds", "51m", factor=1.6, ramp="2m")
    f.step("queue_time_p99_seconds", "51m", factor=8, ramp="2m")
    f.step("kv_usage_ratio", "51m", to=0.78, ramp="3m")
    f.write(
        path(f.name),
        "tpot_slow",
        at="80m",
        expect={"cause": "traffic_burst", "forbidden": ["scale_out", "tune_sampling"]},
    )


@incident
def prompt_tail_stalls_fleet() -> None:
    f = Fleet(
        "prompt-tail-stalls-fleet",
        "A handful of 100k-token documents (half a percent of requests) began arriving: "
        "the P95 prompt length did not move, but the tail did, and every replica's "
        "prefills and first tokens stalled behind them.",
        replicas=6,
        duration="100m",
        seed=216,
    )
    at = "50m"
    f.set("long_prompt_ratio", "0m", 0.0005)
    per_replica(f, "prompt_tokens_max_bucket", 10000.0)
    f.set("long_prompt_ratio", at, 0.005)
    f.set("prompt_tokens_max_bucket", at, 200000.0)
    f.step("prefill_time_p99_seconds", at, factor=3.5, ramp="2m")
    f.step("ttft_p99_seconds", at, factor=3.0, ramp="2m")
    f.step("queue_time_p99_seconds", at, factor=3.0, ramp="2m")
    f.step("queue_waiting", at, to=2.5, ramp="2m")
    f.write(
        path(f.name),
        "ttft_slow",
        at="90m",
        expect={"cause": "long_prompt_surge", "forbidden": ["scale_out", "tune_sampling"]},
    )


@incident
def cuda_oom_ends_as_error() -> None:
    f = Fleet(
        "cuda-oom-ends-as-error",
        "gpu_memory_utilization was set to 0.95; under longer contexts two engines hit a "
        "CUDA out-of-memory error and exited with code 1 (reason Error, not OOMKilled), "
        "with GPU memory near full before each crash.",
        replicas=6,
        duration="90m",
        seed=217,
    )
    per_replica(f, "terminated_error", 0.0)
    per_replica(f, "exit_code", 0.0)
    f.relabel("config_info", "0m", {"gpu_memory_utilization": "0.95"})
    victims = f.who(1, 4)
    f.step("gpu_memory_used_ratio", "40m", to=0.985, ramp="2m")
    f.step("kv_usage_ratio", "45m", to=0.93, ramp="4m")
    for k, name in enumerate(victims):
        t = 50 + 4 * k
        f.set("terminated_error", f"{t}m", 1, replicas=[name])
        f.set("exit_code", f"{t}m", 1, replicas=[name])
        f.restart(name, f"{t}m", down="5m")
    f.step("error_ratio", "50m", to=0.04, ramp="2m")
    f.set("replicas_ready", "50m", 5, until="62m")
    f.write(
        path(f.name),
        "errors",
        at="70m",
        expect={"cause": "engine_oom", "forbidden": ["scale_out", "raise_gpu_memory_utilization"]},
    )


@incident
def crash_loop_bad_flag() -> None:
    f = Fleet(
        "crash-loop-bad-flag",
        "A new replica set came up with a flag its engine version does not know: the "
        "containers exit with code 1 (reason Error) at start, far from any memory limit. "
        "Replicas are down; nothing ran out of memory.",
        replicas=6,
        duration="90m",
        seed=218,
    )
    per_replica(f, "terminated_error", 0.0)
    per_replica(f, "exit_code", 0.0)
    crashing = f.who(2, 5)
    survivors = [n for n in f.names if n not in crashing]
    for name in crashing:
        f.set("terminated_error", "50m", 1, replicas=[name])
        f.set("exit_code", "50m", 1, replicas=[name])
        f.set("gpu_memory_used_ratio", "50m", 0.02, replicas=[name])
        for t in (50, 56, 62, 68, 74, 80):
            f.pulse("restarts", f"{t}m", 1, width="3m", replicas=[name])
        for signal in (
            "request_rate",
            "requests_running",
            "queue_waiting",
            "ttft_p99_seconds",
            "kv_usage_ratio",
        ):
            f.set(signal, "50m", np.nan, replicas=[name])
    f.set("replicas_ready", "50m", 4)
    f.step("request_rate", "50m", factor=1.5, replicas=survivors)
    f.step("queue_waiting", "51m", to=7, replicas=survivors, ramp="3m")
    f.step("ttft_p99_seconds", "51m", factor=2.4, replicas=survivors, ramp="3m")
    f.step("error_ratio", "50m", to=0.02, replicas=survivors, ramp="2m")
    f.write(
        path(f.name),
        "errors",
        at="85m",
        expect={
            "cause": "replica_down",
            "forbidden": ["scale_out"],
            "not_forbidden": ["raise_gpu_memory_utilization"],
        },
    )


@incident
def rollout_removes_only_replica() -> None:
    f = Fleet(
        "rollout-removes-only-replica",
        "A one-replica deployment with maxUnavailable 1 rolled out a new image: the old "
        "pod went before the new one was Ready, and for minutes nothing served. No wave "
        "of restarts, only a gap.",
        replicas=1,
        duration="90m",
        seed=219,
    )
    f.series[_key("replicas_updated", {})] = np.full(f.n, 1.0)
    f.set("replicas_updated", "50m", 0.0, until="51m")
    f.set("replicas_ready", "50m", 0.0)
    f.vanish("vllm-0", "50m")
    f.series[_key("timeout_ratio", {})] = np.full(f.n, 0.001)
    f.series[_key("error_ratio", {})] = np.full(f.n, 0.002)
    f.set("error_ratio", "50m", 1.0)
    f.set("timeout_ratio", "50m", 0.4)
    new = {"instance": "vllm-0-7c9f", **dict(k for k in f.keys("build_info")[0][1] if k[0] != "instance")}
    new["engine_version"] = "0.12.0"
    series = np.full(f.n, np.nan)
    series[f.idx("51m") :] = 1.0
    f.series[_key("build_info", new)] = series
    f.write(
        path(f.name),
        "errors",
        at="56m",
        expect={"cause": "rollout_disruption", "forbidden": ["scale_out", "blind_retry_streaming"]},
    )


@incident
def throttled_replica_under_modest_rise() -> None:
    f = Fleet(
        "throttled-replica-under-modest-rise",
        "Arrivals rose by half within minutes as a region failed over, while one "
        "replica's GPU hit its thermal limit: its clocks fell and its TPOT tripled. The "
        "others absorbed the extra load at their usual speed.",
        replicas=6,
        duration="90m",
        seed=220,
    )
    at = "50m"
    hot = f.who(3)
    f.step("request_rate", at, factor=1.45, ramp="2m")
    f.step("prompt_tokens_rate", at, factor=1.45, ramp="2m")
    f.step("generation_tokens_rate", at, factor=1.45, ramp="2m")
    f.step("requests_running", at, factor=1.2, ramp="2m")
    f.set("gpu_throttle", at, 1.0, replicas=hot)
    f.step("gpu_temp_celsius", at, to=91.0, replicas=hot, ramp="3m")
    f.step("gpu_power_watts", at, factor=0.7, replicas=hot, ramp="3m")
    f.step("tpot_p99_seconds", at, factor=3.0, replicas=hot, ramp="3m")
    f.step("tpot_p50_seconds", at, factor=2.6, replicas=hot, ramp="3m")
    f.step("queue_waiting", at, to=5, replicas=hot, ramp="3m")
    f.write(
        path(f.name),
        "tpot_slow",
        at="80m",
        expect={"cause": "gpu_throttling", "forbidden": ["scale_out", "tune_sampling"]},
    )


@incident
def fallback_because_replicas_lost() -> None:
    f = Fleet(
        "fallback-because-replicas-lost",
        "Three of eight primary replicas were lost with their node; the gateway sent what "
        "the rest could not take to the fallback model. Answers got worse because "
        "replicas were missing: name both.",
        replicas=8,
        duration="100m",
        seed=221,
    )
    gone = f.who(1, 4, 6)
    survivors = [n for n in f.names if n not in gone]
    for name in gone:
        f.vanish(name, "55m")
    f.set("replicas_ready", "55m", 5)
    f.step("request_rate", "55m", factor=1.25, replicas=survivors)
    f.step("queue_waiting", "56m", to=8, replicas=survivors, ramp="3m")
    f.step("ttft_p99_seconds", "56m", factor=2.5, replicas=survivors, ramp="3m")
    f.step("fallback_ratio", "56m", to=0.25, ramp="3m")
    f.step("timeout_ratio", "56m", to=0.02, replicas=survivors, ramp="3m")
    f.write(
        path(f.name),
        "quality_down",
        at="90m",
        expect={"cause": "replica_down", "also": ["fallback_active"], "forbidden": ["scale_out"]},
    )


@incident
def prefill_interference_fed_by_surge() -> None:
    f = Fleet(
        "prefill-interference-fed-by-surge",
        "A customer began sending whole contracts as prompts (P95 prompt length tripled); "
        "with chunked prefill off, each long prefill stalled every stream on its replica. "
        "The prefill stall is the mechanism, the surge its source: name both.",
        replicas=6,
        duration="100m",
        seed=222,
    )
    at = "50m"
    f.relabel("config_info", "0m", {"chunked_prefill": "false"})
    f.step("prompt_tokens_p95", at, factor=3.0, ramp="3m")
    f.step("prompt_tokens_rate", at, factor=1.8, ramp="3m")
    f.step("prefill_time_p99_seconds", at, factor=3.0, ramp="3m")
    f.step("tpot_p99_seconds", at, factor=4.0, ramp="3m")
    f.step("ttft_p99_seconds", at, factor=2.0, ramp="3m")
    f.step("kv_usage_ratio", at, to=0.7, ramp="3m")
    f.write(
        path(f.name),
        "tpot_slow",
        at="90m",
        expect={
            "cause": "prefill_interference",
            "also": ["long_prompt_surge"],
            "forbidden": ["scale_out", "tune_sampling"],
        },
    )


@incident
def prompt_tail_steady_under_burst() -> None:
    f = Fleet(
        "prompt-tail-steady-under-burst",
        "A fleet that always serves a few 100k-token documents took a sudden burst of "
        "ordinary requests. The tail was there before and did not move: the burst, not the "
        "long prompts, is why first tokens are late.",
        replicas=6,
        duration="90m",
        seed=223,
    )
    f.set("long_prompt_ratio", "0m", 0.005)
    per_replica(f, "prompt_tokens_max_bucket", 200000.0)
    at = "50m"
    f.step("request_rate", at, factor=2.0, ramp="2m")
    f.step("prompt_tokens_rate", at, factor=2.0, ramp="2m")
    f.step("generation_tokens_rate", at, factor=2.0, ramp="2m")
    f.step("queue_waiting", "51m", to=14, ramp="2m")
    f.step("requests_running", "51m", factor=1.5, ramp="2m")
    f.step("queue_time_p99_seconds", "51m", factor=9, ramp="2m")
    f.step("ttft_p99_seconds", "51m", factor=3.5, ramp="2m")
    f.step("kv_usage_ratio", "51m", to=0.78, ramp="3m")
    f.write(
        path(f.name),
        "ttft_slow",
        at="80m",
        expect={"cause": "traffic_burst", "forbidden": ["scale_out", "tune_sampling"]},
    )
