"""SignalFrame: every signal series of an incident on one regular time grid.

Fixtures and live Prometheus range queries both land here, so the triage core sees one
shape whatever the source: a vector of timestamps and, per vocabulary signal, a matrix
of series (one row each) with their labels. NaN means "no sample at this step" and is
never read as zero. A series with an `instance` label is one replica's view; one
without it is the fleet's view. Fleet and per-replica views are derived on demand with
the aggregation the vocabulary gives each signal, and cached, because a replay asks
for the same views hundreds of times.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np
import numpy.typing as npt

from signals.vocabulary import REPLICA_LABEL, SIGNALS, Aggregation

if TYPE_CHECKING:
    import pandas as pd

FloatArray = npt.NDArray[np.float64]
BoolArray = npt.NDArray[np.bool_]
Labels = tuple[tuple[str, str], ...]


@dataclass(frozen=True)
class Series:
    """One series: a vocabulary signal, its labels (sorted, no __name__) and its samples."""

    signal: str
    labels: Labels
    values: FloatArray

    @property
    def label_map(self) -> dict[str, str]:
        return dict(self.labels)

    @property
    def replica(self) -> str | None:
        return self.label_map.get(REPLICA_LABEL)


def aggregate(matrix: FloatArray, how: Aggregation) -> FloatArray:
    """Combine rows column by column, ignoring NaN; an all-NaN column stays NaN."""
    if matrix.shape[0] == 0:
        return np.full(matrix.shape[1], np.nan)
    if matrix.shape[0] == 1:
        return np.asarray(matrix[0], dtype=np.float64).copy()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", category=RuntimeWarning)
        if how == "sum":
            present = np.isfinite(matrix).any(axis=0)
            return np.where(present, np.nansum(matrix, axis=0), np.nan)
        if how == "mean":
            return np.asarray(np.nanmean(matrix, axis=0), dtype=np.float64)
        if how == "max":
            return np.asarray(np.nanmax(matrix, axis=0), dtype=np.float64)
        return _column_medians(matrix)


def _column_medians(matrix: FloatArray) -> FloatArray:
    """Median of each column ignoring NaN (NaN where a column has no sample).

    np.nanmedian takes a masked-array path when a column holds NaN, which costs a hundred
    times more on a frame whose first minutes are empty; a sort does the same in one pass.
    """
    gaps = np.isnan(matrix)
    if not gaps.any():
        return np.asarray(np.median(matrix, axis=0), dtype=np.float64)
    ordered = np.sort(matrix, axis=0)  # NaN sort last
    count = (~gaps).sum(axis=0)
    low = np.clip((count - 1) // 2, 0, None)[None, :]
    high = np.clip(count // 2, 0, None)[None, :]
    middle = (np.take_along_axis(ordered, low, axis=0) + np.take_along_axis(ordered, high, axis=0))[0] / 2
    return np.where(count > 0, middle, np.nan)


@dataclass(frozen=True)
class ReplicaView:
    """Per-replica series of one signal: replica names (sorted) and one row each."""

    replicas: tuple[str, ...]
    values: FloatArray


@dataclass
class SignalFrame:
    """All series of an incident on a shared, regular time grid (epoch seconds)."""

    times: FloatArray
    series: list[Series]
    source: str = ""
    stand_ins: Mapping[str, str] = field(default_factory=dict)
    """Signal -> what its source really measures, where that is a stand-in (`SourceSpec.stands_in`)."""
    _by_signal: dict[str, list[Series]] = field(init=False, repr=False)
    _fleet: dict[str, FloatArray] = field(init=False, repr=False, default_factory=dict)
    _replicas: dict[str, ReplicaView] = field(init=False, repr=False, default_factory=dict)
    _has: dict[str, bool] = field(init=False, repr=False, default_factory=dict)
    _presence: tuple[tuple[str, ...], npt.NDArray[np.bool_]] | None = field(
        init=False, repr=False, default=None
    )
    memo: dict[object, object] = field(init=False, repr=False, default_factory=dict)
    """What readers derive from the frame once and reuse at every moment of a replay (binned
    views, the tenants it holds); keyed by the reader, never read by the frame itself."""

    def __post_init__(self) -> None:
        self.times = np.asarray(self.times, dtype=np.float64)
        by_signal: dict[str, list[Series]] = {}
        for s in self.series:
            if s.values.shape != self.times.shape:
                raise ValueError(
                    f"series {s.signal}{dict(s.labels)} has {s.values.shape[0]} samples, "
                    f"the grid has {self.times.shape[0]}"
                )
            by_signal.setdefault(s.signal, []).append(s)
        for rows in by_signal.values():
            rows.sort(key=lambda s: s.labels)
        self._by_signal = by_signal

    @property
    def step(self) -> float:
        return float(self.times[1] - self.times[0]) if len(self.times) > 1 else 60.0

    @property
    def start(self) -> float:
        return float(self.times[0])

    @property
    def end(self) -> float:
        return float(self.times[-1])

    def signals(self) -> list[str]:
        """Names of the signals that hold at least one sample."""
        return sorted(
            name for name, rows in self._by_signal.items() if any(np.isfinite(s.values).any() for s in rows)
        )

    def has(self, signal: str) -> bool:
        """Whether any series of the signal holds a sample (cached: asked by every check)."""
        known = self._has.get(signal)
        if known is None:
            known = any(np.isfinite(s.values).any() for s in self._by_signal.get(signal, []))
            self._has[signal] = known
        return known

    def rows(self, signal: str) -> list[Series]:
        """Every series of one signal, sorted by labels."""
        return list(self._by_signal.get(signal, []))

    def index(self, t0: float, t1: float) -> slice:
        """The grid steps with t0 <= time <= t1."""
        i0 = int(np.searchsorted(self.times, t0, side="left"))
        i1 = int(np.searchsorted(self.times, t1, side="right"))
        return slice(i0, max(i0, i1))

    def position(self, t: float) -> int:
        """The last grid step at or before t (0 when t is before the grid)."""
        return max(0, int(np.searchsorted(self.times, t, side="right")) - 1)

    def _how(self, signal: str) -> Aggregation:
        spec = SIGNALS.get(signal)
        return spec.fleet if spec is not None else "mean"

    def replicas(self, signal: str) -> ReplicaView:
        """One row per replica; several series of one replica (GPUs, tenants) combined."""
        cached = self._replicas.get(signal)
        if cached is not None:
            return cached
        view = self._replica_view(signal, slice(None))
        self._replicas[signal] = view
        return view

    def _replica_view(self, signal: str, span: slice) -> ReplicaView:
        """One row per replica over a span of steps, built (not cached)."""
        groups: dict[str, list[FloatArray]] = {}
        for s in self._by_signal.get(signal, []):
            name = s.replica
            if name is not None:
                groups.setdefault(name, []).append(s.values[span])
        names = tuple(sorted(groups))
        how = self._how(signal)
        if names and all(len(groups[n]) == 1 for n in names):
            matrix = np.vstack([groups[n][0] for n in names])  # one series a replica: nothing to combine
        elif names:
            matrix = np.vstack([aggregate(np.vstack(groups[n]), how) for n in names])
        else:
            matrix = np.empty((0, len(self.times[span])))
        return ReplicaView(names, matrix)

    def views_between(self, signal: str, span: slice) -> tuple[FloatArray, ReplicaView]:
        """The fleet's view and the replicas' over a span of steps: sliced from the cached whole
        views where they exist, else built for the span alone (a reader that scans every signal
        over the last hours need not build six hours of each)."""
        if signal in self._replicas and signal in self._fleet:
            view = self._replicas[signal]
            return self._fleet[signal][span], ReplicaView(view.replicas, view.values[:, span])
        view = self._replica_view(signal, span)
        return self._fleet_of(signal, span, lambda: view.values), view

    def fleet(self, signal: str) -> FloatArray:
        """The fleet's view: its own series when present, else the replicas combined."""
        cached = self._fleet.get(signal)
        if cached is not None:
            return cached
        values = self._fleet_of(signal, slice(None), lambda: self.replicas(signal).values)
        self._fleet[signal] = values
        return values

    def _fleet_of(self, signal: str, span: slice, replica_rows: Callable[[], FloatArray]) -> FloatArray:
        """The fleet's view over a span: its own series when present, else the replicas' rows
        (asked for only then) combined."""
        how = self._how(signal)
        own = [s.values[span] for s in self._by_signal.get(signal, []) if s.replica is None]
        return aggregate(np.vstack(own), how) if own else aggregate(replica_rows(), how)

    def across_replicas(self, signal: str, how: Aggregation) -> FloatArray:
        """The replicas combined step by step with `how` (the worst replica: max), cached.

        Unlike `fleet`, this ignores the fleet's own series: it asks what the replicas say.
        Falls back to the fleet view when the signal has no per-replica series.
        """
        key = f"{signal}/{how}"
        cached = self._fleet.get(key)
        if cached is not None:
            return cached
        rows = self.replicas(signal).values
        values = aggregate(rows, how) if rows.shape[0] else self.fleet(signal)
        self._fleet[key] = values
        return values

    def replica_names(self) -> tuple[str, ...]:
        """Every replica that appears in any per-replica series."""
        names = {s.replica for rows in self._by_signal.values() for s in rows if s.replica is not None}
        return tuple(sorted(n for n in names if n is not None))

    def presence(self) -> tuple[tuple[str, ...], npt.NDArray[np.bool_]]:
        """Which replica reports any signal at each step: names, and a replicas × steps mask (cached)."""
        if self._presence is None:
            names = self.replica_names()
            index = {n: i for i, n in enumerate(names)}
            present = np.zeros((len(names), len(self.times)), dtype=bool)
            for rows in self._by_signal.values():
                for s in rows:
                    name = s.replica
                    if name is not None:
                        present[index[name]] |= np.isfinite(s.values)
            self._presence = (names, present)
        return self._presence

    def births(self, min_gap: int = 2) -> tuple[float, ...]:
        """When the data begins: the first step holding any sample, and every step where samples
        resume after at least `min_gap` empty steps (a restarted Prometheus, a backfill that
        starts mid-window). Before a birth there is no history to compare with."""
        key = ("births", min_gap)
        cached = self.memo.get(key)
        if isinstance(cached, tuple):
            return cached
        found = self._births(min_gap)
        self.memo[key] = found
        return found

    def _births(self, min_gap: int) -> tuple[float, ...]:
        if not self.series:
            return ()
        present = np.zeros(len(self.times), dtype=bool)
        for s in self.series:
            present |= np.isfinite(s.values)
        if not present.any():
            return ()
        out = [float(self.times[int(np.argmax(present))])]
        idx = np.flatnonzero(present)
        gaps = np.flatnonzero(np.diff(idx) > min_gap)
        out += [float(self.times[idx[g + 1]]) for g in gaps]
        return tuple(out)

    def warm(self, warmup: float) -> BoolArray:
        """The steps within `warmup` seconds after a birth (cached): rates and windowed quantiles
        read low there while their windows fill, and that climb is no change of the system."""
        key = ("warm", warmup)
        cached = self.memo.get(key)
        if isinstance(cached, np.ndarray):
            return cached
        warm = np.zeros(len(self.times), dtype=bool)
        if warmup > 0:
            for born in self.births():
                warm |= (self.times >= born) & (self.times < born + warmup)
        self.memo[key] = warm
        return warm

    def to_pandas(self, signal: str) -> pd.DataFrame:
        # Imported here: pandas costs a fifth of a second at start-up and only this needs it.
        import pandas as pd

        """One signal as a DataFrame: a UTC time index, one column per series."""
        rows = self._by_signal.get(signal, [])
        columns = {",".join(f"{k}={v}" for k, v in s.labels) or "fleet": s.values for s in rows}
        index = pd.to_datetime(self.times, unit="s", utc=True)
        return pd.DataFrame(columns, index=index)


def build_frame(times: Iterable[float], series: Iterable[Series], source: str = "") -> SignalFrame:
    """A frame from a time grid and series already sampled on it."""
    return SignalFrame(np.asarray(list(times), dtype=np.float64), list(series), source)


def labels_of(mapping: Mapping[str, str]) -> Labels:
    """Canonical label tuple: sorted, without __name__."""
    return tuple(sorted((k, v) for k, v in mapping.items() if k != "__name__"))
