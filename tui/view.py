"""What the screen shows, computed without Textual: tiles, the replica table, charts.

Kept apart from the widgets so it can be tested on fixtures and reused by every
widget that needs the same number: a tile, a table cell and a chart agree because
they read one function. Nothing here draws; everything here is a plain value.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

import numpy as np
import numpy.typing as npt

from signals.frame import SignalFrame
from signals.vocabulary import SIGNALS
from triage.core.render import fmt
from triage.rules import Slo

Level = Literal["ok", "warn", "bad", "blind"]
FloatArray = npt.NDArray[np.float64]

DEPARTURE = 1.3
"""A tile turns amber when its value departs this far from its baseline the bad way."""

GPU_EVENTS = ("gpu_throttle", "gpu_xid", "gpu_ecc_errors")

NOISE_FLOOR: dict[str, float] = {"s": 0.02, "ratio": 0.005, "requests": 5.0, "1/s": 0.1, "°C": 3.0}
"""Differences smaller than this (per unit) are noise: no amber tile, no outlier cell."""


SIGNAL_NOISE_FLOOR: dict[str, float] = {"tpot_p99_seconds": 0.005, "tpot_p50_seconds": 0.002}
"""Per-token times live in tens of milliseconds: their floor is finer than other latencies'."""


def _floor(signal: str) -> float:
    if signal in SIGNAL_NOISE_FLOOR:
        return SIGNAL_NOISE_FLOOR[signal]
    return NOISE_FLOOR.get(SIGNALS[signal].unit, 0.0) if signal in SIGNALS else 0.0


@dataclass(frozen=True)
class TileSpec:
    """A tile: the signal it shows, its short label, and the red line it is coloured against."""

    signal: str
    label: str
    red_line: float | None = None


def tile_specs(slo: Slo) -> tuple[TileSpec, ...]:
    """The user-visible and discriminating signals, red lines from the SLO file the alerts use."""
    return (
        TileSpec("ttft_p99_seconds", "TTFT P99", slo.ttft.p99_seconds),
        TileSpec("tpot_p99_seconds", "TPOT P99", slo.tpot.p99_seconds),
        TileSpec("error_ratio", "errors", slo.error_ratio.ratio),
        TileSpec("rejected_ratio", "rejected", slo.rejected_ratio.ratio),
        TileSpec("queue_waiting", "queue"),
        TileSpec("kv_usage_ratio", "KV use", slo.kv_near_full.ratio),
        TileSpec("prefix_hit_ratio", "prefix hit"),
        TileSpec("preemption_rate", "preempt/s", 0.0),
        TileSpec("gpu_health", "GPU health"),
    )


@dataclass(frozen=True)
class Tile:
    """One tile as shown: the value at the cursor, its baseline, a level and recent history."""

    signal: str
    label: str
    value: float | None
    baseline: float | None
    level: Level
    history: tuple[float, ...]
    note: str = ""

    @property
    def value_text(self) -> str:
        return "blind" if self.level == "blind" else format_value(self.value, self.signal, compact=True)

    @property
    def baseline_text(self) -> str:
        return (
            "" if self.baseline is None else f"was {format_value(self.baseline, self.signal, compact=True)}"
        )


def format_value(value: float | None, signal: str, compact: bool = False) -> str:
    """A value with its unit, the way an on-call engineer reads it: 840ms, 93%, 0.8/s.

    `compact` (table cells) keeps only the units a number cannot do without.
    """
    if value is None or not math.isfinite(value):
        return "—"
    unit = SIGNALS[signal].unit if signal in SIGNALS else ""
    if unit == "s":
        return f"{value * 1000:.0f}ms" if abs(value) < 1 else f"{value:.2f}s"
    if unit == "ratio":
        return f"{value * 100:.1f}%" if abs(value) < 0.1 else f"{value * 100:.0f}%"
    if unit == "1/s":
        return f"{fmt(value)}/s"
    if unit == "°C":
        return f"{value:.0f}°C"
    if compact or unit in ("", "1", "0/1", "code", "count"):
        return fmt(value)
    return f"{fmt(value)} {unit}"


def _finite(values: FloatArray) -> FloatArray:
    return values[np.isfinite(values)]


def value_at(series: FloatArray, index: int) -> float | None:
    """The last finite value at or before `index` within two steps (a scrape may be late)."""
    for i in range(index, max(index - 3, -1), -1):
        v = float(series[i])
        if math.isfinite(v):
            return v
    return None


def mean_over(series: FloatArray, window: slice) -> float | None:
    values = _finite(series[window])
    return float(values.mean()) if values.size else None


