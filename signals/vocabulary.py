"""The canonical signal names of VOCABULARY.md, with what each needs to be aggregated.

This is a public contract: names are added, never renamed or dropped. Each signal says
how replicas combine into the fleet's view (a rate sums, a ratio averages, a tail
latency takes the worst replica) and how the several series of one replica combine
(per-GPU series of one instance, per-tenant series of one gateway).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Final, Literal

Aggregation = Literal["sum", "mean", "max", "median"]
Kind = Literal["gauge", "info", "event"]


@dataclass(frozen=True)
class SignalSpec:
    """One vocabulary signal: its unit, layer, kind and aggregation rules."""

    name: str
    unit: str
    layer: str
    meaning: str
    fleet: Aggregation
    kind: Kind = "gauge"
    higher_is_worse: bool = True


def _s(
    name: str,
    unit: str,
    layer: str,
    meaning: str,
    fleet: Aggregation,
    kind: Kind = "gauge",
    higher_is_worse: bool = True,
) -> SignalSpec:
    return SignalSpec(name, unit, layer, meaning, fleet, kind, higher_is_worse)


SIGNALS: Final[dict[str, SignalSpec]] = {
    s.name: s
    for s in [
        _s("ttft_p99_seconds", "s", "user", "time to first token, P99", "max"),
        _s("ttft_p50_seconds", "s", "user", "time to first token, P50", "median"),
        _s("tpot_p99_seconds", "s", "user", "time per output token, P99", "max"),
        _s("tpot_p50_seconds", "s", "user", "time per output token, P50", "median"),
        _s("e2e_p99_seconds", "s", "user", "whole request latency, P99", "max"),
        _s("request_rate", "req/s", "request", "requests arriving", "sum", higher_is_worse=False),
        _s("error_ratio", "ratio", "user", "requests failed (5xx, aborted)", "mean"),
        _s("timeout_ratio", "ratio", "user", "requests that hit a timeout", "mean"),
        _s("rejected_ratio", "ratio", "user", "requests refused by the gateway (429, quota)", "mean"),
        _s("truncated_ratio", "ratio", "user", "requests finished at the length limit", "mean"),
        _s("fallback_ratio", "ratio", "supply", "requests served by a fallback model", "mean"),
        _s("prompt_tokens_p95", "tokens", "request", "prompt length, P95", "median"),
        _s("output_tokens_p95", "tokens", "request", "output length, P95", "median"),
        _s("long_prompt_ratio", "ratio", "request", "requests over the long-context threshold", "mean"),
        _s("queue_waiting", "requests", "engine", "waiting in the engine's queue", "sum"),
        _s("requests_running", "requests", "engine", "in the running batch", "sum"),
        _s("queue_time_p99_seconds", "s", "engine", "time waiting before prefill, P99", "max"),
        _s("prefill_time_p99_seconds", "s", "engine", "time in prefill, P99", "max"),
        _s(
            "prefix_hit_ratio",
            "ratio",
            "engine",
            "prefix-cache hits over queries",
            "mean",
            higher_is_worse=False,
        ),
        _s("prompt_tokens_rate", "tokens/s", "request", "prompt token volume", "sum"),
        _s("generation_tokens_rate", "tokens/s", "request", "generated token volume", "sum"),
        _s("kv_usage_ratio", "ratio", "resource", "KV-cache blocks in use", "mean"),
        _s("preemption_rate", "1/s", "resource", "sequences preempted", "sum"),
        _s("gpu_memory_used_ratio", "ratio", "resource", "framebuffer used", "mean"),
        _s("gpu_util_ratio", "ratio", "resource", "GPU busy", "mean"),
        _s("gpu_temp_celsius", "°C", "resource", "GPU temperature", "max"),
        _s("gpu_power_watts", "W", "resource", "GPU power draw", "max"),
        _s(
            "gpu_throttle",
            "0/1",
            "resource",
            "clocks held down by a thermal or power limit",
            "max",
            kind="event",
        ),
        _s("gpu_xid", "code", "resource", "last XID error code, 0 when none", "max", kind="event"),
        _s("gpu_ecc_errors", "count", "resource", "double-bit ECC errors in the window", "sum", kind="event"),
        _s(
            "gpu_nvlink_errors",
            "1/s",
            "resource",
            "NVLink CRC, replay and recovery errors per second",
            "sum",
            kind="event",
        ),
        _s("gpu_pcie_replays", "1/s", "resource", "PCIe link replays per second", "sum", kind="event"),
        _s(
            "kv_transfer_failures",
            "1/s",
            "resource",
            "disaggregated prefill/decode: requests whose KV transfer failed, per second",
            "sum",
            kind="event",
        ),
        _s("kv_transfer_queue", "requests", "resource", "requests waiting for their KV to arrive", "sum"),
        _s("kv_transfer_p99_seconds", "s", "resource", "KV transfer time, P99", "max"),
        _s("replicas_ready", "replicas", "supply", "serving replicas ready", "sum", higher_is_worse=False),
        _s("replicas_desired", "replicas", "supply", "serving replicas wanted", "sum", higher_is_worse=False),
        _s("restarts", "count", "supply", "container restarts in the window", "sum", kind="event"),
        _s("oom_killed", "0/1", "supply", "last termination was an OOM kill", "max", kind="event"),
        _s("cost_per_1k_tokens", "currency", "supply", "price paid per 1k tokens", "mean"),
        _s("spend_rate", "currency/h", "supply", "spend", "sum"),
        _s("build_info", "1", "supply", "model, engine, quantization and route versions", "max", kind="info"),
        _s("config_info", "1", "engine", "engine configuration", "max", kind="info"),
        _s("gateway_latency_p99_seconds", "s", "supply", "latency at the gateway or router, P99", "max"),
        _s("gateway_queue", "requests", "supply", "held in the gateway or router before an engine", "sum"),
        _s("gateway_inflight", "requests", "supply", "in flight as the gateway or router counts them", "sum"),
        _s(
            "upstream_error_ratio",
            "ratio",
            "supply",
            "requests the edge failed to get from a backend",
            "mean",
        ),
        _s(
            "backends_routed",
            "backends",
            "supply",
            "backends the router sends to",
            "sum",
            higher_is_worse=False,
        ),
        _s(
            "probe_failures",
            "count",
            "supply",
            "failed liveness or readiness probes in the window",
            "sum",
            kind="event",
        ),
        _s(
            "terminated_error",
            "0/1",
            "supply",
            "last termination ended in an error (reason Error), not an OOM kill",
            "max",
            kind="event",
        ),
        _s(
            "exit_code",
            "code",
            "supply",
            "exit code of the last terminated engine container",
            "max",
            kind="event",
        ),
        _s(
            "replicas_updated",
            "replicas",
            "supply",
            "replicas already on the workload's current template (a rollout's progress)",
            "sum",
            higher_is_worse=False,
        ),
        _s(
            "prompt_tokens_max_bucket",
            "tokens",
            "request",
            "upper edge of the highest prompt-length bucket with arrivals in the window",
            "max",
        ),
        _s(
            "list_price_per_1k_tokens",
            "currency",
            "supply",
            "list price per 1k tokens, where a price table is exported",
            "mean",
        ),
        _s(
            "spec_decode_acceptance_ratio",
            "ratio",
            "engine",
            "speculative draft tokens accepted over draft tokens proposed",
            "mean",
            higher_is_worse=False,
        ),
        _s(
            "engine_asleep",
            "0/1",
            "supply",
            "the engine was put to sleep (weights offloaded or discarded), not dead",
            "max",
            kind="event",
        ),
        _s(
            "replicas_stalled",
            "replicas",
            "engine",
            "replicas with requests running all window and no token generated in it",
            "sum",
            kind="event",
        ),
        _s(
            "queue_deferred",
            "requests",
            "engine",
            "waiting requests held back by admission (deferred), not waiting for capacity",
            "sum",
        ),
        _s(
            "route_share_shift",
            "ratio",
            "supply",
            "largest move of any routing target's share of a model's requests against the hour "
            "that ended 30 minutes earlier",
            "max",
        ),
    ]
}

EXPORTERS: Final[dict[str, tuple[str, ...]]] = {
    "engine": (
        "ttft_p99_seconds",
        "ttft_p50_seconds",
        "tpot_p99_seconds",
        "tpot_p50_seconds",
        "e2e_p99_seconds",
        "request_rate",
        "error_ratio",
        "truncated_ratio",
        "prompt_tokens_p95",
        "output_tokens_p95",
        "long_prompt_ratio",
        "prompt_tokens_max_bucket",
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
        "spec_decode_acceptance_ratio",
        "engine_asleep",
        "kv_transfer_failures",
        "kv_transfer_queue",
        "kv_transfer_p99_seconds",
        "replicas_stalled",
        "queue_deferred",
    ),
    "gpu exporter (DCGM)": (
        "gpu_memory_used_ratio",
        "gpu_util_ratio",
        "gpu_temp_celsius",
        "gpu_power_watts",
        "gpu_throttle",
        "gpu_xid",
        "gpu_ecc_errors",
        "gpu_nvlink_errors",
        "gpu_pcie_replays",
    ),
    "kube-state-metrics": (
        "replicas_ready",
        "replicas_desired",
        "replicas_updated",
        "restarts",
        "oom_killed",
        "terminated_error",
        "exit_code",
    ),
    "kubelet prober": ("probe_failures",),
    "gateway": (
        "gateway_latency_p99_seconds",
        "gateway_queue",
        "gateway_inflight",
        "upstream_error_ratio",
        "backends_routed",
        "rejected_ratio",
        "timeout_ratio",
        "fallback_ratio",
        "route_share_shift",
    ),
    "billing": ("cost_per_1k_tokens", "spend_rate", "list_price_per_1k_tokens"),
}
"""Which exporter usually serves each signal: a fleet that runs none of an exporter's signals
does not monitor that part at all ("not monitored: gateway"), which is said apart from a
single signal that is blind."""

EXPORTER_OF: Final[dict[str, str]] = {s: e for e, names in EXPORTERS.items() for s in names}

REPLICA_LABEL: Final = "instance"
DEFAULT_FLEET_LABELS: tuple[str, ...] = ("namespace", "model_name")
"""The engine labels that name a fleet unless told otherwise (`--fleet-labels`)."""

DEFAULT_MAX_SERIES: Final = 2000
"""Series kept per range query by default (a histogram's buckets count once): see
`signals.prometheus.replies`. Here, where the command-line options can read it cheaply."""


def suggest(name: str, choices: Iterable[str] | None = None) -> str:
    """A ' (did you mean X?)' hint for a misspelt name among `choices` (the signals by default), or ''.

    The one hint every loader and flag uses, so a misspelt signal, cause, preset or
    symptom is answered the same way wherever it was typed.
    """
    import difflib

    pool = sorted(choices) if choices is not None else sorted(SIGNALS)
    close = difflib.get_close_matches(name, pool, n=1, cutoff=0.6)
    return f" (did you mean {close[0]}?)" if close else ""
