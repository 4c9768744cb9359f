"""Bundled incidents: request-shape, cache, cost and quality cases.

Long prompts, long outputs, a prefix-cache collapse (and the bill it raises), token
volume against price, and the quality trio (version, fallback, truncation). Each is a
healthy fleet with noise on every series, then what a real incident of that kind moves.
"""

from __future__ import annotations

import numpy as np

from tools.registry import incident, path
from tools.synth import Fleet

# Billing model shared by the cost incidents: the list price per 1k tokens
# (`cost_per_1k_tokens`) applies to generated and uncached prompt tokens; prompt tokens
# served from the prefix cache are billed at 40% of it (internal chargeback of the
# prefill compute they do not need). Spend is in currency per hour.
CACHED_BILLED = 0.4


def _instance_key(signal: str, name: str) -> tuple[str, tuple[tuple[str, str], ...]]:
    return signal, (("instance", name),)


def _replica_sum(f: Fleet, signal: str) -> np.ndarray:
    return np.sum([f.series[_instance_key(signal, name)] for name in f.names], axis=0)


def _add_spend(f: Fleet) -> None:
    """spend_rate from the replicas' token volume, hit ratio and the fleet's price.

    Call after every token, hit-ratio and price series has its shape.
    """
    billed = np.zeros(f.n)
    for name in f.names:
        prompt = f.series[_instance_key("prompt_tokens_rate", name)]
        gen = f.series[_instance_key("generation_tokens_rate", name)]
        hit = f.series[_instance_key("prefix_hit_ratio", name)]
        billed += prompt * (1 - (1 - CACHED_BILLED) * hit) + gen
    price = f.series[("cost_per_1k_tokens", ())]
    f.add_fleet("spend_rate", 0.0)
    f.series[("spend_rate", ())][:] = billed * 3.6 * price  # tokens/s -> 1k tokens/h


def _add_tenants(f: Fleet, signal: str, shares: dict[str, float], grower: str, onset: str) -> None:
    """Per-tenant fleet views of a token-rate signal: each tenant holds its share of the
    pre-onset volume except `grower`, which takes whatever the replicas' sum adds up to."""
    total = _replica_sum(f, signal)
    base = float(total[: f.idx(onset)].mean())
    rest = np.zeros(f.n)
    for tenant, share in shares.items():
        if tenant == grower:
            continue
        values = np.full(f.n, base * share)
        f.series[(signal, (("tenant", tenant),))] = values
        rest += values
    f.series[(signal, (("tenant", grower),))] = total - rest


def _flapping(f: Fleet, at: str, on: float, off: float, p_on: float, base: float) -> np.ndarray:
    """A 5m-window ratio of something that flaps minute by minute from `at`: each minute is
    'on' (ratio `on`) with probability p_on, else `off`; before `at` the ratio is `base`."""
    raw = np.full(f.n, base)
    per_min = max(1, round(60 / f.step_s))
    i0 = f.idx(at)
    for i in range(i0, f.n, per_min):
        raw[i : i + per_min] = on if f.rng.random() < p_on else off
    window = max(1, round(300 / f.step_s))
    smoothed = np.convolve(
        np.concatenate([np.full(window - 1, base), raw]), np.ones(window) / window, "valid"
    )
    return smoothed


@incident
def long_prompt_surge() -> None:
    f = Fleet(
        "long-prompt-surge",
        "A tenant shipped a 'chat with your documents' feature that stuffs retrieved "
        "passages into every prompt: P95 prompt length tripled and the long-context share rose to ~14% "
        "at an unchanged request rate. Prefills got longer, TTFT rose for everyone queued behind them; "
        "KV use rose but has room. The new passages are unique, so the token hit ratio fell too.",
        replicas=6,
        duration="110m",
        interval="15s",
        seed=101,
    )
    at = "58m"
    f.step("prompt_tokens_p95", at, factor=3.2, ramp="4m")
    f.step("long_prompt_ratio", at, to=0.14, ramp="4m")
    f.step("prompt_tokens_rate", at, factor=1.55, ramp="4m")  # mean prompt 1.2k -> ~1.9k tokens
    # cached tokens per request (the shared system prompt) stay, total tokens grow
    f.step("prefix_hit_ratio", at, factor=1 / 1.55, ramp="4m")
    f.step("prefill_time_p99_seconds", at, factor=3.4, ramp="4m")
    f.step("queue_time_p99_seconds", "59m", factor=2.2, ramp="4m")
    f.step("queue_waiting", "59m", to=2.5, ramp="4m")
    f.step("ttft_p99_seconds", "59m", factor=3.0, ramp="4m")
    f.step("ttft_p50_seconds", "59m", factor=1.5, ramp="4m")
    f.step("e2e_p99_seconds", "59m", factor=1.25, ramp="4m")
    f.step("tpot_p99_seconds", "59m", factor=1.15, ramp="4m")  # chunked prefill: decode shares steps
    f.step("kv_usage_ratio", at, to=0.68, ramp="8m")
    f.step("gpu_util_ratio", at, factor=1.15, ramp="4m")
    f.step("gpu_power_watts", at, factor=1.08, ramp="4m")
    f.write(
        path(f.name),
        "ttft_slow",
        at="95m",
        expect={"cause": "long_prompt_surge", "forbidden": ["scale_out", "gateway_prompt_assembly"]},
    )


