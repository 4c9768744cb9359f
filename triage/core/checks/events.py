"""Check kinds about discrete events and labels: event, change, label_is, wave.

New XID codes, ECC errors, restarts, OOM kills and label changes (versions, routes,
configs) are read per series and per replica, which is different enough from the baseline
arithmetic to live apart.
"""

from __future__ import annotations

import math

import numpy as np

from signals.frame import FloatArray, aggregate
from signals.timeparse import format_duration
from signals.vocabulary import SIGNALS
from triage.core.checks.context import (
    Context,
    _fmt,
    _unknown,
)
from triage.core.model import Evidence
from triage.core.playbook import CheckSpec
from triage.core.windows import PER_PLACE_LABELS


def check_event(ctx: Context, check: CheckSpec) -> Evidence:
    """A new event in the incident window: a new XID code, ECC errors, a restart, an OOM kill."""
    assert check.signal is not None
    threshold = check.threshold if check.threshold is not None else 0.0
    text = f"{check.signal} > {threshold:g} since the onset"
    if check.within:
        text = f"{check.signal} > {threshold:g} first within {check.within} of the onset"
    if not ctx.frame.has(check.signal):
        return _unknown(check, text, "signal missing")
    spec = SIGNALS.get(check.signal)
    if spec is not None and spec.unit == "code":
        return _check_code(ctx, check, text, threshold)
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
        incident_window = ctx.since_onset(check.within)
        start = incident_window[0]
        pre_window = (
            max(ctx.frame.start, start - (pre_window[1] - pre_window[0])),
            start - ctx.frame.step / 2,
        )
    incident = ctx.frame.index(*incident_window)
    pre = ctx.frame.index(*pre_window)
    births = ctx.frame.births()
    # where the whole record begins, a value held from the first sample has no past to be new
    # against: a state ("last termination was an error") may be hours old
    unseen_past = ctx.frame.position(births[0]) + 1 if births else 0
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
        duty_before = float(old_high.mean()) if old_f.size else 0.0
        first = int(np.argmax(np.isfinite(row))) if np.isfinite(row).any() else 0
        born_high = not old_f.size and first < unseen_past and bool(row[first] > threshold)
        if high.any() and not born_high and new_against_background(float(high.mean()), duty_before):
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


DUTY_FACTOR = 2.0
DUTY_MIN_RISE = 0.05


def new_against_background(duty_now: float, duty_before: float) -> bool:
    """Whether an event's share of samples since the onset is new against its own past.

    A flag, counter or state that fired before the onset at the same rate is background (a
    throttle flag blinking on a healthy GPU, a replica that restarts now and then): it counts
    only when it fires at least twice as often, and noticeably more, than before. One that
    never fired before is new however briefly it fires now.
    """
    if duty_before <= 0.0:
        return duty_now > 0.0
    return duty_now >= DUTY_FACTOR * duty_before and duty_now - duty_before >= DUTY_MIN_RISE


def _previous(values: FloatArray) -> FloatArray:
    """At each step, the last finite value strictly before it (NaN where there is none)."""
    n = values.shape[0]
    last = np.where(np.isfinite(values), np.arange(n), -1)
    last = np.maximum.accumulate(last)
    before = np.concatenate(([-1], last[:-1]))
    return np.where(before >= 0, values[np.maximum(before, 0)], np.nan)


