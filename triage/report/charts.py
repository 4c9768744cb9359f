"""Line charts as SVG text, drawn from numpy arrays by this module alone.

A postmortem report must open offline, print, and compare byte for byte in golden
tests, so charts cannot come from a JavaScript library or a plotting backend whose
output shifts between versions: they are plain SVG strings built here, deterministic
for the same arrays. Every colour is set twice: as a presentation attribute, so the SVG
reads on its own (pasted in a wiki, where `currentColor` follows the page's text), and
by class, so the HTML report's stylesheet can restyle it for dark mode and print (CSS
wins over presentation attributes). Every piece of text is XML-escaped: replica names
and titles come from recorded incidents, not from us.

Thousands of samples per series become at most two points per pixel-wide bucket, the
minimum and the maximum in time order, so a spike one sample wide still shows and the
global extremes of every series survive downsampling.
"""

from __future__ import annotations

import datetime as dt
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from html import escape
from typing import Literal

import numpy as np
import numpy.typing as npt

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.intp]

WIDTH = 760
HEIGHT = 270
TOP = 44
BOTTOM = 58
LEFT = 58
RIGHT_NARROW = 18
RIGHT_AXIS = 58
FONT = 11
REPLICA_BUCKETS = 120
FLEET_BUCKETS = 240
LABEL_GAP = 78

TIME_STEPS = (60, 120, 300, 600, 900, 1800, 3600, 7200, 10800, 21600, 43200, 86400, 172800, 604800)

COLOURS = {
    "replica": "#868e96",
    "hot": "#e8590c",
    "fleet": "#1c7ed6",
    "band": "#2f9e44",
    "onset": "#e03131",
    "turned": "#7048e8",
    "settled": "#9c36b5",
    "at": "#495057",
}


@dataclass(frozen=True)
class Marker:
    """A moment drawn as a vertical line with its label: the onset, the diagnosis turning."""

    at: float
    label: str
    kind: Literal["onset", "turned", "settled", "at"]


@dataclass(frozen=True)
class Band:
    """The baseline's normal range (low..high) and the window [start, end] it was read over."""

    low: float
    high: float
    start: float
    end: float


@dataclass(frozen=True, eq=False)
class LineChart:
    """Everything one chart shows; arrays are used as given (the caller owns the data)."""

    title: str
    unit: str
    times: FloatArray
    fleet: FloatArray | None = None
    fleet_label: str = "fleet"
    replica_names: tuple[str, ...] = ()
    replicas: FloatArray = field(default_factory=lambda: np.empty((0, 0)))
    band: Band | None = None
    markers: tuple[Marker, ...] = ()
    highlight: frozenset[str] = frozenset()
    fleet_axis: Literal["left", "right"] = "left"
    css_class: str = "chart"
    data: tuple[tuple[str, str], ...] = ()


def downsample(times: FloatArray, values: FloatArray, buckets: int) -> tuple[FloatArray, FloatArray]:
    """Per row, the minimum and the maximum of each of `buckets` time buckets, in time order.

    `values` is 1-D (one series) or 2-D (rows × len(times)); the answer has the same rank,
    with times per row because each row's extremes fall at different moments. A bucket
    with no sample yields NaN in both arrays (a gap the line breaks at). Series short
    enough already come back unchanged.
    """
    one = values.ndim == 1
    matrix = np.atleast_2d(np.asarray(values, dtype=np.float64))
    rows, n = matrix.shape
    if buckets < 1:
        raise ValueError("buckets must be at least 1")
    if n <= 2 * buckets:
        t = np.broadcast_to(times, matrix.shape).astype(np.float64)
        v = matrix.copy()
        return (t[0], v[0]) if one else (t, v)
    size = math.ceil(n / buckets)
    count = math.ceil(n / size)
    padded = np.full((rows, count * size), np.nan)
    padded[:, :n] = matrix
    padded_t = np.full(count * size, np.nan)
    padded_t[:n] = times
    cube = padded.reshape(rows, count, size)
    valid = np.isfinite(cube)
    lo = np.where(valid, cube, np.inf).argmin(axis=2)
    hi = np.where(valid, cube, -np.inf).argmax(axis=2)
    offsets = (np.arange(count) * size)[None, :]
    pair = np.stack([np.minimum(lo, hi), np.maximum(lo, hi)], axis=2) + offsets[:, :, None]
    index: IntArray = pair.reshape(rows, 2 * count)
    v = np.take_along_axis(padded, index, axis=1)
    t = padded_t[index]
    empty = np.repeat(~valid.any(axis=2), 2, axis=1)
    v[empty] = np.nan
    t[empty] = np.nan
    return (t[0], v[0]) if one else (t, v)


