"""One tenant is not the fleet: the fleet's view with each tenant's own rhythm taken out.

Where a signal's fleet series carry a `tenant` label (a key, team or route, as the gateway
names it), the fleet's view is their sum (or mean), and one tenant's periodic bursts, its
nightly batch or its retries, move that sum as much as a fleet-wide burst would. So each
tenant is read against its own history first: a tenant whose recent values stay inside the
range it has always shown is background, and stands in the fleet's view at its usual level;
a tenant that left its own range (a new burst, a stop) keeps its values, and the fleet's
view moves with it alone. Everything after `at` is ignored, so a replay reads only what was
known then.
"""

from __future__ import annotations

import numpy as np

from signals.frame import FloatArray, Series, SignalFrame
from signals.timeparse import parse_duration
from triage.core.playbook import Settings

TENANT_LABELS = ("tenant", "team", "api_key", "key_alias", "user")
MIN_HISTORY = 1800.0
"""Seconds of a tenant's own history needed before its rhythm is trusted as background."""
INSIDE = 0.9
"""Share of a tenant's recent samples that must lie inside its own past range."""


def _tenant(labels: dict[str, str]) -> bool:
    return "instance" not in labels and any(k in labels for k in TENANT_LABELS)


def tenants_settled(frame: SignalFrame, at: float, settings: Settings) -> SignalFrame:
    """The frame with every tenant series that stays inside its own past range held at its
    usual level up to `at`; the frame itself when no series carries a tenant."""
    held = frame.memo.get("tenants")
    if held is None:
        held = frame.memo["tenants"] = any(_tenant(s.label_map) for s in frame.series)
    if not held:
        return frame
    w = settings.windows
    recent_from = at - parse_duration(w.recent) - parse_duration(w.lead)
    times = frame.times
    history = (times >= at - parse_duration(w.lookback)) & (times < recent_from)
    recent = (times >= recent_from) & (times <= at)
    if history.sum() * frame.step < MIN_HISTORY:
        return frame
    series = [
        Series(s.signal, s.labels, _settled(s.values, history, recent)) if _tenant(s.label_map) else s
        for s in frame.series
    ]
    return SignalFrame(frame.times, series, frame.source)


def _settled(values: FloatArray, history: np.ndarray, recent: np.ndarray) -> FloatArray:
    """A tenant inside its own past range stands at its usual level; one that left it keeps its values."""
    past = values[history]
    past = past[np.isfinite(past)]
    now = values[recent]
    now = now[np.isfinite(now)]
    if past.size < 8 or now.size == 0:
        return values
    low, high = np.quantile(past, [0.01, 0.99])
    spread = max(float(high - low), 1e-9)
    inside = (now >= low - 0.2 * spread) & (now <= high + 0.2 * spread)
    usual = float(np.median(past))
    level_kept = abs(float(np.median(now)) - usual) <= 0.3 * max(abs(usual), 1e-9) + 0.2 * spread
    if inside.mean() < INSIDE or not level_kept:
        return values
    return np.where(np.isfinite(values), usual, np.nan)
