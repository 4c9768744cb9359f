"""Check kinds that compare a signal now with its own past: rise, drop, steady, above, below,
sudden and gradual.

The "against a baseline" family: a value matters relative to the same signal before
the onset, or against an absolute line it has newly crossed.
"""

from __future__ import annotations

import math
import warnings

import numpy as np

from signals.frame import FloatArray
from signals.timeparse import format_duration, parse_duration
from triage.core.checks.context import (
    Context,
    _baseline,
    _before_and_now,
    _clip,
    _fmt,
    _median,
    _unknown,
    _window,
)
from triage.core.model import Evidence
from triage.core.playbook import CheckSpec


def check_rise_drop(ctx: Context, check: CheckSpec) -> Evidence:
    assert check.signal is not None
    rising = check.kind == "rise"
    factor = check.factor if check.factor is not None else (1.5 if rising else 0.7)
    min_delta = check.min_delta or 0.0
    floor = ctx.floor(check)
    op = ">=" if rising else "<="
    text = f"{check.signal} {op} {factor:g}x baseline"
    if min_delta:
        text += f" ({'+' if rising else '-'}{min_delta:g})"
    if check.view and check.view != "fleet":
        text += f" [{check.view.replace('_', ' ')}]"
    compared = _before_and_now(ctx, check, text)
    if isinstance(compared, Evidence):
        return compared
    _, base, now = compared
    if rising:
        holds = now >= base * factor and now - base >= floor if base > 0 else now - base >= max(floor, 1e-9)
        ratio = now / base if base > 0 else math.inf
        margin = _clip((math.log(ratio) / math.log(factor)) - 1.0) if base > 0 and now > 0 else 1.0
    else:
        holds = now <= base * factor and base - now >= floor
        ratio = now / base if base > 0 else 1.0
        margin = _clip((math.log(ratio) / math.log(factor)) - 1.0) if now > 0 and base > 0 else 1.0
    note = f"{_fmt(now)} vs {_fmt(base)} before" + (
        f" ({ratio:.2f}x)" if base > 0 and math.isfinite(ratio) else ""
    )
    if (
        not holds
        and floor > min_delta
        and abs(now - base) < floor
        and ((rising and now >= base * factor) or (not rising and now <= base * factor))
    ):
        note += f"; a change under the {_fmt(floor)} floor"
    return Evidence(
        check.signal, text, bool(holds), now, base, note=note, departure=True, margin=margin if holds else 0.0
    )


def check_steady(ctx: Context, check: CheckSpec) -> Evidence:
    """The signal stayed within a factor of its baseline (unchanged price, length, rate).

    `direction: high` only asks that it did not rise ("the engines are not busier"), `low`
    that it did not fall; `min_delta` forgives small absolute moves of a low baseline.
    """
    assert check.signal is not None
    factor = check.factor or 1.2
    min_delta = check.min_delta or 0.0
    forgiven = ctx.floor(check)
    bound = {"high": "not above", "low": "not below", None: "within"}[check.direction]
    what = check.signal if check.times is None else f"{check.signal} x {check.times}"
    text = f"{what} {bound} {factor:g}x of baseline"
    if min_delta:
        text += f" (+-{min_delta:g})"
    compared = _before_and_now(ctx, check, text)
    if isinstance(compared, Evidence):
        return compared
    _, base, now = compared
    if base > 0 and now > 0:
        up, down = now / base <= factor, base / now <= factor
    else:
        up = down = abs(now - base) <= 1e-9
    up = up or now - base <= forgiven
    down = down or base - now <= forgiven
    holds = up if check.direction == "high" else down if check.direction == "low" else up and down
    note = f"{_fmt(now)} vs {_fmt(base)} before"
    return Evidence(check.signal, text, bool(holds), now, base, note=note, margin=1.0 if holds else 0.0)


