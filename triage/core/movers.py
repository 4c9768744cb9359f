"""First movers: which signals and replicas left their baseline around the onset, in order.

The second opinion beside every verdict, and the answer when no cause fits: a change point
per signal (the fleet's view) and per replica, found by the same two-sample t statistic
as the onset, but in either direction and on every numeric signal the frame holds. A
change counts when it is strong (the onset's t score), large against its level (the
onset's relative shift) and larger than the signal's absolute floor, and when it falls
between the lead before the onset and the moment diagnosed.

A replica is named when it moved and most of its peers did not (one replica out of line is
the news); when most replicas moved together the fleet's view stands for them. Only the
replicas whose level shifted at all (half the floor and half the relative shift, after
against before) are searched, so a quiet fleet of 64 costs little more than its fleet view.
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np

from signals.frame import FloatArray, SignalFrame
from signals.timeparse import parse_duration
from signals.vocabulary import SIGNALS
from triage.core.model import FirstMover
from triage.core.playbook import Settings
from triage.core.windows import MIN_SEGMENT, split_statistics

LIMIT = 10
BIN = 60.0
"""Change points are searched on one-minute means: a minute's resolution, at a fraction of
the cost on a 15 s grid, binned once per frame and sliced at every moment of a replay."""
STANDS_OUT = 1 / 3
"""A replica's move is named when at most this share of the replicas moved with it."""


def _filled(matrix: FloatArray) -> tuple[FloatArray, np.ndarray, np.ndarray]:
    """Rows with gaps filled by their last sample (the first one before it), which rows have
    enough data to split, and where each row's data starts."""
    finite = np.isfinite(matrix)
    counts = finite.sum(axis=1)
    ok = counts >= 2 * MIN_SEGMENT
    starts = np.argmax(finite, axis=1)
    if finite.all():
        return matrix, ok, starts
    n = matrix.shape[1]
    idx = np.where(finite, np.arange(n)[None, :], -1)
    idx = np.maximum.accumulate(idx, axis=1)
    first = np.argmax(finite, axis=1)
    idx = np.where(idx < 0, first[:, None], idx)
    filled = np.take_along_axis(matrix, idx, axis=1)
    return np.where(np.isfinite(filled), filled, 0.0), ok, starts


def change_points(matrix: FloatArray) -> tuple[np.ndarray, FloatArray, FloatArray, FloatArray]:
    """Per row, the strongest mean shift in either direction: (split index, t score, mean before,
    mean after). Rows are complete (no NaN)."""
    k, m1, m2, se = split_statistics(matrix)
    score = np.abs(m2 - m1) / se
    best = np.argmax(score, axis=1)
    pick = np.arange(matrix.shape[0])
    return k[best], score[pick, best], m1[pick, best], m2[pick, best]


def _running_sums(
    frame: SignalFrame, signal: str, width: int, phase: int, warmup: float, origin: int
) -> tuple[int, FloatArray, FloatArray, tuple[str, ...]]:
    """Running sums, over whole bins of `width` steps from bin `origin` to the frame's end, of
    the samples and of their count: the fleet's view first, then each replica's (cached on the
    frame, and kept when a later moment asks for fewer bins), so the means of any run of bins,
    at any moment of a replay, are two subtractions away. Steps in the warm-up after a birth
    count as empty. Gives back the origin the sums start at, and the replicas' names."""
    key = ("movers", signal, width, phase, warmup)
    cached = frame.memo.get(key)
    if isinstance(cached, tuple) and cached[0] <= origin:
        return cached
    bins = (len(frame.times) - phase) // width - origin
    span = slice(phase + origin * width, phase + (origin + bins) * width)
    fleet, view = frame.views_between(signal, span)
    rows = 1 + view.values.shape[0]
    matrix = np.empty((rows, bins * width))
    matrix[0] = fleet
    matrix[1:] = view.values
    finite = np.isfinite(matrix)
    finite &= ~frame.warm(warmup)[None, span]
    matrix[~finite] = 0.0
    sums = np.zeros((rows, bins + 1))
    np.cumsum(matrix.reshape(rows, bins, width).sum(axis=2), axis=1, out=sums[:, 1:])
    counts = np.zeros((rows, bins + 1))
    np.cumsum(finite.reshape(rows, bins, width).sum(axis=2), axis=1, out=counts[:, 1:])
    frame.memo[key] = (origin, sums, counts, view.replicas)
    return origin, sums, counts, view.replicas


