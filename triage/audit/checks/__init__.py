"""The checks, one module per section of the checklist, gathered by item id.

Each section module files its checks in its own `Registry`; this one merges them and
refuses an item id claimed by two modules, so a check can only ever answer for one
item. `triage.audit.checklist` holds the result against `checklist.yaml`, both ways.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

from triage.audit.checks import (
    cache,
    capacity,
    deployment,
    nodes,
    observability,
    quantization,
    red_lines,
    routing,
    scheduling,
)
from triage.audit.checks.base import Check, Registry


def _merged(*registries: Registry) -> dict[str, Check]:
    out: dict[str, Check] = {}
    for registry in registries:
        for item_id, check in registry.table.items():
            if item_id in out:
                raise ValueError(f"two checks for {item_id}")
            out[item_id] = check
    return out


CHECKS: Final[Mapping[str, Check]] = _merged(
    capacity.CHECKS,
    scheduling.CHECKS,
    cache.CHECKS,
    quantization.CHECKS,
    deployment.CHECKS,
    nodes.CHECKS,
    routing.CHECKS,
    observability.CHECKS,
    red_lines.CHECKS,
)

__all__ = ["CHECKS", "Check"]
