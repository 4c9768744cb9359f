"""First movers: which signals and replicas left their baseline around the onset, in order.

The second opinion beside every verdict, and the answer when no cause fits: a change point
per signal (the fleet's view) and per replica, found by the same two-sample t statistic
as the onset, but in either direction and on every numeric signal the frame holds. A
change counts when it is strong (the onset's t score), large against its level (the
onset's relative shift) and larger than the signal's absolute floor, and when it falls
between the lead before the onset and the moment diagnosed.

A replica is named when it moved and most of its peers did not (one replica out of line is
the news); when most replicas moved together the fleet's view stands for them.
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np

from signals.frame import FloatArray, SignalFrame
from signals.timeparse import parse_duration
from signals.vocabulary import SIGNALS
from triage.core.model import FirstMover
from triage.core.playbook import Settings

MIN_SEGMENT = 4
LIMIT = 10
BIN = 60.0
"""Change points are searched on one-minute means: a minute's resolution, at a fraction of
the cost on a 15 s grid, binned once per frame and sliced at every moment of a replay."""
STANDS_OUT = 1 / 3
"""A replica's move is named when at most this share of the replicas moved with it."""


def _filled(matrix: FloatArray) -> tuple[FloatArray, np.ndarray]:
    """Rows with gaps filled by their last sample (the first one before it), and which rows
    can be split: enough data, and present from the start like the fleet's view (row 0). A
    replica born inside the window (a rollout's new pod) climbs to its share of the traffic
    from nothing: its birth is no departure."""
    finite = np.isfinite(matrix)
    counts = finite.sum(axis=1)
    ok = counts >= 2 * MIN_SEGMENT
    starts = np.argmax(finite, axis=1)
    ok[1:] &= starts[1:] <= starts[0] + 2
    if finite.all():
        return matrix, ok
    n = matrix.shape[1]
    idx = np.where(finite, np.arange(n)[None, :], -1)
    idx = np.maximum.accumulate(idx, axis=1)
    first = np.argmax(finite, axis=1)
    idx = np.where(idx < 0, first[:, None], idx)
    filled = np.take_along_axis(matrix, idx, axis=1)
    return np.where(np.isfinite(filled), filled, 0.0), ok


def change_points(matrix: FloatArray) -> tuple[np.ndarray, FloatArray, FloatArray, FloatArray]:
    """Per row, the strongest mean shift in either direction: (split index, t score, mean before,
    mean after). Rows are complete (no NaN)."""
    rows, n = matrix.shape
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
    score = np.abs(m2 - m1) / se
    best = np.argmax(score, axis=1)
    pick = np.arange(rows)
    return k[best], score[pick, best], m1[pick, best], m2[pick, best]


def _running_sums(
    frame: SignalFrame, signal: str, width: int, warmup: float
) -> tuple[FloatArray, FloatArray]:
    """Running sums, over whole bins of `width` steps, of the samples and of their count: the
    fleet's view first, then each replica's, over the whole frame (cached on it), so the means
    of any run of bins, at any moment of a replay, are two subtractions away. Steps in the
    warm-up after a birth count as empty."""
    key = ("movers", signal, width, warmup)
    cached = frame.memo.get(key)
    if isinstance(cached, tuple):
        return cached
    view = frame.replicas(signal)
    rows = 1 + view.values.shape[0]
    bins = len(frame.times) // width
    matrix = np.empty((rows, bins * width))
    matrix[0] = frame.fleet(signal)[: bins * width]
    matrix[1:] = view.values[:, : bins * width]
    finite = np.isfinite(matrix)
    finite &= ~frame.warm(warmup)[None, : bins * width]
    matrix[~finite] = 0.0
    sums = np.zeros((rows, bins + 1))
    np.cumsum(matrix.reshape(rows, bins, width).sum(axis=2), axis=1, out=sums[:, 1:])
    counts = np.zeros((rows, bins + 1))
    np.cumsum(finite.reshape(rows, bins, width).sum(axis=2), axis=1, out=counts[:, 1:])
    frame.memo[key] = (sums, counts)
    return sums, counts


def _binned(frame: SignalFrame, signal: str, first: int, last: int, width: int, warmup: float) -> FloatArray:
    """Means of bins `first` to `last` (exclusive), per row; NaN where a bin is empty."""
    sums, counts = _running_sums(frame, signal, width, warmup)
    total = sums[:, first + 1 : last + 1] - sums[:, first:last]
    count = counts[:, first + 1 : last + 1] - counts[:, first:last]
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(count > 0, total / np.maximum(count, 1.0), np.nan)


def _numeric(frame: SignalFrame) -> Iterable[str]:
    for name in frame.signals():
        spec = SIGNALS.get(name)
        if spec is None or spec.kind == "info" or spec.unit == "code":
            continue
        yield name


def first_movers(
    frame: SignalFrame, settings: Settings, onset: float | None, at: float, limit: int = LIMIT
) -> tuple[FirstMover, ...]:
    """The signals and replicas that departed from their baseline around the onset, earliest first."""
    w = settings.windows
    recent = parse_duration(w.recent)
    anchor = onset if onset is not None else at - recent
    start = anchor - parse_duration(w.guard) - parse_duration(w.baseline)
    earliest = anchor - parse_duration(w.lead)
    span = frame.index(start, at)
    width = max(1, round(BIN / frame.step))
    warmup = parse_duration(w.warmup)
    first, last = -(-span.start // width), span.stop // width  # whole bins up to `at`, never past it
    if last - first < 2 * MIN_SEGMENT + 1:
        return ()
    times = frame.times[first * width : last * width : width]
    found: list[tuple[float, float, FirstMover]] = []
    for name in _numeric(frame):
        view = frame.replicas(name)
        binned = _binned(frame, name, first, last, width, warmup)
        matrix = binned if view.values.shape[0] > 1 else binned[:1]
        filled, ok = _filled(matrix)
        split, score, before, after = change_points(filled)
        size = np.abs(after - before)
        relative = size / np.maximum(np.maximum(np.abs(before), np.abs(after)), 1e-12)
        when = times[split]
        moved = (
            ok
            & (score >= settings.onset_min_score)
            & (relative >= settings.onset_min_shift)
            & (size >= settings.floors.get(name, 0.0))
            & (when >= earliest)
            & (when <= at)
        )
        layer = SIGNALS[name].layer
        replicas = view.replicas if matrix.shape[0] > 1 else ()
        movers_at = [i for i in range(1, matrix.shape[0]) if moved[i]]
        if replicas and 0 < len(movers_at) <= max(1, int(STANDS_OUT * len(replicas))):
            for i in movers_at:
                mover = FirstMover(
                    name, replicas[i - 1], layer, float(when[i]), float(before[i]), float(after[i])
                )
                found.append((float(when[i]), -float(score[i]), mover))
        elif moved[0]:
            mover = FirstMover(name, None, layer, float(when[0]), float(before[0]), float(after[0]))
            found.append((float(when[0]), -float(score[0]), mover))
    found.sort(key=lambda f: (f[0], f[1], f[2].signal, f[2].replica or ""))
    return tuple(f[2] for f in found[:limit])


def earliest(movers: tuple[FirstMover, ...], step: float) -> tuple[FirstMover, ...]:
    """The movers that moved first (within two steps of the first one), user-visible signals
    left out: the symptom itself moving first says nothing about its cause."""
    causal = [m for m in movers if m.layer != "user"]
    if not causal:
        return ()
    first = causal[0].moved_at
    return tuple(m for m in causal if m.moved_at <= first + 2 * step)
