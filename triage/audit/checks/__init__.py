"""The checks, one module per section of the checklist, gathered by item id.

Each section module files its checks in its own `CHECKS` table; this one merges them
and refuses an item id claimed by two modules, so a check can only ever answer for one item.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

from triage.audit.checks import cache, capacity, deployment, nodes, observability, red_lines, scheduling
from triage.audit.checks.base import Check


def _merged(*tables: Mapping[str, Check]) -> dict[str, Check]:
    out: dict[str, Check] = {}
    for table in tables:
        for item_id, check in table.items():
            if item_id in out:
                raise ValueError(f"two checks for {item_id}")
            out[item_id] = check
    return out


CHECKS: Final[Mapping[str, Check]] = _merged(
    capacity.CHECKS,
    scheduling.CHECKS,
    cache.CHECKS,
    deployment.CHECKS,
    nodes.CHECKS,
    observability.CHECKS,
    red_lines.CHECKS,
)

__all__ = ["CHECKS", "Check"]
