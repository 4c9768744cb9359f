"""Capacity and memory (容量与显存): memory headroom, its monitoring, KV capacity against requests.

What metrics show here is the engine's own configuration (vLLM's cache_config_info) and
what it carries: KV capacity, request lengths, preemptions. The written memory budget
and the per-token KV arithmetic are documents, so those items name what settles them.
Request lengths and the KV fit live here because the scheduling checks reuse them.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

import numpy as np

from signals.timeparse import format_duration
from triage.audit.checks.base import Registry, alerted, combine, targets_of
from triage.audit.checks.facts import Facts, finite_values
from triage.audit.checks.formatting import as_float, num, ratio_text
from triage.audit.histograms import bucket_quantile, buckets_of, share_above
from triage.audit.model import ChecklistItem, Finding, verdict

CHECKS = Registry("capacity")
CHECKS.not_visible(
    "capacity.memory_budget",
    "capacity.kv_per_token",
)


def gpu_memory_utilization(x: Facts) -> Finding:
    values = {
        r: v for r, t in x.config_values("gpu_memory_utilization").items() if (v := as_float(t)) is not None
    }
    if not values:
        return verdict("unknown", f"gpu_memory_utilization unknown: {x.why_no_config()}")
    limit = x.s.gpu_memory_utilization_max
    over = {r: v for r, v in values.items() if v > limit}
    if over:
        shown = ", ".join(f"{r} {v:g}" for r, v in sorted(over.items())[:6])
        return verdict(
            "fail",
            f"gpu_memory_utilization above {limit:g} on {len(over)} of {len(values)} replicas: {shown}",
            "no headroom is left for activation peaks, CUDA graphs or fragmentation; if a load test at this "
            "value passed, record it with the deployment",
        )
    distinct = sorted(set(values.values()))
    return verdict(
        "pass",
        f"gpu_memory_utilization {', '.join(f'{v:g}' for v in distinct)} on {len(values)} replicas "
        f"(at most {limit:g}), from vllm:cache_config_info",
    )


@CHECKS.check("capacity.gpu_memory_headroom")
def _check_gpu_memory_headroom(x: Facts, item: ChecklistItem) -> Finding:
    found = gpu_memory_utilization(x)
    if x.frame_has("gpu_memory_used_ratio") and x.frame is not None:
        peak = finite_values(x.frame.across_replicas("gpu_memory_used_ratio", "max"))
        if len(peak):
            return Finding(
                found.status,
                (*found.evidence, f"framebuffer used peaks at {ratio_text(float(peak.max()))} (DCGM)"),
            )
    return found


@CHECKS.check("capacity.memory_monitoring")
def _check_memory_monitoring(x: Facts, item: ChecklistItem) -> Finding:
    """Metrics for each of the four (KV use stands in for the memory peak: vLLM pre-allocates), and alerts.

    OOM kills are only visible through kube-state-metrics, so its presence is checked here.
    """
    if x.names is None:
        return verdict("unknown", x.why_no_names())
    parts: list[Finding] = []
    kv = x.has_metric(*x.metrics_of("kv_usage_ratio"))
    preempt = x.has_metric(*x.metrics_of("preemption_rate"))
    fb = x.has_metric("DCGM_FI_DEV_FB_USED")
    engine = [what for what, ok in (("KV use / free blocks", kv), ("preemptions", preempt)) if not ok]
    if engine:
        parts.append(verdict("fail", f"not collected from the engines: {', '.join(engine)}"))
    else:
        peak = "framebuffer from DCGM" if fb else "memory peak read from KV use (no DCGM framebuffer)"
        parts.append(verdict("pass", f"KV use and preemptions are collected; {peak}"))
    status = ("kube_pod_container_status_last_terminated_reason", "kube_pod_container_status_restarts_total")
    if not x.has_prefix("kube_"):
        parts.append(
            verdict(
                "fail", "kube-state-metrics is not scraped: OOM kills and replica readiness are invisible"
            )
        )
    elif not x.has_metric(*status):
        parts.append(
            verdict("fail", "kube-state-metrics has no container status series: OOM kills are invisible")
        )
    else:
        parts.append(verdict("pass", "OOM kills visible through kube-state-metrics"))
    parts.extend(_ksm_targets(x))
    parts.append(alerted(x, "KV use", ("kv_usage_ratio",)))
    parts.append(alerted(x, "preemptions", ("preemption_rate",)))
    return combine(parts)


def _ksm_targets(x: Facts) -> list[Finding]:
    down = [t for t in targets_of(x, ("kube-state-metrics", "kube_state_metrics")) if t[1] != "up"]
    if down:
        return [
            verdict(
                "fail", "kube-state-metrics target down: " + "; ".join(f"{n} ({e})" for n, _, e in down[:3])
            )
        ]
    return []


def kv_fit(x: Facts) -> tuple[dict[str, float], float | None, float | None, str] | Finding:
    """KV capacity per replica and tokens per request at P95 lengths, or why they are unknown."""
    kv = x.kv_tokens()
    if not kv:
        return verdict(
            "unknown",
            "KV capacity unknown (num_gpu_blocks x block_size, or sglang:max_total_num_tokens): "
            + x.why_no_config(),
        )
    prompt, where = x.lengths("prompt_buckets", "prompt_tokens_p95")
    output, _ = x.lengths("output_buckets", "output_tokens_p95")
    return kv, prompt, output, where


def kv_text(kv: Mapping[str, float]) -> str:
    low, high = min(kv.values()), max(kv.values())
    size = num(low) if low == high else f"{num(low)} to {num(high)}"
    return f"KV capacity {size} tokens per replica"


@CHECKS.check("capacity.concurrency_estimate")
def _concurrency(x: Facts, item: ChecklistItem) -> Finding:
    fit = kv_fit(x)
    if isinstance(fit, Finding):
        return verdict("unknown", *fit.evidence, f"settles it: {item.settle}")
    kv, prompt, output, where = fit
    if prompt is None or output is None:
        return verdict("unknown", kv_text(kv), f"settles it: {item.settle}")
    fits = min(kv.values()) / (prompt + output)
    return verdict(
        "unknown",
        f"from metrics: {kv_text(kv)} / ({num(prompt)} + {num(output)}) tokens at P95 {where} = about "
        f"{num(math.floor(fits))} concurrent requests per replica",
        f"settles it: {item.settle}",
    )


def long_prompts(x: Facts) -> tuple[bool | None, str]:
    """Whether long prompts are common, and the evidence; None when lengths are unknown."""
    threshold = x.s.long_prompt_tokens
    buckets = buckets_of(x.instant("prompt_buckets"))
    share = share_above(threshold, buckets)
    p95 = bucket_quantile(0.95, buckets)
    if share is not None and p95 is not None:
        common = share >= x.s.long_prompt_share
        return common, (
            f"{share:.1%} of prompts over {num(threshold)} tokens (P95 {num(p95)}) in the last "
            f"{format_duration(x.f.lookback)}"
        )
    if x.frame is not None and x.frame.has("long_prompt_ratio"):
        values = finite_values(x.frame.fleet("long_prompt_ratio"))
        if len(values):
            ratio = float(np.median(values))
            return ratio >= x.s.long_prompt_share, f"long-prompt ratio {ratio:.1%} (median over the window)"
    if x.frame is not None and x.frame.has("prompt_tokens_p95"):
        values = finite_values(x.frame.fleet("prompt_tokens_p95"))
        if len(values):
            p95 = float(np.median(values))
            return p95 >= threshold, f"prompt P95 {num(p95)} tokens (median over the window)"
    return None, "prompt lengths unknown (no prompt-token histogram)"


@CHECKS.check("capacity.long_context_pool")
def _check_long_context_pool(x: Facts, item: ChecklistItem) -> Finding:
    common, evidence = long_prompts(x)
    return verdict("unknown", evidence if common is not None else "", f"settles it: {item.settle}")


@CHECKS.check("capacity.gqa_quant_kv")
def _check_gqa(x: Facts, item: ChecklistItem) -> Finding:
    dtypes = sorted(set(x.config_values("cache_dtype", "kv_cache_dtype").values()))
    seen = f"KV cache dtype: {', '.join(dtypes)}" if dtypes else ""
    return verdict("unknown", seen, f"settles it: {item.settle}")
