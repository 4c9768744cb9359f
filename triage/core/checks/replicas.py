"""Check kinds that compare replicas with their peers or the fleet's count: outlier, broad,
shortfall and replicas_lost.

"Per replica, not only the fleet": one replica out of line points to supply or resource
causes, the whole fleet moving together to request or engine causes. The vectorised
per-row medians these kinds need live here with them.
"""

from __future__ import annotations

import math

import numpy as np

from signals.frame import FloatArray
from triage.core.checks.context import (
    Context,
    _baseline,
    _clip,
    _fmt,
    _median,
    _unknown,
    _window,
)
from triage.core.model import Evidence
from triage.core.playbook import CheckSpec


def row_medians(matrix: FloatArray) -> FloatArray:
    """Median of each row ignoring NaN; a row with no sample gives NaN.

    np.nanmedian goes through masked arrays for short rows, which is slow on the hot path
    of a replay; most windows have no gap, so those take plain np.median.
    """
    if matrix.shape[0] == 0 or matrix.shape[1] == 0:
        return np.full(matrix.shape[0], np.nan)
    gaps = np.isnan(matrix)
    if not gaps.any():
        return np.asarray(np.median(matrix, axis=1), dtype=np.float64)
    ordered = np.sort(matrix, axis=1)  # NaN sort last
    count = (~gaps).sum(axis=1)
    low = np.clip((count - 1) // 2, 0, None)[:, None]
    high = np.clip(count // 2, 0, None)[:, None]
    middle = (np.take_along_axis(ordered, low, axis=1) + np.take_along_axis(ordered, high, axis=1))[:, 0] / 2
    return np.where(count > 0, middle, np.nan)


def leave_one_out_medians(values: FloatArray) -> FloatArray:
    """For each element, the median of all the others (vectorised, O(n log n))."""
    n = len(values)
    if n < 2:
        return np.full(n, np.nan)
    order = np.argsort(values, kind="stable")
    rank = np.empty(n, dtype=np.int64)
    rank[order] = np.arange(n)
    s = values[order]

    def remaining(j: int) -> FloatArray:
        # the j-th smallest of the others: skip over the element itself
        return np.asarray(np.where(rank > j, s[j], s[min(j + 1, n - 1)]), dtype=np.float64)

    m = n - 1
    if m % 2 == 1:
        return remaining(m // 2)
    return (remaining(m // 2 - 1) + remaining(m // 2)) / 2


def _replica_medians(
    ctx: Context, signal: str, window: tuple[float, float]
) -> tuple[tuple[str, ...], FloatArray]:
    cached = ctx.medians.get((signal, window))
    if cached is None:
        view = ctx.frame.replicas(signal)
        span = ctx.frame.index(*window)
        cached = ctx.medians[(signal, window)] = (view.replicas, row_medians(view.values[:, span]))
    return cached


def check_outlier(ctx: Context, check: CheckSpec) -> Evidence:
    """A few replicas far off their peers now (one hot replica, one slow GPU)."""
    assert check.signal is not None
    factor = check.factor or 2.0
    min_delta = check.min_delta or 0.0
    max_share = check.max_share or 0.34
    high = check.direction != "low"
    op = ">=" if high else "<="
    text = f"{check.signal} on some replicas {op} {factor:g}x{'' if high else ' less than'} their peers"
    if not ctx.frame.has(check.signal):
        return _unknown(check, text, "signal missing")
    names, now = _replica_medians(ctx, check.signal, ctx.windows.recent)
    known = np.isfinite(now)
    if known.sum() < 3:
        return _unknown(check, text, "fewer than 3 replicas report it")
    names = tuple(n for n, k in zip(names, known, strict=True) if k)
    now = now[known]
    flagged: list[tuple[str, float, float]] = []
    peer_medians = leave_one_out_medians(now)
    for i, name in enumerate(names):
        peers = float(peer_medians[i])
        value = float(now[i])
        if high:
            off = (
                value >= factor * peers and value - peers >= min_delta
                if peers > 0
                else value - peers >= max(min_delta, 1e-9)
            )
        else:
            off = value * factor <= peers and peers - value >= min_delta
        if off:
            flagged.append((name, value, peers))
    limit = max(1, math.floor(max_share * len(names)))
    holds = 1 <= len(flagged) <= limit
    peers_all = float(np.median(now))
    if flagged:
        worst = max(flagged, key=lambda f: f[1]) if high else min(flagged, key=lambda f: f[1])
        note = f"{worst[0]} at {_fmt(worst[1])} vs peers {_fmt(worst[2])}"
        if len(flagged) > 1:
            note += f" ({len(flagged)} of {len(names)} replicas off)"
        value = worst[1]
        peers_all = worst[2]
    else:
        note = f"no replica off its peers (median {_fmt(peers_all)})"
        value = float(np.max(now) if high else np.min(now))
    if flagged and not holds:
        note += f"; more than {limit} replicas, so not an outlier"
    return Evidence(
        check.signal,
        text,
        holds,
        value,
        peers_all,
        note=note,
        replicas=tuple(f[0] for f in flagged) if holds else (),
        margin=1.0 if holds else 0.0,
    )


def check_broad(ctx: Context, check: CheckSpec) -> Evidence:
    """Most replicas moved together against their own baselines."""
    assert check.signal is not None
    factor = check.factor or 1.3
    min_delta = check.min_delta or 0.0
    share = check.share or 0.6
    text = f"{check.signal} >= {factor:g}x baseline on >= {share:.0%} of replicas"
    if not ctx.frame.has(check.signal):
        return _unknown(check, text, "signal missing")
    names, now = _replica_medians(ctx, check.signal, ctx.windows.recent)
    _, base = _replica_medians(ctx, check.signal, _baseline(ctx, check))
    if len(names) == 0:
        now = np.array([_median(_window(ctx, ctx.frame.fleet(check.signal), ctx.windows.recent))])
        base = np.array([_median(_window(ctx, ctx.frame.fleet(check.signal), _baseline(ctx, check)))])
    known = np.isfinite(now) & np.isfinite(base)
    if not known.any():
        return _unknown(check, text, "no replica has both a baseline and a recent value")
    now, base = now[known], base[known]
    risen = (now >= factor * base) & (now - base >= min_delta) & ((base > 0) | (now > min_delta))
    fraction = float(risen.mean())
    holds = fraction >= share
    note = f"{int(risen.sum())} of {len(now)} replicas rose"
    return Evidence(
        check.signal,
        text,
        holds,
        float(np.median(now)),
        float(np.median(base)),
        note=note,
        departure=True,
        margin=_clip((fraction - share) / (1 - share + 1e-9)) if holds else 0.0,
    )


def check_shortfall(ctx: Context, check: CheckSpec) -> Evidence:
    """`signal` newly below `of` (several `of` signals are summed): ready below desired, or an
    edge's own in-flight count below what the engines hold (`factor` scales `of`)."""
    assert check.signal is not None and check.of is not None
    wanted = check.of_signals()
    factor = check.factor or 1.0
    min_delta = check.min_delta if check.min_delta is not None else (1.0 if factor == 1.0 else 0.0)
    of_text = " + ".join(wanted) if len(wanted) == 1 else f"({' + '.join(wanted)})"
    text = f"{check.signal} below {'' if factor == 1.0 else f'{factor:g}x '}{of_text}"
    if min_delta:
        text += f" by >= {min_delta:g}"
    if not ctx.frame.has(check.signal) or not all(ctx.frame.has(s) for s in wanted):
        return _unknown(check, text, "signal missing")
    have = ctx.frame.fleet(check.signal)
    want = np.sum([ctx.frame.fleet(s) for s in wanted], axis=0)
    gap = want * factor - have
    now = _median(_window(ctx, gap, ctx.windows.recent))
    current = now
    if check.within:
        # at any time since just before the onset: a gap that has closed again still counts
        # (the only replica gone for minutes during a rollout, then back)
        since = _window(ctx, gap, ctx.since_onset(check.within))
        if np.isfinite(since).any():
            now = float(np.nanmax(since))
        text += f" within {check.within} of the onset"
    before = _median(_window(ctx, gap, ctx.windows.baseline))
    ready = _median(_window(ctx, have, ctx.windows.recent))
    desired = _median(_window(ctx, want, ctx.windows.recent))
    if math.isnan(now):
        return _unknown(check, text, "no recent data")
    floor = max(min_delta, 1e-9)
    holds = now >= floor and (math.isnan(before) or before < floor)
    # a gap closed through the whole recent window held in the incident, not now: past evidence
    recent_gap = _window(ctx, gap, ctx.windows.recent)
    live = not (math.isfinite(current) and bool(np.all(recent_gap[np.isfinite(recent_gap)] < floor)))
    note = (
        f"{_fmt(ready)} of {_fmt(desired)} ready"
        if len(wanted) == 1 and factor == 1.0
        else f"{_fmt(ready)} against {_fmt(desired)} ({_fmt(ready / desired) if desired else 'n/a'}x)"
    )
    return Evidence(
        check.signal,
        text,
        bool(holds),
        ready,
        desired,
        note=note + ("" if live or not holds else "; closed again since"),
        departure=True,
        margin=_clip(now / max(desired * factor, 1.0) * 4) if holds else 0.0,
        live=live,
    )


def check_replicas_lost(ctx: Context, check: CheckSpec) -> Evidence:
    """Replicas that reported before the onset and have gone silent since."""
    minimum = check.min_count or 1
    text = f"replicas reporting dropped by >= {minimum}"
    names, present = ctx.presence()
    if not names:
        return Evidence("", text, None, note="no per-replica series")
    base = ctx.frame.index(*ctx.windows.baseline)
    recent = ctx.frame.index(*ctx.windows.recent)
    before = np.asarray(present[:, base].any(axis=1), dtype=bool)
    now = np.asarray(present[:, recent].any(axis=1), dtype=bool)
    if not before.any():
        return Evidence("", text, None, note="no replica reported before the onset")
    lost = tuple(n for n, b, a in zip(names, before.tolist(), now.tolist(), strict=True) if b and not a)
    # Counted at once, not over the window: a rollout that replaces pods under new names has old
    # and new ones in the baseline together, and its replacements are not losses.
    at_once_before = int(present[:, base].sum(axis=0).max()) if present[:, base].size else 0
    at_once_now = int(present[:, recent].sum(axis=0).max()) if present[:, recent].size else 0
    net = min(int(before.sum()) - int(now.sum()), at_once_before - at_once_now)
    holds = net >= minimum and bool(lost)
    note = f"{int(now.sum())} of {int(before.sum())} replicas still report"
    if at_once_before < int(before.sum()):
        note += f" ({at_once_now} at once, {at_once_before} before)"
    if lost:
        note += f"; silent: {', '.join(lost[:4])}" + (f" +{len(lost) - 4} more" if len(lost) > 4 else "")
    return Evidence(
        "",
        text,
        holds,
        float(now.sum()),
        float(before.sum()),
        note=note,
        replicas=lost if holds else (),
        departure=True,
        margin=1.0 if holds else 0.0,
    )
