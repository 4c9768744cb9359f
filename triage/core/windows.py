"""Finding the onset, and the windows a diagnosis compares.

A value matters against the same signal before the incident began, so the walk first
finds the onset: the single change point where the symptom's signals shifted for the
worse, found by maximising a two-sample t statistic over every split of the lookback
(O(n) with cumulative sums). Around it sit the windows every check reads:

- baseline: the hour (settings) before the onset, minus a guard so a leading edge does
  not leak into it;
- recent: the last five minutes up to `at`, never before the onset;
- incident: from `lead` before the onset to `at`, where events (XIDs, restarts, version
  changes) that may have caused the symptom are looked for;
- pre: the baseline span before the incident window, to tell a new event from an old one;
- long baseline: the first hour of the lookback, for growth too slow to show against
  the hour before the onset (demand that climbs over an afternoon).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from signals.frame import FloatArray, SignalFrame
from signals.timeparse import parse_duration
from signals.vocabulary import SIGNALS
from triage.core.playbook import Settings

MIN_SEGMENT = 4
PER_PLACE_LABELS = ("instance", "pod", "gpu", "Hostname", "hostname")


@dataclass(frozen=True)
class Onset:
    """A change point: when, on which signal, and how strong (t statistic, relative shift)."""

    time: float
    signal: str
    score: float
    shift: float


@dataclass(frozen=True)
class Windows:
    """The time windows of one diagnosis, as (start, end) epoch seconds, both inclusive."""

    at: float
    onset: float | None
    baseline: tuple[float, float]
    recent: tuple[float, float]
    incident: tuple[float, float]
    pre: tuple[float, float]
    long_baseline: tuple[float, float]


def split_statistics(matrix: FloatArray) -> tuple[npt.NDArray[np.int64], FloatArray, FloatArray, FloatArray]:
    """For every row (complete, no NaN) and every split leaving `MIN_SEGMENT` samples each side:
    the split indices, the means before and after, and the standard error of their difference
    (a pooled two-sample t test, O(n) per row with cumulative sums)."""
    n = matrix.shape[1]
    c1 = np.cumsum(matrix, axis=1)
    c2 = np.cumsum(matrix * matrix, axis=1)
    k = np.arange(MIN_SEGMENT, n - MIN_SEGMENT + 1)
    n1 = k.astype(np.float64)[None, :]
    n2 = n - n1
    s1 = c1[:, k - 1]
    s2 = c1[:, -1:] - s1
    q1 = c2[:, k - 1]
    q2 = c2[:, -1:] - q1
    m1 = s1 / n1
    m2 = s2 / n2
    var = np.maximum((q1 - n1 * m1 * m1) + (q2 - n2 * m2 * m2), 0.0) / max(n - 2, 1)
    scale = np.abs(matrix).mean(axis=1, keepdims=True)
    floor = (1e-3 * scale) ** 2 + 1e-18
    se = np.sqrt(np.maximum(var, floor) * (1.0 / n1 + 1.0 / n2))
    return k, m1, m2, se


def change_point(
    times: FloatArray, values: FloatArray, worse_up: bool
) -> tuple[float, float, float, float, float] | None:
    """(time, t score, relative shift, mean before, mean after) of the strongest shift for
    the worse, or None. The means are in the signal's own sign."""
    mask = np.isfinite(values)
    if mask.sum() < 2 * MIN_SEGMENT:
        return None
    t = times[mask]
    v = values[mask] if worse_up else -values[mask]
    k, m1s, m2s, se = split_statistics(v[None, :])
    m1, m2 = m1s[0], m2s[0]
    score = (m2 - m1) / se[0]
    best = int(np.argmax(score))
    if not math.isfinite(float(score[best])):
        return None
    before, after = float(m1[best]), float(m2[best])
    denominator = max(abs(before), abs(after), 1e-12)
    shift = (after - before) / denominator
    sign = 1.0 if worse_up else -1.0
    return float(t[k[best]]), float(score[best]), shift, sign * before, sign * after