@incident
def long_output_shift() -> None:
    f = Fleet(
        "long-output-shift",
        "A client release stopped sending max_tokens=512, so the server default "
        "(the full context) applies and its summaries run long: P95 output length doubled at a flat "
        "request rate. Sequences stay in the running batch longer; batch, KV use and TPOT crept up.",
        replicas=8,
        duration="120m",
        interval="15s",
        seed=202,
    )
    at = "62m"
    f.step("output_tokens_p95", at, factor=2.1, ramp="3m")
    f.step("generation_tokens_rate", at, factor=1.55, ramp="6m")
    f.step("truncated_ratio", at, factor=0.4, ramp="3m")  # fewer answers hit the old cap
    # Little's law: ~1.55x the tokens per request at a slower step holds each one ~1.8x longer
    f.ramp("requests_running", "63m", "80m", 1.75)
    f.ramp("kv_usage_ratio", "63m", "82m", 1.42)
    f.ramp("tpot_p99_seconds", "63m", "80m", 1.65)
    f.ramp("tpot_p50_seconds", "63m", "80m", 1.3)
    f.ramp("e2e_p99_seconds", "62m", "75m", 2.3)
    f.ramp("ttft_p99_seconds", "64m", "80m", 1.2)
    f.ramp("queue_waiting", "66m", "82m", 2.0)
    f.step("gpu_util_ratio", "63m", factor=1.1, ramp="10m")
    f.write(
        path(f.name),
        "tpot_slow",
        at="105m",
        expect={"cause": "long_output_shift", "forbidden": ["scale_out"]},
    )


@incident
def prefix_cache_miss() -> None:
    f = Fleet(
        "prefix-cache-miss",
        "An edit to the shared system prompt put the current date and the user's "
        "name on its first line, so no two requests share a prefix any more: the prefix hit ratio fell "
        "from ~0.65 to ~0.15 on every replica at once. Every request now prefills in full; prefill time "
        "and TTFT rose at unchanged prompt length and request rate.",
        replicas=10,
        duration="100m",
        interval="15s",
        seed=303,
    )
    at = "48m"
    f.step("prefix_hit_ratio", at, to=0.15, ramp="1m")
    f.step("prefill_time_p99_seconds", at, factor=2.3, ramp="2m")
    f.step("queue_time_p99_seconds", at, factor=1.8, ramp="3m")
    f.step("queue_waiting", at, to=2.0, ramp="3m")
    f.step("ttft_p99_seconds", at, factor=2.4, ramp="2m")
    f.step("ttft_p50_seconds", at, factor=2.0, ramp="2m")
    f.step("e2e_p99_seconds", at, factor=1.1, ramp="2m")
    f.step("tpot_p99_seconds", at, factor=1.1, ramp="2m")
    f.step("gpu_util_ratio", at, factor=1.17, ramp="2m")
    f.step("gpu_power_watts", at, factor=1.1, ramp="2m")
    f.write(
        path(f.name),
        "ttft_slow",
        at="85m",
        expect={"cause": "prefix_cache_miss", "forbidden": ["scale_out", "force_prefix_cache"]},
    )


@incident
def token_volume_growth() -> None:
    f = Fleet(
        "token-volume-growth",
        "Tenant northwind (about half the traffic) rolled its assistant out to a "
        "second region and doubled its requests over a quarter of an hour. Token volume and spend rose "
        "~50% at the same price per 1k tokens; the fleet had headroom, so latency stayed within SLO.",
        replicas=12,
        duration="130m",
        interval="30s",
        seed=404,
    )
    start, end = "55m", "70m"
    for signal in ("request_rate", "prompt_tokens_rate", "generation_tokens_rate"):
        f.ramp(signal, start, end, 1.5)
    f.ramp("requests_running", start, end, 1.45)
    f.ramp("kv_usage_ratio", start, end, 1.25)
    f.ramp("gpu_util_ratio", start, end, 1.18)
    f.ramp("gpu_power_watts", start, end, 1.1)
    f.ramp("ttft_p99_seconds", start, end, 1.15)
    f.ramp("tpot_p99_seconds", start, end, 1.12)
    f.ramp("queue_waiting", start, end, 1.6)
    shares = {"northwind": 0.5, "acme": 0.3, "globex": 0.2}
    _add_tenants(f, "prompt_tokens_rate", shares, "northwind", start)
    _add_tenants(f, "generation_tokens_rate", shares, "northwind", start)
    _add_spend(f)
    f.write(
        path(f.name),
        "cost_up",
        at="115m",
        expect={"cause": "token_volume_growth", "forbidden": ["scale_out", "tune_sampling"]},
    )


