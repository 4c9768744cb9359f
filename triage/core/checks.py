"""Check kinds: how one playbook check reads the frame and what it concludes.

Every kind returns an `Evidence`: the value now, its baseline, whether the check holds
(True, False, or None when the signal gives no answer; unknown is never healthy), a
margin in [0, 1] saying how decisively it holds, and whether it is a *departure* (a
change against the baseline or a new event) rather than a state. A cause is only
ranked on departures: a fleet that has always run hot has no incident.

Adding a kind: write its function here, register it in `KINDS`, declare its parameters
in `triage.core.playbook.CHECK_PARAMS`, and test it on synthetic frames.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field, replace

import numpy as np

from signals.frame import FloatArray, SignalFrame
from signals.timeparse import format_duration, parse_duration
from triage.core.model import Evidence
from triage.core.playbook import AnyOf, CheckSpec
from triage.core.windows import PER_PLACE_LABELS, Windows

FALSE_VALUES = ("false", "0", "off", "no", "disabled", "none")


@dataclass
class Context:
    """What every check reads: the frame, the windows, and caches shared across checks."""

    frame: SignalFrame
    windows: Windows
    _views: dict[tuple[str, str], FloatArray] = field(default_factory=dict)
    _results: dict[CheckSpec, Evidence] = field(default_factory=dict)

    def view(self, signal: str, view: str | None) -> FloatArray:
        key = (signal, view or "fleet")
        cached = self._views.get(key)
        if cached is not None:
            return cached
        if view == "max_replica":
            values = self.frame.across_replicas(signal, "max")
        elif view == "median_replica":
            values = self.frame.across_replicas(signal, "median")
        else:
            values = self.frame.fleet(signal)
        self._views[key] = values
        return values

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
    if not ctx.frame.has(check.signal):
        return _unknown(check, text, "signal missing")
    values = ctx.view(check.signal, check.view)
    base = _median(_window(ctx, values, _baseline(ctx, check)))
    now = _median(_window(ctx, values, ctx.windows.recent))
    if math.isnan(base) or math.isnan(now):
        return _unknown(check, text, "no data in the baseline or recent window", now, base)
    return values, base, now


def check_rise_drop(ctx: Context, check: CheckSpec) -> Evidence:
    assert check.signal is not None
    rising = check.kind == "rise"
    factor = check.factor if check.factor is not None else (1.5 if rising else 0.7)
    min_delta = check.min_delta or 0.0
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
        holds = (
            now >= base * factor and now - base >= min_delta
            if base > 0
            else now - base >= max(min_delta, 1e-9)
        )
        ratio = now / base if base > 0 else math.inf
        margin = _clip((math.log(ratio) / math.log(factor)) - 1.0) if base > 0 and now > 0 else 1.0
    else:
        holds = now <= base * factor and base - now >= min_delta
        ratio = now / base if base > 0 else 1.0
        margin = _clip((math.log(ratio) / math.log(factor)) - 1.0) if now > 0 and base > 0 else 1.0
    note = f"{_fmt(now)} vs {_fmt(base)} before" + (
        f" ({ratio:.2f}x)" if base > 0 and math.isfinite(ratio) else ""
    )
    return Evidence(
        check.signal, text, bool(holds), now, base, note=note, departure=True, margin=margin if holds else 0.0
    )


def check_steady(ctx: Context, check: CheckSpec) -> Evidence:
    """The signal stayed within a factor of its baseline (unchanged price, length, rate)."""
    assert check.signal is not None
    factor = check.factor or 1.2
    text = f"{check.signal} within {factor:g}x of baseline"
    compared = _before_and_now(ctx, check, text)
    if isinstance(compared, Evidence):
        return compared
    _, base, now = compared
    if base > 0 and now > 0:
        holds = max(now / base, base / now) <= factor
    else:
        holds = abs(now - base) <= 1e-9
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


def check_event(ctx: Context, check: CheckSpec) -> Evidence:
    """A new event in the incident window: a nonzero XID, ECC errors, a restart, an OOM kill."""
    assert check.signal is not None
    threshold = check.threshold if check.threshold is not None else 0.0
    text = f"{check.signal} > {threshold:g} since the onset"
    if check.within:
        text = f"{check.signal} > {threshold:g} first within {check.within} of the onset"
    if not ctx.frame.has(check.signal):
        return _unknown(check, text, "signal missing")
    view = ctx.frame.replicas(check.signal)
    names: tuple[str, ...]
    if view.values.shape[0]:
        names, rows = view.replicas, view.values
    else:
        names, rows = ("fleet",), ctx.frame.fleet(check.signal)[None, :]
    incident_window = ctx.windows.incident
    pre_window = ctx.windows.pre
    if check.within:
        # A state gauge ("last termination was an OOM kill") stays up after the first event;
        # `within` says how long before the onset a first appearance still counts as new.
        anchor = ctx.windows.onset if ctx.windows.onset is not None else ctx.windows.recent[0]
        start = max(ctx.frame.start, anchor - parse_duration(check.within))
        incident_window = (start, ctx.windows.at)
        pre_window = (
            max(ctx.frame.start, start - (pre_window[1] - pre_window[0])),
            start - ctx.frame.step / 2,
        )
    incident = ctx.frame.index(*incident_window)
    pre = ctx.frame.index(*pre_window)
    flagged: list[str] = []
    peak = math.nan
    before = math.nan
    seen_any = False
    for name, row in zip(names, rows, strict=True):
        now = row[incident]
        old = row[pre]
        now_f = now[np.isfinite(now)]
        old_f = old[np.isfinite(old)]
        if now_f.size == 0:
            continue
        seen_any = True
        high = now_f > threshold
        old_high = old_f > threshold
        last_old = float(old_f[-1]) if old_f.size else math.nan
        if high.any():
            first_new = float(now_f[high][0])
            new = (
                not old_high.any()
                or (check.signal == "gpu_xid" and first_new != last_old)
                or (math.isfinite(last_old) and last_old <= threshold)
            )
            if new:
                flagged.append(name)
                peak = float(np.nanmax([peak, now_f.max()])) if math.isfinite(peak) else float(now_f.max())
        if old_f.size:
            before = float(np.nanmax([before, old_f.max()])) if math.isfinite(before) else float(old_f.max())
    if not seen_any:
        return _unknown(check, text, "no data since the onset")
    holds = bool(flagged)
    who = (
        ""
        if names == ("fleet",)
        else f" on {', '.join(flagged[:4])}" + (f" +{len(flagged) - 4} more" if len(flagged) > 4 else "")
    )
    note = f"{_fmt(peak)}{who}" if holds else "none since the onset"
    return Evidence(
        check.signal,
        text,
        holds,
        peak if holds else 0.0,
        before,
        note=note,
        replicas=tuple(n for n in flagged if n != "fleet"),
        departure=True,
        margin=1.0 if holds else 0.0,
    )


def _info_sets(
    ctx: Context, check: CheckSpec, window: tuple[float, float]
) -> dict[tuple[tuple[str, str], ...], float]:
    """Label tuples of an info signal active in a window, with the time each first appears."""
    assert check.signal is not None
    span = ctx.frame.index(*window)
    times = ctx.frame.times[span]
    out: dict[tuple[tuple[str, str], ...], float] = {}
    for s in ctx.frame.rows(check.signal):
        values = s.values[span]
        active = np.isfinite(values) & (values > 0)
        if not active.any():
            continue
        labels = dict(s.labels)
        keys = check.labels or tuple(sorted(k for k in labels if k not in PER_PLACE_LABELS))
        key = tuple((k, labels.get(k, "")) for k in keys)
        first = float(times[int(np.argmax(active))])
        out[key] = min(out.get(key, math.inf), first)
    return out


def check_change(ctx: Context, check: CheckSpec) -> Evidence:
    """An info series' labels changed around the onset: a new version, route or config."""
    assert check.signal is not None
    what = ",".join(check.labels) if check.labels else "labels"
    text = f"{check.signal} {what} changed near the onset"
    if not ctx.frame.has(check.signal):
        return _unknown(check, text, "signal missing")
    before = _info_sets(ctx, check, ctx.windows.pre)
    now = _info_sets(ctx, check, ctx.windows.recent)
    if not now:
        return _unknown(check, text, "no info series in the recent window")
    if not before:
        return _unknown(check, text, "no info series before the incident to compare with")
    new = sorted(set(now) - set(before))
    if not new:
        return Evidence(check.signal, text, False, note="unchanged", departure=True)
    changes = []
    old_values = {k: v for key in before for k, v in key}
    for key in new:
        for k, v in key:
            if old_values.get(k) != v:
                changes.append(f"{k} {old_values.get(k, '?')} -> {v}")
    when = min(_info_sets(ctx, check, ctx.windows.incident).get(k, math.inf) for k in new)
    note = "; ".join(sorted(set(changes))) or "new label set"
    if math.isfinite(when) and ctx.windows.onset is not None:
        note += f" ({format_duration(when - ctx.windows.onset)} from onset)"
    return Evidence(check.signal, text, True, 1.0, 0.0, note=note, departure=True, margin=1.0)


