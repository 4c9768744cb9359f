"""What every check reads (the frame, the windows, shared caches) and the helpers all kinds use.

Shared by every family of check kinds, so it sits apart from any of them. Names with a
leading underscore are private to the checks package.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np

from signals.frame import FloatArray, SignalFrame
from signals.timeparse import parse_duration
from triage.core.model import Evidence
from triage.core.playbook import CheckSpec
from triage.core.windows import Windows

FALSE_VALUES = ("false", "0", "off", "no", "disabled", "none")


@dataclass
class Context:
    """What every check reads: the frame, the windows, and caches shared across checks."""

    frame: SignalFrame
    windows: Windows
    floors: Mapping[str, float] = field(default_factory=dict)
    """Per signal, the smallest absolute change that is a departure (settings `floors`)."""
    symptom: str = ""
    """The symptom diagnosed: what a cause's evidence must fit (`symptom_is`)."""
    _views: dict[tuple[str, str], FloatArray] = field(default_factory=dict)
    _results: dict[CheckSpec, Evidence] = field(default_factory=dict)
    medians: dict[tuple[str, tuple[float, float]], tuple[tuple[str, ...], FloatArray]] = field(
        default_factory=dict
    )
    """Each replica's median of a signal over a window, shared by the checks that compare them."""

    def view(self, signal: str, view: str | None, times: str | None = None) -> FloatArray:
        key = (signal, view or "fleet") if times is None else (f"{signal}*{times}", view or "fleet")
        cached = self._views.get(key)
        if cached is not None:
            return cached
        if times is not None:
            values = self.view(signal, view) * self.view(times, view)
        elif view == "max_replica":
            values = self.frame.across_replicas(signal, "max")
        elif view == "median_replica":
            values = self.frame.across_replicas(signal, "median")
        else:
            values = self.frame.fleet(signal)
        self._views[key] = values
        return values

    def floor(self, check: CheckSpec) -> float:
        """The absolute change a check on this signal needs: its own `min_delta` or the
        signal's floor, whichever is larger."""
        own = check.min_delta or 0.0
        if check.times is not None:
            return own  # a product has no floor of its own unit
        return max(own, self.floors.get(check.signal or "", 0.0))

    def since_onset(self, within: str) -> tuple[float, float]:
        """From `within` before the onset (the recent window's start when no onset was found)
        to the moment diagnosed: where a `within` check looks for what happened."""
        anchor = self.windows.onset if self.windows.onset is not None else self.windows.recent[0]
        return max(self.frame.start, anchor - parse_duration(within)), self.windows.at

    def presence(self) -> tuple[tuple[str, ...], np.ndarray]:
        """Which replica reports anything at each step (replicas × steps, bool)."""
        return self.frame.presence()


def _median(values: FloatArray) -> float:
    finite = values[np.isfinite(values)]
    return float(np.median(finite)) if finite.size else math.nan


def _baseline(ctx: Context, check: CheckSpec) -> tuple[float, float]:
    """The baseline window a check compares with: the hour before the onset, or the first of the lookback."""
    return ctx.windows.long_baseline if check.baseline == "long" else ctx.windows.baseline


def _window(ctx: Context, values: FloatArray, window: tuple[float, float]) -> FloatArray:
    return values[ctx.frame.index(*window)]


def _fmt(value: float) -> str:
    if not math.isfinite(value):
        return "n/a"
    if value == 0:
        return "0"
    if abs(value) >= 100:
        return f"{value:,.0f}"
    return f"{value:.3g}"


def _unknown(
    check: CheckSpec, text: str, why: str, value: float = math.nan, baseline: float = math.nan
) -> Evidence:
    return Evidence(
        signal=check.signal or "", check=text, holds=None, value=value, baseline=baseline, note=why
    )


def _clip(x: float) -> float:
    return 0.0 if not math.isfinite(x) else max(0.0, min(1.0, x))


def _before_and_now(ctx: Context, check: CheckSpec, text: str) -> tuple[FloatArray, float, float] | Evidence:
    """The signal's view with its baseline and recent medians, or the unknown evidence saying why not."""
    assert check.signal is not None
    if not ctx.frame.has(check.signal) or (check.times is not None and not ctx.frame.has(check.times)):
        return _unknown(check, text, "signal missing")
    values = ctx.view(check.signal, check.view, check.times)
    base = _median(_window(ctx, values, _baseline(ctx, check)))
    now = _median(_window(ctx, values, ctx.windows.recent))
    if math.isnan(base) or math.isnan(now):
        return _unknown(check, text, "no data in the baseline or recent window", now, base)
    return values, base, now