@incident
def price_change() -> None:
    f = Fleet(
        "price-change",
        "A gateway route change sent all traffic to the 'quality' route, served by a "
        "14B model on the same fleet: price per 1k tokens up 1.6x at an unchanged token volume (a few "
        "percent more prompt tokens from the other tokenizer). The bill rose by the same factor.",
        replicas=4,
        duration="90m",
        interval="15s",
        seed=505,
    )
    at = "47m"
    f.relabel(
        "build_info", at, {"model": "qwen2.5-14b-instruct", "model_version": "2026-08", "route": "quality"}
    )
    f.step("cost_per_1k_tokens", at, factor=1.6, ramp="1m")
    f.step("prompt_tokens_rate", at, factor=1.05, ramp="2m")
    f.step("generation_tokens_rate", at, factor=0.96, ramp="2m")
    f.step("output_tokens_p95", at, factor=0.93, ramp="2m")
    f.step("tpot_p99_seconds", at, factor=1.4, ramp="2m")
    f.step("tpot_p50_seconds", at, factor=1.45, ramp="2m")
    f.step("ttft_p99_seconds", at, factor=1.3, ramp="2m")
    f.step("prefill_time_p99_seconds", at, factor=1.5, ramp="2m")
    f.step("kv_usage_ratio", at, to=0.64, ramp="3m")
    f.step("requests_running", at, factor=1.3, ramp="3m")
    f.step("e2e_p99_seconds", at, factor=1.35, ramp="2m")
    f.step("gpu_util_ratio", at, factor=1.15, ramp="2m")
    f.step("gpu_memory_used_ratio", at, to=0.93, ramp="1m")
    _add_spend(f)
    f.write(path(f.name), "cost_up", at="80m", expect={"cause": "price_change", "forbidden": ["scale_out"]})


@incident
def cost_up_prefix_hit_drop() -> None:
    f = Fleet(
        "cost-up-prefix-hit-drop",
        "A router change replaced session-affine (prefix-aware) routing with "
        "round-robin: a conversation's next turn rarely lands on the replica that caches its history, so "
        "the prefix hit ratio fell from ~0.64 to ~0.24 everywhere. Cached prompt tokens are billed at a "
        "discount, so spend rose ~30% at unchanged token volume and list price; prefills got longer.",
        replicas=10,
        duration="120m",
        interval="15s",
        seed=606,
    )
    at = "66m"
    f.step("prefix_hit_ratio", at, to=0.24, ramp="2m")
    f.step("prefill_time_p99_seconds", at, factor=1.9, ramp="2m")
    f.step("ttft_p99_seconds", at, factor=1.7, ramp="2m")
    f.step("ttft_p50_seconds", at, factor=1.6, ramp="2m")
    f.step("queue_time_p99_seconds", at, factor=1.4, ramp="3m")
    f.step("gpu_util_ratio", at, factor=1.14, ramp="2m")
    f.step("gpu_power_watts", at, factor=1.07, ramp="2m")
    _add_spend(f)
    f.write(
        path(f.name),
        "cost_up",
        at="105m",
        expect={"cause": "prefix_cache_miss", "forbidden": ["scale_out", "force_prefix_cache"]},
    )


@incident
def version_change() -> None:
    f = Fleet(
        "version-change",
        "A rolling update moved the fleet to vLLM 0.11.2 with AWQ int4 weights to save "
        "memory. Decode got faster, but answers got worse: longer, repetitive outputs, a few more "
        "cut off at the length limit. Users report quality; nothing is down.",
        replicas=3,
        duration="80m",
        interval="15s",
        seed=707,
    )
    changes = {"engine_version": "0.11.2", "quantization": "awq-int4"}
    for i, when in enumerate(("40m", "43m", "46m")):
        replica = f.who(i)
        f.pulse("restarts", when, 1, width="5m", replicas=replica)
        f.relabel("build_info", when, changes, replicas=replica)
        f.step("output_tokens_p95", when, factor=1.35, ramp="2m", replicas=replica)
        f.step("generation_tokens_rate", when, factor=1.15, ramp="2m", replicas=replica)
        f.step("truncated_ratio", when, to=0.022, ramp="2m", replicas=replica)
        f.step("tpot_p50_seconds", when, factor=0.85, ramp="2m", replicas=replica)
        f.step("tpot_p99_seconds", when, factor=0.9, ramp="2m", replicas=replica)
        f.step("kv_usage_ratio", when, factor=0.85, ramp="2m", replicas=replica)
        f.step("gpu_memory_used_ratio", when, to=0.9, ramp="1m", replicas=replica)
        f.step("e2e_p99_seconds", when, factor=1.15, ramp="2m", replicas=replica)
    f.write(
        path(f.name),
        "quality_down",
        at="70m",
        expect={"cause": "version_change", "forbidden": ["tune_sampling"]},
    )