def _check_code(ctx: Context, check: CheckSpec, text: str, threshold: float) -> Evidence:
    """An event on a signal that holds the *last* code (`gpu_xid`: DCGM's last XID): the code
    stays after the fault, so a code is new when it appears or changes in the incident window,
    and one already there before is old news, whatever its value.

    Read per series, not per replica (a replica's GPUs hold codes of their own). Series of
    one GPU (same `UUID`) are read as one history, so a new pod on a GPU with an old code
    (the pod label changed, the code did not) is not a new event. A series with no sample
    before its first code cannot tell, and counts it as new.
    """
    assert check.signal is not None
    rows = ctx.frame.rows(check.signal)
    per_replica = [s for s in rows if s.replica is not None]
    rows = per_replica or rows
    groups: dict[str, list[FloatArray]] = {}
    keys: list[str] = []
    for i, s in enumerate(rows):
        key = s.label_map.get("UUID") or f"#{i}"
        keys.append(key)
        groups.setdefault(key, []).append(s.values)
    previous = {k: _previous(aggregate(np.vstack(v), "max")) for k, v in groups.items()}
    incident = ctx.frame.index(*ctx.windows.incident)
    if check.within:
        incident = ctx.frame.index(*ctx.since_onset(check.within))
    flagged: list[str] = []
    new_codes: list[float] = []
    old_codes: list[float] = []
    seen_any = False
    for s, key in zip(rows, keys, strict=True):
        now = s.values[incident]
        prev = previous[key][incident]
        finite = np.isfinite(now)
        if not finite.any():
            continue
        seen_any = True
        with np.errstate(invalid="ignore"):
            fresh = finite & (now > threshold) & ~(prev == now)
        name = s.replica or "fleet"
        if fresh.any():
            new_codes.append(float(now[fresh][0]))
            if name not in flagged:
                flagged.append(name)
        else:
            held = now[finite]
            if held[-1] > threshold:
                old_codes.append(float(held[-1]))
    if not seen_any:
        return _unknown(check, text, "no data since the onset")
    pre = np.concatenate([s.values[ctx.frame.index(*ctx.windows.pre)] for s in rows])
    pre = pre[np.isfinite(pre)]
    before = float(pre.max()) if pre.size else math.nan
    holds = bool(flagged)
    if holds:
        peak = max(new_codes)
        who = "" if flagged == ["fleet"] else f" on {', '.join(flagged[:4])}"
        who += f" +{len(flagged) - 4} more" if len(flagged) > 4 else ""
        note = f"{_fmt(peak)}{who}"
    else:
        peak = 0.0
        codes = ", ".join(_fmt(c) for c in sorted(set(old_codes)))
        note = (
            f"none since the onset (last code {codes}, held from before)" if codes else "none since the onset"
        )
    return Evidence(
        check.signal,
        text,
        holds,
        peak,
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


def _number(text: str) -> float:
    try:
        return float(text)
    except ValueError:
        return math.nan


def check_label_is(ctx: Context, check: CheckSpec) -> Evidence:
    """An info series' label now: one of `values`, or at least `threshold` read as a number
    (`gpu_memory_utilization` at or above 0.94)."""
    assert check.signal is not None and check.label is not None
    if check.values is not None:
        text = f"{check.signal} {check.label} in ({', '.join(check.values)})"
    else:
        text = f"{check.signal} {check.label} >= {check.threshold:g}"
    if not ctx.frame.has(check.signal):
        return _unknown(check, text, "signal missing")
    span = ctx.frame.index(*ctx.windows.recent)
    seen: list[str] = []
    for s in ctx.frame.rows(check.signal):
        values = s.values[span]
        if (np.isfinite(values) & (values > 0)).any():
            value = dict(s.labels).get(check.label)
            if value is not None:
                seen.append(value)
    if not seen:
        return _unknown(check, text, f"no {check.label} label in the recent window")
    if check.values is not None:
        wanted = {v.lower() for v in check.values}
        holds = any(v.lower() in wanted for v in seen)
    else:
        assert check.threshold is not None
        holds = any(_number(v) >= check.threshold for v in seen)
    return Evidence(
        check.signal,
        text,
        holds,
        note=f"{check.label}={','.join(sorted(set(seen)))}",
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
    recent_start, at = ctx.windows.recent
    since = ctx.frame.index(recent_start - (at - recent_start), at)
    live = bool((np.isfinite(view.values[:, since]) & (view.values[:, since] > threshold)).any())
    if holds and not live:
        note += "; over before the last minutes"
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
        live=live,
    )


def check_symptom_is(ctx: Context, check: CheckSpec) -> Evidence:
    """The symptom diagnosed is one of `values`: a state of the question, not of the data.

    A change marker fits some symptoms by itself (answers got worse after a release: the
    metrics cannot show quality) and no others; this says which.
    """
    assert check.values is not None
    text = f"the symptom is {' or '.join(check.values)}"
    holds = ctx.symptom in check.values
    return Evidence("", text, holds, note=f"symptom {ctx.symptom or 'none'}", margin=1.0 if holds else 0.0)