class _Sums:
    """One signal's running sums over bins `first` to `last` of a moment: means of any run of
    bins for any rows, two subtractions away."""

    def __init__(
        self, frame: SignalFrame, signal: str, first: int, last: int, width: int, phase: int, warmup: float
    ):
        origin, self.sums, self.counts, self.names = _running_sums(frame, signal, width, phase, warmup, first)
        self.first, self.last = first - origin, last - origin

    def means(self, rows: list[int] | slice, a: int | np.ndarray, b: int | np.ndarray) -> FloatArray:
        """Per row, the mean of bins `a` to `b` (relative to `first`; arrays of them give one mean
        each); NaN where none has a sample."""
        sums, counts = self.sums[rows], self.counts[rows]
        total = sums[:, b + self.first] - sums[:, a + self.first]
        count = counts[:, b + self.first] - counts[:, a + self.first]
        with np.errstate(invalid="ignore", divide="ignore"):
            return np.where(count > 0, total / np.maximum(count, 1.0), np.nan)

    def binned(self, rows: list[int]) -> FloatArray:
        """The means of every bin, per row (NaN where a bin is empty)."""
        edges = np.arange(self.last - self.first + 1)
        return self.means(rows, edges[:-1], edges[1:])

    def shifted(self, split_at: int, floor: float, shift: float) -> list[int]:
        """The replicas (row indices, the fleet's view being row 0) whose level after `split_at`
        (all of it, or its last bins) differs from before by half the floor and half the relative
        shift a change point needs: the ones worth searching, the others being as they were."""
        n = self.last - self.first
        if len(self.names) < 2 or split_at <= 0 or split_at >= n:
            return []
        rows = slice(1, None)
        before = self.means(rows, 0, split_at)
        moved = np.zeros(len(self.names), dtype=bool)
        for level in (self.means(rows, split_at, n), self.means(rows, max(split_at, n - MIN_SEGMENT), n)):
            size = np.abs(level - before)
            relative = size / np.maximum(np.maximum(np.abs(level), np.abs(before)), 1e-12)
            moved |= (size >= floor / 2) & (relative >= shift / 2)
        return [int(i) + 1 for i in np.flatnonzero(moved)]


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
    # bins start on whole minutes of the clock, whatever step the data starts on, so where the
    # history begins never moves a change from one bin to the next
    phase = round(((-frame.times[0]) % BIN) / frame.step) % width
    # whole bins up to `at`, never past it
    first, last = -(-(span.start - phase) // width), (span.stop - phase) // width
    if last - first < 2 * MIN_SEGMENT + 1:
        return ()
    times = frame.times[phase + first * width : phase + last * width : width]
    split_at = int(np.searchsorted(times, earliest))
    blocks: list[tuple[str, tuple[str, ...], int, int]] = []
    matrices: list[FloatArray] = []
    offset = 0
    for name in _numeric(frame):
        sums = _Sums(frame, name, first, last, width, phase, warmup)
        shifted = sums.shifted(split_at, settings.floors.get(name, 0.0), settings.onset_min_shift)
        # a replica is news only when few moved; when many did, the fleet's view stands for them
        if 0 < len(shifted) <= max(1, int(STANDS_OUT * len(sums.names))):
            matrix = sums.binned([0, *shifted])
            replicas = tuple(sums.names[i - 1] for i in shifted)
        else:
            matrix, replicas = sums.binned([0]), ()
        blocks.append((name, replicas, offset, matrix.shape[0]))
        matrices.append(matrix)
        offset += matrix.shape[0]
    if not matrices:
        return ()
    # every signal's rows in one search: one pass of the statistic, however many signals
    filled, ok_all, starts = _filled(np.vstack(matrices))
    split_all, score_all, before_all, after_all = change_points(filled)
    size_all = np.abs(after_all - before_all)
    relative_all = size_all / np.maximum(np.maximum(np.abs(before_all), np.abs(after_all)), 1e-12)
    when_all = times[split_all]
    strong = (
        ok_all
        & (score_all >= settings.onset_min_score)
        & (relative_all >= settings.onset_min_shift)
        & (when_all >= earliest)
        & (when_all <= at)
    )
    found: list[tuple[float, float, FirstMover]] = []
    for name, replicas, offset, rows in blocks:
        block = slice(offset, offset + rows)
        score, before, after, when = score_all[block], before_all[block], after_all[block], when_all[block]
        moved = strong[block] & (size_all[block] >= settings.floors.get(name, 0.0))
        # a replica born inside the window (a rollout's new pod) climbs to its share of the
        # traffic from nothing: its birth is no departure
        moved[1:] &= starts[block][1:] <= starts[offset] + 2
        layer = SIGNALS[name].layer
        movers_at = [i for i in range(1, rows) if moved[i]]
        if movers_at:
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