def check_above_below(ctx: Context, check: CheckSpec) -> Evidence:
    assert check.signal is not None and check.threshold is not None
    above = check.kind == "above"
    span = parse_duration(check.for_) if check.for_ else ctx.windows.recent[1] - ctx.windows.recent[0]
    op = ">=" if above else "<"
    text = f"{check.signal} {op} {check.threshold:g}"
    if check.for_:
        text += f" for {check.for_}"
    if check.view and check.view != "fleet":
        text += f" [{check.view.replace('_', ' ')}]"
    if not ctx.frame.has(check.signal):
        return _unknown(check, text, "signal missing")
    values = ctx.view(check.signal, check.view)
    at = ctx.windows.at
    recent = _window(ctx, values, (at - max(span, ctx.frame.step), at))
    finite = recent[np.isfinite(recent)]
    base = _median(_window(ctx, values, ctx.windows.baseline))
    if finite.size == 0:
        return _unknown(check, text, "no recent data", baseline=base)
    now = float(np.median(finite))
    hits = finite >= check.threshold if above else finite < check.threshold
    # Sustained: the typical value is past the line and at least half the samples are;
    # noise around a pinned value must not hide it.
    typical = now >= check.threshold if above else now < check.threshold
    holds = bool(typical and hits.mean() >= 0.5)
    crossed = not math.isnan(base) and (base < check.threshold if above else base >= check.threshold)
    denominator = abs(check.threshold) or 1.0
    margin = _clip(((now - check.threshold) if above else (check.threshold - now)) / denominator * 4)
    note = f"{_fmt(now)} now, {_fmt(base)} before"
    return Evidence(
        check.signal,
        text,
        holds,
        now,
        base,
        note=note,
        departure=holds and crossed,
        margin=margin if holds else 0.0,
    )


def _smooth(values: FloatArray, width: int) -> FloatArray:
    if width <= 1 or len(values) < width:
        return values
    windows = np.lib.stride_tricks.sliding_window_view(values, width)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", category=RuntimeWarning)
        smoothed = np.nanmedian(windows, axis=1)
    return np.concatenate([np.full(width - 1, np.nan), smoothed])


def check_shape(ctx: Context, check: CheckSpec) -> Evidence:
    """Did the signal rise suddenly (a burst) or gradually (steady growth)?"""
    assert check.signal is not None
    factor = check.factor or 1.3
    within = parse_duration(check.within or "10m")
    share = check.share or 0.6
    sudden = check.kind == "sudden"
    portion = f">= {share:.0%} of it" if sudden else f"less than {share:.0%} of it"
    text = f"{check.signal} rose >= {factor:g}x, {portion} within {check.within or '10m'}"
    compared = _before_and_now(ctx, check, text)
    if isinstance(compared, Evidence):
        return compared
    values, base, now = compared
    total = now - base
    if base <= 0 or now < base * factor or total <= 0 or total < ctx.floor(check):
        return Evidence(
            check.signal, text, False, now, base, note=f"no rise: {_fmt(now)} vs {_fmt(base)}", departure=True
        )
    span = ctx.frame.index(_baseline(ctx, check)[0], ctx.windows.at)
    step = ctx.frame.step
    smooth = _smooth(values[span], max(1, round(120 / step)))
    lag = max(1, round(within / step))
    if len(smooth) <= lag:
        return _unknown(check, text, "window too short to judge the shape", now, base)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", category=RuntimeWarning)
        jumps = smooth[lag:] - smooth[:-lag]
        biggest = float(np.nanmax(jumps)) if np.isfinite(jumps).any() else math.nan
    if math.isnan(biggest):
        return _unknown(check, text, "too many gaps to judge the shape", now, base)
    fraction = biggest / total
    holds = fraction >= share if sudden else fraction < share
    note = (
        f"{_fmt(now)} vs {_fmt(base)}; {min(fraction, 1.0):.0%} of the rise within {format_duration(within)}"
    )
    return Evidence(
        check.signal, text, bool(holds), now, base, note=note, departure=True, margin=1.0 if holds else 0.0
    )
