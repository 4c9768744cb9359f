"""Routing and degradation (路由与降级): nothing here is visible in metrics.

Routing rules, fallback adapters and timeouts, how a degraded answer is marked and how
versions roll back together are configuration and process, read in the gateway and the
release pipeline; every item says what would settle it.
"""

from __future__ import annotations

from triage.audit.checks.base import Registry

CHECKS = Registry("routing")
CHECKS.not_visible(
    "routing.explainable_rules",
    "routing.format_adaptation",
    "routing.degradation_visible",
    "routing.fallback_timeouts",
    "routing.versioned_rollback",
)