def check_label_is(ctx: Context, check: CheckSpec) -> Evidence:
    assert check.signal is not None and check.label is not None and check.values is not None
    text = f"{check.signal} {check.label} in ({', '.join(check.values)})"
    if not ctx.frame.has(check.signal):
        return _unknown(check, text, "signal missing")
    span = ctx.frame.index(*ctx.windows.recent)
    wanted = {v.lower() for v in check.values}
    seen: list[str] = []
    for s in ctx.frame.rows(check.signal):
        values = s.values[span]
        if (np.isfinite(values) & (values > 0)).any():
            value = dict(s.labels).get(check.label)
            if value is not None:
                seen.append(value)
    if not seen:
        return _unknown(check, text, f"no {check.label} label in the recent window")
    holds = any(v.lower() in wanted for v in seen)
    return Evidence(
        check.signal,
        text,
        holds,
        note=f"{check.label}={','.join(sorted(set(seen)))}",
        margin=1.0 if holds else 0.0,
    )


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
    view = ctx.frame.replicas(signal)
    span = ctx.frame.index(*window)
    return view.replicas, row_medians(view.values[:, span])


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
    if base <= 0 or now < base * factor or total <= 0:
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


def check_shortfall(ctx: Context, check: CheckSpec) -> Evidence:
    assert check.signal is not None and check.of is not None
    min_delta = check.min_delta or 1.0
    text = f"{check.signal} below {check.of} by >= {min_delta:g}"
    if not ctx.frame.has(check.signal) or not ctx.frame.has(check.of):
        return _unknown(check, text, "signal missing")
    have = ctx.frame.fleet(check.signal)
    want = ctx.frame.fleet(check.of)
    gap = want - have
    now = _median(_window(ctx, gap, ctx.windows.recent))
    before = _median(_window(ctx, gap, ctx.windows.baseline))
    ready = _median(_window(ctx, have, ctx.windows.recent))
    desired = _median(_window(ctx, want, ctx.windows.recent))
    if math.isnan(now):
        return _unknown(check, text, "no recent data")
    holds = now >= min_delta and (math.isnan(before) or before < min_delta)
    note = f"{_fmt(ready)} of {_fmt(desired)} ready"
    return Evidence(
        check.signal,
        text,
        bool(holds),
        ready,
        desired,
        note=note,
        departure=True,
        margin=_clip(now / max(desired, 1.0) * 4) if holds else 0.0,
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
    net = int(before.sum()) - int(now.sum())
    holds = net >= minimum
    note = f"{int(now.sum())} of {int(before.sum())} replicas still report"
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


def check_wave(ctx: Context, check: CheckSpec) -> Evidence:
    """Events on several replicas one after another: a rolling restart."""
    assert check.signal is not None
    minimum = check.min_count or 2
    threshold = check.threshold if check.threshold is not None else 0.0
    text = f"{check.signal} on >= {minimum} replicas, one after another"
    if not ctx.frame.has(check.signal):
        return _unknown(check, text, "signal missing")
    view = ctx.frame.replicas(check.signal)
    if view.values.shape[0] == 0:
        return _unknown(check, text, "no per-replica series")
    span = ctx.frame.index(*ctx.windows.incident)
    times = ctx.frame.times[span]
    firsts: dict[str, float] = {}
    for name, row in zip(view.replicas, view.values[:, span], strict=True):
        hit = np.isfinite(row) & (row > threshold)
        if hit.any():
            firsts[name] = float(times[int(np.argmax(hit))])
    distinct = len(set(firsts.values()))
    holds = len(firsts) >= minimum and distinct >= 2
    note = f"{len(firsts)} of {len(view.replicas)} replicas, at {distinct} different times"
    return Evidence(
        check.signal,
        text,
        holds,
        float(len(firsts)),
        0.0,
        note=note,
        replicas=tuple(sorted(firsts, key=lambda n: (firsts[n], n))),
        departure=True,
        margin=1.0 if holds else 0.0,
    )


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
}


def evaluate(ctx: Context, check: CheckSpec) -> Evidence:
    """Evaluate one check (cached per context: causes share checks)."""
    cached = ctx._results.get(check)
    if cached is None:
        cached = KINDS[check.kind](ctx, check)
        if check.note and cached.holds:
            cached = replace(cached, note=f"{cached.note}; {check.note}" if cached.note else check.note)
        ctx._results[check] = cached
    return cached


def evaluate_entry(ctx: Context, entry: CheckSpec | AnyOf) -> Evidence:
    """A check, or an `any` group folded into one piece of evidence (the best member)."""
    if isinstance(entry, CheckSpec):
        return evaluate(ctx, entry)
    results = [evaluate(ctx, member) for member in entry.any]
    holding = [r for r in results if r.holds]
    text = " or ".join(r.check for r in results)
    if holding:
        best = max(holding, key=lambda r: (r.margin, r.departure))
        return replace(best, check=text, departure=any(r.departure for r in holding))
    if all(r.holds is False for r in results):
        return replace(results[0], check=text, holds=False, note="; ".join(r.note for r in results if r.note))
    unknown = next(r for r in results if r.holds is None)
    return replace(unknown, check=text, holds=None, note="; ".join(r.note for r in results if r.note))