def find_onset(frame: SignalFrame, signals: list[str], at: float, settings: Settings) -> Onset | None:
    """The strongest significant worsening among `signals` (fleet view) before `at`."""
    lookback = parse_duration(settings.windows.lookback)
    span = frame.index(at - lookback, at)
    times = frame.times[span]
    warm = frame.warm(parse_duration(settings.windows.warmup))[span]
    best: Onset | None = None
    for name in signals:
        if not frame.has(name):
            continue
        spec = SIGNALS.get(name)
        if spec is not None and spec.kind == "info":
            changed = info_change(frame, name, at - lookback, at)
            if changed is not None and best is None:
                best = Onset(changed, name, settings.onset_min_score, 1.0)
            continue
        worse_up = spec.higher_is_worse if spec is not None else True
        # no onset at a birth: the climb while a new series' windows fill is left out
        found = change_point(times, np.where(warm, np.nan, frame.fleet(name)[span]), worse_up)
        if found is None:
            continue
        time, score, shift, before, after = found
        if score < settings.onset_min_score or shift < settings.onset_min_shift:
            continue
        if abs(after - before) < settings.floors.get(name, 0.0):
            continue
        if best is None or score > best.score:
            best = Onset(time, name, score, shift)
    return best


def info_change(frame: SignalFrame, signal: str, t0: float, t1: float) -> float | None:
    """When the latest new label set of an info signal appeared in (t0, t1], if one did.

    A label set present at the first step of the window is old; one that first shows
    later is a change (a new version, route or configuration).
    """
    span = frame.index(t0, t1)
    times = frame.times[span]
    first_seen: dict[tuple[tuple[str, str], ...], float] = {}
    for s in frame.rows(signal):
        active = np.isfinite(s.values[span]) & (s.values[span] > 0)
        if not active.any():
            continue
        key = tuple((k, v) for k, v in s.labels if k not in PER_PLACE_LABELS)
        first = float(times[int(np.argmax(active))])
        first_seen[key] = min(first_seen.get(key, first), first)
    start = float(times[0]) if len(times) else t0
    new = [t for t in first_seen.values() if t > start]
    return max(new) if new else None


def settled_since(frame: SignalFrame, anchor: float, warmup: float) -> float:
    """Where a baseline before `anchor` may start: after the warm-up of the latest birth of the
    data before it (a new fleet, a restarted Prometheus), else at the frame's start. Before a
    birth there is no history, and right after it rates still read low."""
    births = [b for b in frame.births() if b + warmup < anchor]
    return max(frame.start, births[-1] + warmup) if births else frame.start


def make_windows(frame: SignalFrame, at: float, onset: float | None, settings: Settings) -> Windows:
    """The windows around an onset (or, without one, the last minutes against the hour before)."""
    w = settings.windows
    baseline_span = parse_duration(w.baseline)
    recent_span = parse_duration(w.recent)
    guard = max(parse_duration(w.guard), frame.step)
    lead = parse_duration(w.lead)
    anchor = onset if onset is not None else at - recent_span
    start = settled_since(frame, anchor, parse_duration(w.warmup))
    baseline_end = anchor - guard
    if onset is not None and baseline_end - start < 3 * frame.step:
        baseline_end = anchor - frame.step
    baseline = (max(start, anchor - guard - baseline_span), baseline_end)
    recent = (max(anchor, at - recent_span), at)
    incident = (max(start, anchor - lead), at)
    pre = (max(start, incident[0] - baseline_span), incident[0] - frame.step / 2)
    lookback = parse_duration(w.lookback)
    long_start = max(start, anchor - lookback)
    long_baseline = (long_start, min(long_start + baseline_span, baseline_end))
    return Windows(at, onset, baseline, recent, incident, pre, long_baseline)
