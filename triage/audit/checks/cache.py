"""Cache and parallelism (缓存与并行): whether the prefix cache is watched.

Only the prefix cache's monitoring shows in metrics; prompt layout, prefix-aware routing,
tenant isolation and the parallelism layout are configuration and load-test reports.
The hit-ratio helpers live here because the prefix-cache red line reuses them.
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np

from triage.audit.checks.base import Registry, alerted, combine
from triage.audit.checks.facts import Facts, finite_values
from triage.audit.checks.formatting import as_bool
from triage.audit.model import ChecklistItem, Finding, verdict

CHECKS = Registry("cache")
CHECKS.not_visible(
    "cache.stable_prefix_first",
    "cache.prefix_affinity",
    "cache.tenant_isolation",
    "cache.parallelism_order",
    "cache.tp_fast_interconnect",
    "cache.topology_compared",
)


def prefix_caching_states(x: Facts) -> tuple[dict[str, bool], str | None]:
    states = {
        r: b for r, t in x.config_values("enable_prefix_caching").items() if (b := as_bool(t)) is not None
    }
    if states:
        return states, None
    if x.has_metric("sglang:cache_hit_rate"):
        return {}, "sglang"
    return {}, None


def hit_ratios(x: Facts, replicas: Iterable[str]) -> dict[str, float]:
    if x.frame is None or not x.frame.has("prefix_hit_ratio"):
        return {}
    view = x.frame.replicas("prefix_hit_ratio")
    wanted = set(replicas)
    out: dict[str, float] = {}
    for name, row in zip(view.replicas, view.values, strict=True):
        values = finite_values(row)
        if (name in wanted or "fleet" in wanted) and len(values):
            out[name] = float(np.median(values))
    if not out and "fleet" in wanted:
        values = finite_values(x.frame.fleet("prefix_hit_ratio"))
        if len(values):
            out["fleet"] = float(np.median(values))
    return out


@CHECKS.check("cache.prefix_monitoring")
def _check_prefix_monitoring(x: Facts, item: ChecklistItem) -> Finding:
    if x.names is None:
        return verdict("unknown", x.why_no_names())
    states, _ = prefix_caching_states(x)
    if states and not any(states.values()):
        return verdict("not_applicable", f"prefix caching is off on all {len(states)} replicas")
    parts: list[Finding] = []
    collected = x.has_metric(*x.metrics_of("prefix_hit_ratio"))
    if not states and not collected:
        return verdict("unknown", "neither the prefix caching state nor a prefix-cache hit metric is exposed")
    if collected:
        parts.append(verdict("pass", "prefix-cache hits and queries are collected"))
    else:
        parts.append(
            verdict(
                "fail", "no prefix-cache hit metric (vllm:prefix_cache_hits_total / sglang:cache_hit_rate)"
            )
        )
    evictions = [
        n
        for n in ("vllm:kv_block_idle_before_evict_seconds_bucket", "sglang:kv_evictable_tokens")
        if n in x.names
    ]
    parts.append(
        verdict(
            "pass",
            f"evictions: {', '.join(evictions)}"
            if evictions
            else "evictions are not exported (vLLM needs --kv-cache-metrics); the hit ratio shows "
            "their effect",
        )
    )
    parts.append(alerted(x, "the prefix hit ratio", ("prefix_hit_ratio",)))
    return combine(parts)
