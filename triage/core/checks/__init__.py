"""Check kinds: how one playbook check reads the frame and what it concludes.

Every kind returns an `Evidence`: the value now, its baseline, whether the check holds
(True, False, or None when the signal gives no answer; unknown is never healthy), a
margin in [0, 1] saying how decisively it holds, and whether it is a *departure* (a
change against the baseline or a new event) rather than a state. A cause is only
ranked on departures: a fleet that has always run hot has no incident.

The kinds are grouped by family, one module each: `baseline` (a signal now against its
own past: rise, drop, steady, above, below, sudden, gradual), `events` (new events and
label changes: event, change, label_is, wave) and `replicas` (replicas against their
peers and the fleet's count: outlier, broad, shortfall, replicas_lost). `context` holds
what every check reads and the helpers they share; this module registers the kinds and
evaluates a check.

Adding a kind: write its function in its family's module, register it in `KINDS`,
declare its parameters in `triage.core.playbook.CHECK_PARAMS`, and test it on synthetic
frames.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

from triage.core.checks.baseline import check_above_below, check_rise_drop, check_shape, check_steady
from triage.core.checks.context import Context
from triage.core.checks.events import check_change, check_event, check_label_is, check_symptom_is, check_wave
from triage.core.checks.replicas import check_broad, check_outlier, check_replicas_lost, check_shortfall
from triage.core.model import Evidence
from triage.core.playbook import AnyOf, CheckSpec

KINDS: dict[str, Callable[[Context, CheckSpec], Evidence]] = {
    "rise": check_rise_drop,
    "drop": check_rise_drop,
    "above": check_above_below,
    "below": check_above_below,
    "event": check_event,
    "change": check_change,
    "label_is": check_label_is,
    "outlier": check_outlier,
    "broad": check_broad,
    "sudden": check_shape,
    "gradual": check_shape,
    "shortfall": check_shortfall,
    "replicas_lost": check_replicas_lost,
    "wave": check_wave,
    "steady": check_steady,
    "symptom_is": check_symptom_is,
}


def evaluate(ctx: Context, check: CheckSpec) -> Evidence:
    """Evaluate one check (cached per context: causes share checks)."""
    cached = ctx._results.get(check)
    if cached is None:
        cached = KINDS[check.kind](ctx, check)
        if check.not_:
            cached = _negated(cached)
        if check.note and cached.holds:
            cached = replace(cached, note=f"{cached.note}; {check.note}" if cached.note else check.note)
        ctx._results[check] = cached
    return cached


def _negated(result: Evidence) -> Evidence:
    """A `not` check: holds when the check fails, unknown when it is; an absence is no departure."""
    holds = None if result.holds is None else not result.holds
    return replace(
        result,
        check=f"no {result.check}" if not result.check.startswith("no ") else result.check[3:],
        holds=holds,
        departure=False,
        margin=1.0 if holds else 0.0,
        replicas=(),
        live=True,
    )


def evaluate_entry(ctx: Context, entry: CheckSpec | AnyOf) -> Evidence:
    """A check, or an `any` group folded into one piece of evidence (the best member)."""
    if isinstance(entry, CheckSpec):
        return evaluate(ctx, entry)
    results = [evaluate(ctx, member) for member in entry.any]
    holding = [r for r in results if r.holds]
    text = " or ".join(r.check for r in results)
    if holding:
        best = max(holding, key=lambda r: (r.live, r.margin, r.departure))
        return replace(best, check=text, departure=any(r.departure for r in holding))
    if all(r.holds is False for r in results):
        return replace(results[0], check=text, holds=False, note="; ".join(r.note for r in results if r.note))
    unknown = next(r for r in results if r.holds is None)
    return replace(unknown, check=text, holds=None, note="; ".join(r.note for r in results if r.note))


__all__ = ["KINDS", "Context", "evaluate", "evaluate_entry"]