@incident
def fallback_active() -> None:
    f = Fleet(
        "fallback-active",
        "A flapping load-balancer health check makes the primary route time out "
        "intermittently; the gateway retries those requests on the small fallback model and returns "
        "its answers as normal ones. Fallback serves ~20% of requests; engines look healthy.",
        replicas=16,
        duration="100m",
        interval="15s",
        seed=808,
    )
    at = "52m"
    fallback = _flapping(f, at, on=0.27, off=0.06, p_on=0.65, base=0.002)
    f.series[("fallback_ratio", ())][:] = fallback
    share = fallback / 0.2  # timeouts track the fallbacks they trigger
    for key in f.keys("timeout_ratio"):
        f.series[key][:] = f.series[key] + 0.03 * share
    f.step("request_rate", at, factor=0.88, ramp="3m")  # requests retried elsewhere
    f.step("prompt_tokens_rate", at, factor=0.88, ramp="3m")
    f.step("generation_tokens_rate", at, factor=0.86, ramp="3m")
    f.step("error_ratio", at, to=0.006, ramp="3m")  # client disconnects abort some in flight
    f.write(path(f.name), "quality_down", at="90m", expect={"cause": "fallback_active"})


@incident
def length_truncation() -> None:
    f = Fleet(
        "length-truncation",
        "A gateway config change lowered the default max_tokens from 1024 to 256 "
        "for requests that set none: 12% of answers now stop mid-sentence, P95 output length fell "
        "to the cap, and the fleet got lighter.",
        replicas=5,
        duration="150m",
        interval="30s",
        seed=909,
    )
    at = "75m"
    f.step("truncated_ratio", at, to=0.12, ramp="2m")
    f.step("output_tokens_p95", at, to=256, ramp="2m")
    f.step("generation_tokens_rate", at, factor=0.8, ramp="3m")
    f.step("requests_running", at, factor=0.85, ramp="3m")
    f.step("kv_usage_ratio", at, factor=0.9, ramp="3m")
    f.step("e2e_p99_seconds", at, factor=0.65, ramp="3m")
    f.write(path(f.name), "quality_down", at="130m", expect={"cause": "length_truncation"})


@incident
def auto_long_prompt_surge_large_fleet() -> None:
    f = Fleet(
        "auto-long-prompt-surge-large-fleet",
        "On a 24-replica fleet without GPU metrics, a tenant's "
        "agent framework started sending its whole tool transcript with each call: prompts 3x longer, "
        "long-context share ~20%. TTFT P99 paged (the worst breach); no symptom was given.",
        replicas=24,
        duration="150m",
        interval="30s",
        seed=1010,
        gpu_signals=False,
        omit=("queue_time_p99_seconds", "tpot_p50_seconds", "long_prompt_ratio", "config_info"),
    )
    at = "82m"
    f.step("prompt_tokens_p95", at, factor=3.0, ramp="5m")
    f.step("long_prompt_ratio", at, to=0.2, ramp="5m")
    f.step("prompt_tokens_rate", at, factor=1.8, ramp="5m")
    # transcripts are unique per session and land on any of 24 replicas: only the shared
    # system prompt still hits, so the token hit ratio falls as prompts grow
    f.step("prefix_hit_ratio", at, factor=1 / 1.8, ramp="5m")
    f.step("prefill_time_p99_seconds", at, factor=3.0, ramp="5m")
    f.step("queue_waiting", at, to=3.0, ramp="5m")
    f.step("ttft_p99_seconds", at, factor=2.9, ramp="5m")
    f.step("ttft_p50_seconds", at, factor=1.6, ramp="5m")
    f.step("e2e_p99_seconds", at, factor=1.3, ramp="5m")
    f.step("tpot_p99_seconds", at, factor=1.15, ramp="5m")
    f.step("kv_usage_ratio", at, to=0.72, ramp="8m")
    f.write(
        path(f.name),
        None,
        at="125m",
        alert={
            "labels": {"alertname": "TTFTP99High", "severity": "page"},
            "annotations": {"summary": "TTFT P99 above 1s on the chat fleet"},
        },
        expect={"cause": "long_prompt_surge", "forbidden": ["scale_out", "gateway_prompt_assembly"]},
    )