def _level(value: float | None, baseline: float | None, signal: str, red_line: float | None) -> Level:
    if value is None:
        return "blind"
    worse_up = SIGNALS[signal].higher_is_worse if signal in SIGNALS else True
    if red_line is not None and (value > red_line if worse_up else value < red_line):
        return "bad"
    if baseline is not None and baseline > 0 and abs(value - baseline) >= _floor(signal):
        ratio = value / baseline
        if (worse_up and ratio >= DEPARTURE) or (not worse_up and ratio <= 1 / DEPARTURE):
            return "warn"
    return "ok"


def _history(series: FloatArray, index: int, points: int) -> tuple[float, ...]:
    """The whole window up to the cursor, max-downsampled to `points` so a spike survives."""
    return tuple(float(v) for v in downsample(series[: index + 1], points))


def gpu_health(frame: SignalFrame, index: int) -> tuple[FloatArray | None, list[str]]:
    """How many replicas have a GPU fault (throttle, XID, ECC) at each step, and which at `index`.

    A replica with two kinds of fault counts once. None when no GPU signal is read at all.
    """
    present = [s for s in GPU_EVENTS if frame.has(s)]
    if not present:
        return None, []
    steps = len(frame.times)
    by_replica: dict[str, npt.NDArray[np.bool_]] = {}
    fleet_only = np.zeros(steps, dtype=bool)
    for signal in present:
        view = frame.replicas(signal)
        if not view.replicas:
            fleet_only |= np.nan_to_num(frame.fleet(signal)) > 0
            continue
        bad = np.nan_to_num(view.values) > 0
        for i, replica in enumerate(view.replicas):
            by_replica[replica] = by_replica.get(replica, np.zeros(steps, dtype=bool)) | bad[i]
    counts = np.zeros(steps, dtype=np.float64)
    for row in by_replica.values():
        counts += row
    counts = np.maximum(counts, fleet_only.astype(np.float64))
    return counts, sorted(r for r, row in by_replica.items() if row[index])


def tiles(
    frame: SignalFrame,
    at: float,
    baseline_window: tuple[float, float] | None,
    specs: tuple[TileSpec, ...],
    points: int = 120,
) -> list[Tile]:
    """Every tile at the moment `at`; a signal the frame lacks is `blind`, never healthy."""
    index = frame.position(at)
    window = frame.index(*baseline_window) if baseline_window else None
    out: list[Tile] = []
    for spec in specs:
        if spec.signal == "gpu_health":
            faulty, now = gpu_health(frame, index)
            if faulty is None:
                out.append(Tile(spec.signal, spec.label, None, None, "blind", ()))
                continue
            count = float(faulty[index])
            level: Level = "bad" if count > 0 else "ok"
            note = ", ".join(now[:2]) + (" …" if len(now) > 2 else "") if now else "no faults"
            out.append(
                Tile(spec.signal, spec.label, count, None, level, _history(faulty, index, points), note)
            )
            continue
        if not frame.has(spec.signal):
            out.append(Tile(spec.signal, spec.label, None, None, "blind", ()))
            continue
        series = frame.fleet(spec.signal)
        value = value_at(series, index)
        baseline = mean_over(series, window) if window is not None else None
        out.append(
            Tile(
                spec.signal,
                spec.label,
                value,
                baseline,
                _level(value, baseline, spec.signal, spec.red_line),
                _history(series, index, points),
            )
        )
    return out


REPLICA_COLUMNS: tuple[tuple[str, str], ...] = (
    ("ttft_p99_seconds", "TTFT99"),
    ("tpot_p99_seconds", "TPOT99"),
    ("queue_waiting", "queue"),
    ("kv_usage_ratio", "KV"),
    ("prefix_hit_ratio", "hit"),
    ("preemption_rate", "preempt"),
    ("gpu_util_ratio", "GPU%"),
    ("gpu_temp_celsius", "temp"),
    ("error_ratio", "err"),
)


@dataclass(frozen=True)
class ReplicaRow:
    """One replica at the cursor: its values per column, which stand out, and whether it vanished."""

    replica: str
    values: tuple[float | None, ...]
    outliers: frozenset[int]
    vanished: bool
    gpu_fault: bool

    @property
    def flagged(self) -> bool:
        return self.vanished or self.gpu_fault or bool(self.outliers)


def _outliers(values: list[float | None], worse_up: bool, floor: float = 0.0) -> set[int]:
    """Replicas far worse than their peers: robust z above 3.5, at least 25 % and `floor` off the median."""
    finite = np.array([v for v in values if v is not None], dtype=np.float64)
    if finite.size < 3:
        return set()
    median = float(np.median(finite))
    mad = float(np.median(np.abs(finite - median))) * 1.4826
    spread = max(mad, abs(median) * 0.05, 1e-9)
    out = set()
    for i, v in enumerate(values):
        if v is None:
            continue
        z = (v - median) / spread
        worse = z > 3.5 if worse_up else z < -3.5
        if worse and abs(v - median) >= max(0.25 * abs(median), floor, 1e-9):
            out.add(i)
    return out