def nice_ticks(low: float, high: float, count: int = 5) -> list[float]:
    """Round tick values (1, 2, 2.5 or 5 × 10^k apart) covering [low, high]."""
    if not (math.isfinite(low) and math.isfinite(high)):
        return [0.0, 1.0]
    if high <= low:
        pad = abs(low) * 0.1 or 1.0
        low, high = low - pad, high + pad
    raw = (high - low) / max(count - 1, 1)
    power = 10 ** math.floor(math.log10(raw))
    step = next(m * power for m in (1, 2, 2.5, 5, 10) if m * power >= raw - 1e-12)
    first = math.floor(low / step + 1e-9) * step
    last = math.ceil(high / step - 1e-9) * step
    n = round((last - first) / step)
    return [round(first + i * step, 12) for i in range(n + 1)]


def time_ticks(start: float, end: float, most: int = 8) -> list[float]:
    """Tick instants on round UTC minutes or hours, at most `most` of them across [start, end]."""
    span = max(end - start, 1.0)
    step = next((s for s in TIME_STEPS if span / s <= most), TIME_STEPS[-1])
    first = math.ceil(start / step) * step
    return [float(t) for t in np.arange(first, end + 1e-6, step)]


def time_label(t: float, span: float) -> str:
    """HH:MM (UTC); with the date when the chart spans more than a day."""
    moment = dt.datetime.fromtimestamp(t, tz=dt.UTC)
    return moment.strftime("%m-%d %H:%M" if span > 86400 else "%H:%M")


def number_label(value: float) -> str:
    """A tick value, short: 0.25, 1.5k, 2M."""
    if value == 0:
        return "0"
    size = abs(value)
    if size >= 1e6:
        return f"{value / 1e6:.3g}M"
    if size >= 1e4:
        return f"{value / 1e3:.3g}k"
    return f"{value:.4g}"


def _coord(value: float) -> str:
    return f"{value:.1f}".removesuffix(".0")


def _path(xs: FloatArray, ys: FloatArray) -> str:
    """Path data with a new subpath after each gap (NaN), pairs as implicit line-tos."""
    parts: list[str] = []
    pen_up = True
    for x, y in zip(xs.tolist(), ys.tolist(), strict=True):
        if x != x or y != y:
            pen_up = True
            continue
        parts.append(("M" if pen_up else "") + _coord(x) + " " + _coord(y))
        pen_up = False
    return " ".join(parts)


class _Scale:
    """Linear map from data to pixels."""

    def __init__(self, d0: float, d1: float, p0: float, p1: float) -> None:
        self.d0, self.p0 = d0, p0
        self.k = (p1 - p0) / (d1 - d0) if d1 != d0 else 0.0

    def __call__(self, value: FloatArray) -> FloatArray:
        return np.asarray(self.p0 + (value - self.d0) * self.k, dtype=np.float64)

    def one(self, value: float) -> float:
        return self.p0 + (value - self.d0) * self.k


def _extent(*arrays: FloatArray | None, extra: Sequence[float] = ()) -> tuple[float, float] | None:
    lows, highs = [], []
    for a in arrays:
        if a is not None and a.size and np.isfinite(a).any():
            lows.append(float(np.nanmin(a)))
            highs.append(float(np.nanmax(a)))
    lows.extend(extra)
    highs.extend(extra)
    if not lows:
        return None
    low, high = min(lows), max(highs)
    if low >= 0 and low <= 0.25 * high:
        low = 0.0
    return low, high


