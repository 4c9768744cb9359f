"""Observability and cost (观测与成本): phase timing, per-tenant cost, the four rates.

Whether the engine times queue, prefill and decode apart, whether a gateway meters
tokens and spend per tenant (`triage.audit.checks.gateway`) and which of the four rates
the metrics can give; the dashboards, traces and load-test plans themselves are not
visible from Prometheus.
"""

from __future__ import annotations

from signals.catalog import resolve
from triage.audit.checks.base import Registry, alerted, combine
from triage.audit.checks.facts import Facts
from triage.audit.checks.gateway import tenant_cost
from triage.audit.model import ChecklistItem, Finding, verdict

CHECKS = Registry("observability")
CHECKS.check("observability.tenant_cost")(tenant_cost)
CHECKS.not_visible(
    "observability.request_traceability",
    "observability.load_test_coverage",
)


@CHECKS.check("observability.phase_timing")
def _check_phase_timing(x: Facts, item: ChecklistItem) -> Finding:
    if x.names is None:
        return verdict("unknown", x.why_no_names())
    phases = {
        "queue": ("vllm:request_queue_time_seconds_bucket", "sglang:queue_time_seconds_bucket"),
        "prefill": (
            "vllm:request_prefill_time_seconds_bucket",
            "sglang:per_stage_req_latency_seconds_bucket",
        ),
        "decode": ("vllm:request_decode_time_seconds_bucket", "sglang:per_stage_req_latency_seconds_bucket"),
    }
    if x.engine() is None:
        return verdict(
            "unknown",
            "no engine metrics (vLLM, SGLang, TGI, TensorRT-LLM, Triton): "
            "the engine's phase histograms settle it",
        )
    missing = [phase for phase, names in phases.items() if not x.has_metric(*names)]
    parts = [
        verdict("fail", f"not timed apart: {', '.join(missing)}")
        if missing
        else verdict("pass", "queue, prefill and decode times are recorded as histograms")
    ]
    parts.append(alerted(x, "the queue", ("queue_waiting", "queue_time_p99_seconds")))
    return combine(parts)


@CHECKS.check("observability.rate_dashboards")
def _check_rate_dashboards(x: Facts, item: ChecklistItem) -> Finding:
    if x.names is None:
        return verdict("unknown", x.why_no_names(), f"settles it: {item.settle}")
    resolved = resolve(x.catalog, set(x.names))
    rates = {
        "success/error": "error_ratio",
        "timeout": "timeout_ratio",
        "rate-limit": "rejected_ratio",
        "fallback": "fallback_ratio",
    }
    have = [what for what, signal in rates.items() if not resolved[signal].blind]
    lack = [what for what, signal in rates.items() if resolved[signal].blind]
    return verdict(
        "unknown",
        f"computable from metrics: {', '.join(have) or 'none'}"
        + (f"; not computable: {', '.join(lack)}" if lack else ""),
        "dashboards are not visible from Prometheus",
    )