def replica_rows(frame: SignalFrame, at: float) -> tuple[tuple[tuple[str, str], ...], list[ReplicaRow]]:
    """The replica table at `at`: columns present in the frame, one row per replica ever seen."""
    index = frame.position(at)
    columns = tuple(c for c in REPLICA_COLUMNS if frame.replicas(c[0]).replicas)
    names, present = frame.presence()
    per_column: list[dict[str, float | None]] = []
    for signal, _ in columns:
        view = frame.replicas(signal)
        per_column.append({r: value_at(view.values[i], index) for i, r in enumerate(view.replicas)})
    outliers: dict[str, set[int]] = {n: set() for n in names}
    for ci, (signal, _) in enumerate(columns):
        vals = [per_column[ci].get(n) for n in names]
        for ri in _outliers(vals, SIGNALS[signal].higher_is_worse, _floor(signal)):
            outliers[names[ri]].add(ci)
    _, faulty_now = gpu_health(frame, index)
    faulty = set(faulty_now)
    lo = max(0, index - 2)
    rows = []
    for ri, name in enumerate(names):
        seen_before = bool(present[ri, : index + 1].any())
        vanished = seen_before and not bool(present[ri, lo : index + 1].any())
        rows.append(
            ReplicaRow(
                name,
                tuple(per_column[ci].get(name) for ci in range(len(columns))),
                frozenset(outliers[name]),
                vanished,
                name in faulty,
            )
        )
    return columns, rows


@dataclass(frozen=True)
class ChartData:
    """One signal over the window, for the drill-down: fleet and per-replica rows, markers."""

    signal: str
    times: FloatArray
    fleet: FloatArray
    replicas: tuple[str, ...]
    replica_values: FloatArray
    baseline: float | None
    baseline_window: tuple[float, float] | None
    onset: float | None
    at: float


def chart_data(
    frame: SignalFrame,
    signal: str,
    at: float,
    baseline_window: tuple[float, float] | None,
    onset: float | None,
) -> ChartData:
    """The signal up to `at`, with the baseline mean over the diagnosis's baseline window."""
    end = frame.position(at) + 1
    fleet = frame.fleet(signal) if frame.has(signal) else np.full(len(frame.times), np.nan)
    view = frame.replicas(signal)
    baseline = mean_over(fleet, frame.index(*baseline_window)) if baseline_window else None
    return ChartData(
        signal,
        frame.times[:end],
        fleet[:end],
        view.replicas,
        view.values[:, :end] if view.replicas else np.empty((0, end)),
        baseline,
        baseline_window,
        onset,
        at,
    )


BLOCKS = " ▁▂▃▄▅▆▇█"


def downsample(values: FloatArray, width: int) -> FloatArray:
    """At most `width` points, each the max of its bucket, so a spike is never averaged away."""
    if values.size <= width or width <= 0:
        return values
    edges = np.linspace(0, values.size, width + 1).astype(int)
    out = np.empty(width)
    for i in range(width):
        chunk = values[edges[i] : max(edges[i + 1], edges[i] + 1)]
        finite = chunk[np.isfinite(chunk)]
        out[i] = finite.max() if finite.size else np.nan
    return out


def spark(
    values: FloatArray | tuple[float, ...], width: int, lo: float | None = None, hi: float | None = None
) -> str:
    """One line of block characters; a gap (no data) is a space, never a zero."""
    data = downsample(np.asarray(values, dtype=np.float64), width)
    finite = data[np.isfinite(data)]
    if not finite.size:
        return " " * min(width, data.size)
    low = float(finite.min()) if lo is None else lo
    high = float(finite.max()) if hi is None else hi
    span = high - low
    chars = []
    for v in data:
        if not math.isfinite(v):
            chars.append(" ")
        elif span <= 0:
            chars.append(BLOCKS[4])
        else:
            chars.append(BLOCKS[1 + min(7, int((v - low) / span * 7.999))])
    return "".join(chars)


def plot_rows(values: FloatArray, width: int, height: int, lo: float, hi: float) -> list[list[int]]:
    """A column chart as a grid of eighths: rows top to bottom, each cell 0 (empty) to 8 (full)."""
    data = downsample(values, width)
    span = hi - lo if hi > lo else 1.0
    grid = [[0] * data.size for _ in range(height)]
    for x, v in enumerate(data):
        if not math.isfinite(v):
            continue
        eighths = round(max(0.0, min(1.0, (v - lo) / span)) * height * 8)
        for row in range(height):
            from_bottom = height - 1 - row
            grid[row][x] = max(0, min(8, eighths - from_bottom * 8))
    return grid