def render_svg(chart: LineChart) -> str:
    """The chart as one `<svg class="chart">` element, no blank lines (safe in a Markdown HTML block)."""
    times = np.asarray(chart.times, dtype=np.float64)
    right_axis = chart.fleet_axis == "right" and chart.fleet is not None
    right = RIGHT_AXIS if right_axis else RIGHT_NARROW
    x0, x1, y0, y1 = LEFT, WIDTH - right, TOP, HEIGHT - BOTTOM
    out: list[str] = []
    data = "".join(f' data-{escape(k)}="{escape(v)}"' for k, v in chart.data)
    out.append(
        f'<svg class="{escape(chart.css_class)}" xmlns="http://www.w3.org/2000/svg" '
        f'viewBox="0 0 {WIDTH} {HEIGHT}" width="{WIDTH}" height="{HEIGHT}" role="img"{data} '
        f'font-family="system-ui, -apple-system, Segoe UI, Roboto, sans-serif" font-size="{FONT}" '
        f'fill="currentColor">'
    )
    out.append(f"<title>{escape(chart.title)}</title>")
    out.append(
        f'<text class="chart-title" x="{x0}" y="14" font-weight="600" font-size="12">'
        f"{escape(chart.title)}</text>"
    )
    if times.size == 0:
        out.append(f'<text x="{x0}" y="{(y0 + y1) // 2}">no data</text></svg>')
        return "".join(out)
    t0, t1 = float(times[0]), float(times[-1])
    sx = _Scale(t0, t1 if t1 > t0 else t0 + 1.0, x0, x1)

    rt, rv = (
        downsample(times, chart.replicas, REPLICA_BUCKETS)
        if chart.replicas.size
        else (np.empty((0, 0)), np.empty((0, 0)))
    )
    ft, fv = downsample(times, chart.fleet, FLEET_BUCKETS) if chart.fleet is not None else (None, None)
    band_values = [chart.band.low, chart.band.high] if chart.band is not None else []
    if right_axis:
        left_extent = _extent(rv)
        right_extent = _extent(fv, extra=band_values)
    else:
        left_extent = _extent(rv, fv, extra=band_values)
        right_extent = None
    if left_extent is None and right_extent is None:
        out.append(f'<text x="{x0}" y="{(y0 + y1) // 2}">no samples in this span</text></svg>')
        return "".join(out)
    if left_extent is None:
        left_extent, right_extent, right_axis = right_extent, None, False
    assert left_extent is not None
    lticks = nice_ticks(*left_extent)
    sy = _Scale(lticks[0], lticks[-1], y1, y0)
    sfleet = sy
    rticks: list[float] = []
    if right_axis and right_extent is not None:
        rticks = nice_ticks(*right_extent, count=len(lticks))
        sfleet = _Scale(rticks[0], rticks[-1], y1, y0)

    # grid and axes
    out.append('<g class="grid" stroke="currentColor" stroke-opacity="0.12" stroke-width="1">')
    for v in lticks:
        gy = _coord(sy.one(v))
        out.append(f'<line x1="{x0}" x2="{x1}" y1="{gy}" y2="{gy}"/>')
    out.append("</g>")
    out.append('<g class="axis" font-size="10">')
    for v in lticks:
        out.append(
            f'<text x="{x0 - 6}" y="{_coord(sy.one(v) + 3.5)}" text-anchor="end">'
            f"{escape(number_label(v))}</text>"
        )
    if rticks:
        for v in rticks:
            out.append(
                f'<text class="axis-fleet" x="{x1 + 6}" y="{_coord(sfleet.one(v) + 3.5)}" '
                f'fill="{COLOURS["fleet"]}">{escape(number_label(v))}</text>'
            )
    span = t1 - t0
    for t in time_ticks(t0, t1):
        tx = _coord(sx.one(t))
        out.append(
            f'<line x1="{tx}" x2="{tx}" y1="{y1}" y2="{y1 + 4}" stroke="currentColor" stroke-opacity="0.5"/>'
            f'<text x="{tx}" y="{y1 + 16}" text-anchor="middle">{escape(time_label(t, span))}</text>'
        )
    unit = f" ({chart.unit})" if chart.unit else ""
    out.append(f'<text x="{x1}" y="{y1 + 30}" text-anchor="end" fill-opacity="0.7">UTC{escape(unit)}</text>')
    out.append(
        f'<line x1="{x0}" x2="{x1}" y1="{y1}" y2="{y1}" stroke="currentColor" stroke-opacity="0.5"/></g>'
    )

    # the baseline band: lightly across the whole span, darker over the window it was read in
    if chart.band is not None:
        b = chart.band
        top, bottom = sfleet.one(b.high), sfleet.one(b.low)
        h = _coord(max(bottom - top, 1.0))
        bx0 = max(sx.one(b.start), x0)
        bx1 = min(sx.one(b.end), x1)
        out.append(
            f'<g class="band" fill="{COLOURS["band"]}">'
            f'<rect x="{x0}" y="{_coord(top)}" width="{x1 - x0}" height="{h}" fill-opacity="0.14"/>'
        )
        if bx1 > bx0:
            out.append(
                f'<rect class="band-window" x="{_coord(bx0)}" y="{_coord(top)}" width="{_coord(bx1 - bx0)}" '
                f'height="{h}" fill-opacity="0.24"/>'
            )
        out.append("</g>")

    # per-replica lines, those named in the evidence last so they draw on top
    order = sorted(
        range(len(chart.replica_names)), key=lambda i: (chart.replica_names[i] in chart.highlight, i)
    )
    if order:
        out.append(
            f'<g class="replicas" fill="none" stroke="{COLOURS["replica"]}" stroke-width="1" '
            f'stroke-opacity="0.55" stroke-linejoin="round">'
        )
        for i in order:
            name = chart.replica_names[i]
            d = _path(sx(rt[i]), sy(rv[i]))
            if not d:
                continue
            hot = name in chart.highlight
            extra = (
                f' class="replica hot" stroke="{COLOURS["hot"]}" stroke-opacity="0.95"'
                if hot
                else ' class="replica"'
            )
            out.append(f'<path{extra} d="{d}"><title>{escape(name)}</title></path>')
        out.append("</g>")
    if ft is not None and fv is not None:
        d = _path(sx(ft), sfleet(fv))
        if d:
            out.append(
                f'<path class="fleet" fill="none" stroke="{COLOURS["fleet"]}" stroke-width="2" '
                f'stroke-linejoin="round" d="{d}"><title>{escape(chart.fleet_label)}</title></path>'
            )

    # markers, labels staggered over three rows so near moments stay legible
    rows_end = [-1e9, -1e9, -1e9]
    for m in sorted(chart.markers, key=lambda m: (m.at, m.kind)):
        if not t0 <= m.at <= t1:
            continue
        x = sx.one(m.at)
        row = next((r for r, end in enumerate(rows_end) if x - end >= LABEL_GAP), 2)
        rows_end[row] = x
        colour = COLOURS[m.kind]
        dash = {"onset": "5 3", "turned": "2 2", "settled": "6 2 2 2", "at": "1 3"}[m.kind]
        label_y = TOP - 26 + 11 * row
        out.append(
            f'<g class="marker {m.kind}" stroke="{colour}" fill="{colour}">'
            f'<line x1="{_coord(x)}" x2="{_coord(x)}" y1="{label_y + 3}" y2="{y1}" stroke-width="1.5" '
            f'stroke-dasharray="{dash}"/>'
            f'<text x="{_coord(x + 3)}" y="{label_y}" stroke="none" font-size="10">'
            f"{escape(m.label)}</text></g>"
        )

    # legend
    x = float(x0)
    y = HEIGHT - 12
    entries: list[tuple[str, str, str]] = []
    if chart.replica_names:
        entries.append(("replica", COLOURS["replica"], f"{len(chart.replica_names)} replicas"))
    if chart.highlight & set(chart.replica_names):
        entries.append(("hot", COLOURS["hot"], "named in the evidence"))
    if chart.fleet is not None:
        entries.append(("fleet", COLOURS["fleet"], chart.fleet_label + (" (right axis)" if rticks else "")))
    if chart.band is not None:
        entries.append(("band", COLOURS["band"], "baseline p10–p90"))
    out.append('<g class="legend" font-size="10">')
    for kind, colour, text in entries:
        if kind == "band":
            out.append(
                f'<rect class="band" x="{_coord(x)}" y="{y - 8}" width="16" height="9" fill="{colour}" '
                f'fill-opacity="0.25"/>'
            )
        else:
            out.append(
                f'<line class="{kind}" x1="{_coord(x)}" x2="{_coord(x + 16)}" y1="{y - 3}" y2="{y - 3}" '
                f'stroke="{colour}" stroke-width="{2 if kind == "fleet" else 1.5}"/>'
            )
        out.append(f'<text x="{_coord(x + 20)}" y="{y}">{escape(text)}</text>')
        x += 20 + 6.2 * len(text) + 16
    out.append("</g></svg>")
    return "".join(out)
