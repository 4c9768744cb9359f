"""Routing and degradation (路由与降级): mostly configuration, one part visible in metrics.

Routing rules, fallback adapters and timeouts, how a degraded answer is marked and how
versions roll back together are configuration and process, read in the gateway and the
release pipeline; every such item says what would settle it.

What metrics can show is whether a routing decision can be explained after the fact:
the gateway counts each model's requests per target (the endpoint picker's
`inference_objective_request_total{model_name, target_model_name}`, LiteLLM's
`litellm_deployment_total_requests_total` per deployment, the production-stack router's
per-backend request counts). Without them a share of traffic moved onto the wrong pool
(`misrouting`) cannot be told from a burst of requests, whatever the rules say.
"""

from __future__ import annotations

import numpy as np

from triage.audit.checks.base import Registry
from triage.audit.checks.facts import Facts
from triage.audit.checks.formatting import ratio_text
from triage.audit.model import ChecklistItem, Finding, verdict

CHECKS = Registry("routing")
CHECKS.not_visible(
    "routing.format_adaptation",
    "routing.degradation_visible",
    "routing.fallback_timeouts",
    "routing.versioned_rollback",
)

PER_TARGET: tuple[tuple[str, tuple[str, ...], str], ...] = (
    (
        "the endpoint picker",
        ("inference_objective_request_total", "inference_model_request_total"),
        "requests per model and target (inference_objective_request_total{model_name, target_model_name})",
    ),
    (
        "LiteLLM",
        ("litellm_deployment_total_requests_total",),
        "requests per model group and deployment (litellm_deployment_total_requests_total{model_group, "
        "model_id, api_base})",
    ),
    (
        "the production-stack router",
        ("vllm:request_latency_seconds_count",),
        "requests per backend (vllm:request_latency_seconds_count{server})",
    ),
)
"""Per gateway: the counters of its requests per routing target, and what they count."""
GATEWAY_ONLY: tuple[tuple[str, str], ...] = (
    ("LiteLLM", "litellm_proxy_total_requests_metric_total"),
    ("the production-stack router", "vllm:num_incoming_requests_total"),
)
"""A gateway's own request counter, which names no target: seen without its per-target counter,
its routing decisions cannot be explained from metrics."""
RULES = "the rules themselves and their decision log are the gateway's configuration, not judged from metrics"


def _share_move(x: Facts) -> str:
    """The largest move of a target's share over the window, where the fleet's frame has it."""
    frame = x.frame
    if frame is None or not frame.has("route_share_shift"):
        return ""
    values = frame.fleet("route_share_shift")
    finite = values[np.isfinite(values)]
    if not finite.size:
        return ""
    peak = float(np.max(finite))
    return f"; the largest move of a target's share against the hour before reached {ratio_text(peak)}"


@CHECKS.check("routing.explainable_rules")
def explainable_rules(x: Facts, item: ChecklistItem) -> Finding:
    """Pass when the gateway exports its requests per routing target; fail when a gateway is seen
    that counts its requests but names no target; unknown when no gateway is seen."""
    if x.names is None:
        return verdict("unknown", x.why_no_names())
    exported = [(who, what) for who, metrics, what in PER_TARGET if x.has_metric(*metrics)]
    if exported:
        lines = [f"{who} counts {what}" for who, what in exported]
        lines[-1] += _share_move(x)
        return verdict("pass", *lines, RULES)
    blind = [(who, metric) for who, metric in GATEWAY_ONLY if x.has_metric(metric)]
    if blind:
        who, metric = blind[0]
        return verdict(
            "fail",
            f"{who} counts its requests ({metric}) but no target they were routed to: a share of "
            "traffic moved onto the wrong pool cannot be told from a burst; export the requests per "
            "target (LiteLLM's deployment metrics, litellm_deployment_total_requests_total)",
            RULES,
        )
    counters = ", ".join(m for _, metrics, _ in PER_TARGET for m in metrics[:1])
    return verdict(
        "unknown",
        f"no gateway request counter per target for this fleet ({counters}); settles it: {item.settle}",
    )


__all__ = ["CHECKS", "explainable_rules"]
