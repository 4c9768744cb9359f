"""What every check is and the conclusions several sections share.

A check turns the shared `Facts` into a `Finding` for one checklist item; each section's
module files its checks against their item ids in a `Registry`, so the engine and the
checklist can be held against each other by id.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from triage.audit.checks.facts import Facts
from triage.audit.checks.formatting import listed
from triage.audit.model import ChecklistItem, Finding, Status, verdict
from triage.audit.queries import NODE_LABELS, TARGET_NODE_LABELS

Check = Callable[[Facts, ChecklistItem], Finding]
"""A check reads the shared facts and answers for its item (whose `settle` it may quote)."""


class Registry:
    """One section's checks, by item id: `@CHECKS.check("capacity.x")` files the function below it.

    Items no metric can show are filed too (`not_visible`), so that every item of the
    checklist has exactly one registered answer and the checklist loader can hold the
    two against each other.
    """

    def __init__(self, section: str) -> None:
        self.section = section
        self.table: dict[str, Check] = {}

    def check(self, item_id: str) -> Callable[[Check], Check]:
        if not item_id.startswith(f"{self.section}."):
            raise ValueError(f"{item_id} is not an item of section {self.section}")

        def add(function: Check) -> Check:
            if item_id in self.table:
                raise ValueError(f"two checks for {item_id}")
            self.table[item_id] = function
            return function

        return add

    def not_visible(self, *item_ids: str) -> None:
        """File `not_visible` for items whose evidence lives outside Prometheus (pod specs, reports)."""
        for item_id in item_ids:
            self.check(item_id)(not_visible)


def not_visible(x: Facts, item: ChecklistItem) -> Finding:
    """Unknown, naming what would settle the item: "unknown is not healthy"."""
    return verdict("unknown", f"not visible in metrics; settles it: {item.settle}")


def combine(parts: Sequence[Finding]) -> Finding:
    """Worst first: any fail fails, else any unknown is unknown, else pass (or n/a when all are)."""
    statuses = {p.status for p in parts}
    lines = tuple(line for p in parts for line in p.evidence)
    worst: Status
    for worst in ("fail", "unknown", "pass"):
        if worst in statuses:
            return Finding(worst, lines)
    return Finding("not_applicable", lines)


def alerted(x: Facts, what: str, signals: Sequence[str]) -> Finding:
    """Pass when a live alert reads the signals; fail when none does (dead ones named).

    When rules that could hide such an alert do not parse, "none does" cannot be said:
    the verdict is unknown, naming them.
    """
    if x.rules is None:
        return verdict("unknown", f"{what}: {x.why_no_rules()}")
    live, dead = x.coverage(signals)
    if live:
        return verdict("pass", f"{what} alerted by {listed(live, 3)}")
    if x.rules.hiding:
        unread = listed((f"{u.rule.name} ({u.rule.where})" for u in x.rules.hiding), 3)
        return verdict("unknown", f"{what}: no readable alert reads it, and {unread} could not be parsed")
    if dead:
        return verdict(
            "fail",
            f"{what}: the only alerts on it ({listed(dead, 3)}) read metrics this server does not have",
        )
    records = ", ".join(f"triage:{s}" for s in signals)
    return verdict("fail", f"no alerting rule reads {what} (its metrics or {records})")


def with_unreadable_rules(x: Facts, finding: Finding, doubtful: Status) -> Finding:
    """`finding` with every rule the parser refused named; `doubtful` becomes unknown if they may hide alerts.

    A rule item that concluded without reading every rule must say which it could not
    read (never dropped silently), and a verdict those rules could overturn (no P99 alert
    found, no mean found) is only unknown.
    """
    if x.rules is None or not x.rules.unreadable:
        return finding
    shown = [u.evidence for u in x.rules.unreadable[:3]]
    more = len(x.rules.unreadable) - len(shown)
    if more:
        shown.append(f"{more} more rules do not parse")
    status: Status = "unknown" if finding.status == doubtful and x.rules.hiding else finding.status
    return Finding(status, (*finding.evidence, *shown))


def targets_of(x: Facts, keywords: Sequence[str]) -> list[tuple[str, str, str]]:
    """(name, health, last error) of active targets whose job or pool names one of `keywords`."""
    if x.f.targets is None:
        return []
    out: list[tuple[str, str, str]] = []
    for target in x.f.targets.get("activeTargets") or []:
        if not isinstance(target, dict):
            continue
        labels = target.get("labels") or {}
        pool = str(target.get("scrapePool") or "")
        job = str(labels.get("job") or "")
        if any(k in pool.lower() or k in job.lower() for k in keywords):
            name = target_node(target) or str(labels.get("instance") or target.get("scrapeUrl") or pool)
            out.append((name, str(target.get("health") or "unknown"), str(target.get("lastError") or "")))
    return out


def target_node(target: Mapping[str, Any]) -> str | None:
    labels = target.get("labels") or {}
    for key in NODE_LABELS:
        if labels.get(key):
            return str(labels[key])
    discovered = target.get("discoveredLabels") or {}
    for key in TARGET_NODE_LABELS:
        if discovered.get(key):
            return str(discovered[key])
    return None
