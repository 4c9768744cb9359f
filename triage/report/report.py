"""The postmortem report of a recorded incident: the data, then HTML or Markdown from templates.

`build_report` replays the fixture the way `triage replay` does (the diagnosis at every
step, up to the fixture's `at`) and diagnoses it at `at`; `render_report` turns that
into one self-contained HTML file (inline CSS, inline SVG charts, nothing fetched, so
it opens offline and survives being attached to a ticket) or Markdown for wikis.

Both halves are pure: the clock never enters (the caller passes `generated_at`), so the
same fixture gives the same bytes, which is what the golden tests hold us to. The only
read is the templates themselves; a user folder given as `template_dir` is searched
first, so a team can restyle one format without forking the package, and its templates
can extend the bundled ones as `builtin/report.html.j2`.

"Right" in the summary means "the top cause of the diagnosis at `at`": the report is
about how soon the tool would have said, live, what it says at the end.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import jinja2
import numpy as np
from markupsafe import Markup

from signals.frame import FloatArray, SignalFrame
from signals.timeparse import format_duration, format_instant
from signals.vocabulary import SIGNALS
from triage.core.escape import escape_md, printable
from triage.core.graph import TriageGraph
from triage.core.model import LAYERS, CauseFinding, Diagnosis, Evidence
from triage.core.render import fmt as format_number
from triage.core.walk import diagnose
from triage.replay import Step, TimelineSummary, fixture_symptom, summarise, timeline
from triage.report.charts import Band, LineChart, Marker, render_svg, time_ticks

if TYPE_CHECKING:
    from signals.fixture import Fixture

Format = Literal["html", "md"]
TEMPLATES: dict[str, str] = {"html": "report.html.j2", "md": "report.md.j2"}
TOP_N = 3
BAND_PERCENTILES = (10.0, 90.0)
TABLE_ROWS = 8


@dataclass(frozen=True)
class TimelineRow:
    """One replay step: its top three causes and whether the answer changed or was right."""

    at: float
    symptom: str
    causes: tuple[tuple[str, float], ...]
    changed: bool
    right: bool


@dataclass(frozen=True, eq=False)
class ChartData:
    """One signal that carried the evidence, with the checks that read it and its chart."""

    signal: str
    unit: str
    meaning: str
    checks: tuple[Evidence, ...]
    chart: LineChart
    fleet_how: str


@dataclass(frozen=True)
class TableRow:
    """One row of a chart's compact table (the Markdown rendering of a chart)."""

    at: float
    label: str
    fleet: float | None
    low: float | None
    median: float | None
    high: float | None


@dataclass(frozen=True, eq=False)
class Report:
    """Everything the templates show; times are epoch seconds, formatted by the renderer."""

    name: str
    description: str
    symptom: str
    symptom_source: str
    start: float
    end: float
    at: float
    interval: float
    every: float
    generated_at: float
    replicas: tuple[str, ...]
    expected: str | None
    diagnosis: Diagnosis
    summary: TimelineSummary
    timeline: tuple[TimelineRow, ...]
    walk: tuple[tuple[str, tuple[CauseFinding, ...]], ...]
    charts: tuple[ChartData, ...]

    @property
    def onset_to_right(self) -> float | None:
        """Seconds from the onset to the first step whose top cause was the final one."""
        s = self.summary
        return None if s.onset is None or s.first_seen is None else s.first_seen - s.onset

    @property
    def onset_to_settled(self) -> float | None:
        return self.summary.onset_to_settled

    @property
    def expected_met(self) -> bool | None:
        if self.expected is None:
            return None
        top = self.diagnosis.top
        return (top.cause if top else "none") == self.expected


def chart_signals(diagnosis: Diagnosis, frame: SignalFrame) -> list[str]:
    """The signals that carried the evidence: those of the top cause's checks that hold.

    Without a top cause, the symptom's own detection signals, so a "no cause" report
    still shows what was looked at. Signals with no samples cannot be drawn and are
    left to the blind spots.
    """
    source = diagnosis.top.evidence if diagnosis.top else diagnosis.symptom_evidence
    seen: list[str] = []
    for e in source:
        if e.holds and e.signal and e.signal not in seen and frame.has(e.signal):
            seen.append(e.signal)
    return seen


def _band(frame: SignalFrame, values: FloatArray, window: tuple[float, float] | None) -> Band | None:
    if window is None:
        return None
    part = values[frame.index(*window)]
    part = part[np.isfinite(part)]
    if part.size == 0:
        return None
    low, high = np.percentile(part, BAND_PERCENTILES)
    return Band(float(low), float(high), window[0], window[1])


def _markers(diagnosis: Diagnosis, summary: TimelineSummary, end: float) -> tuple[Marker, ...]:
    out: list[Marker] = []
    if diagnosis.onset is not None:
        out.append(Marker(diagnosis.onset, "onset", "onset"))
    if summary.first_seen is not None:
        out.append(Marker(summary.first_seen, "diagnosis right", "turned"))
    if summary.settled is not None and summary.settled != summary.first_seen:
        out.append(Marker(summary.settled, "settled", "settled"))
    if diagnosis.at < end:
        out.append(Marker(diagnosis.at, "diagnosed", "at"))
    return tuple(out)


def _chart(
    frame: SignalFrame,
    signal: str,
    diagnosis: Diagnosis,
    summary: TimelineSummary,
    checks: tuple[Evidence, ...],
) -> ChartData:
    spec = SIGNALS.get(signal)
    how = spec.fleet if spec is not None else "mean"
    view = frame.replicas(signal)
    fleet = frame.fleet(signal)
    highlight = frozenset(r for e in checks for r in e.replicas)
    axis: Literal["left", "right"] = "right" if how == "sum" and len(view.replicas) > 1 else "left"
    unit = spec.unit if spec is not None else ""
    meaning = spec.meaning if spec is not None else ""
    title = f"{signal} — {meaning}" if meaning else signal
    chart = LineChart(
        title=title,
        unit=unit,
        times=frame.times,
        fleet=fleet,
        fleet_label=f"fleet ({how})",
        replica_names=view.replicas,
        replicas=view.values,
        band=_band(frame, fleet, diagnosis.baseline_window),
        markers=_markers(diagnosis, summary, frame.end),
        highlight=highlight,
        fleet_axis=axis,
        data=(("signal", signal),),
    )
    return ChartData(signal, unit, meaning, checks, chart, how)


def _timeline_rows(steps: Sequence[Step], final_top: str | None) -> tuple[TimelineRow, ...]:
    rows: list[TimelineRow] = []
    previous: tuple[str, ...] | None = None
    for s in steps:
        d = s.diagnosis
        causes = tuple((c.cause, c.score) for c in d.causes[:TOP_N])
        names = tuple(c for c, _ in causes)
        top = names[0] if names else None
        rows.append(TimelineRow(s.at, d.symptom, causes, names != previous, top == final_top))
        previous = names
    return tuple(rows)


def _walk(diagnosis: Diagnosis) -> tuple[tuple[str, tuple[CauseFinding, ...]], ...]:
    """Every cause the walk asked, grouped by layer in the walk's order (layers, then playbook)."""
    ranked = {c.cause: c for c in diagnosis.causes}
    groups: dict[str, list[CauseFinding]] = {}
    for f in diagnosis.walked:
        groups.setdefault(f.layer, []).append(ranked.get(f.cause, f))
    order = [layer for layer, _ in diagnosis.layers] + [layer for layer in LAYERS if layer in groups]
    order += sorted(groups)
    seen: list[str] = []
    for layer in order:
        if layer in groups and layer not in seen:
            seen.append(layer)
    return tuple((layer, tuple(groups[layer])) for layer in seen)


def build_report(graph: TriageGraph, fixture: Fixture, every: float, generated_at: float) -> Report:
    """Replay the fixture every `every` seconds up to its `at`, diagnose it at `at`, gather the charts.

    The symptom is chosen as `triage replay` and `triage diagnose` choose it (the
    fixture's, its alert's, else auto), so the report agrees with both commands.
    """
    if not math.isfinite(every) or every <= 0:
        raise ValueError(f"every must be a positive number of seconds, got {every}")
    frame = fixture.frame
    symptom, source = fixture_symptom(fixture, None, graph.knowledge)
    steps = timeline(graph, frame, symptom, every, end=fixture.at, source=source)
    summary = summarise(steps)
    diagnosis = diagnose(graph, frame, symptom, fixture.at, source=source)
    evidence = diagnosis.top.evidence if diagnosis.top else diagnosis.symptom_evidence
    charts = tuple(
        _chart(frame, signal, diagnosis, summary, tuple(e for e in evidence if e.signal == signal))
        for signal in chart_signals(diagnosis, frame)
    )
    expect = fixture.expect
    expected = None if expect is None else ("none" if expect.no_cause else expect.cause)
    return Report(
        name=fixture.name,
        description=fixture.description,
        symptom=diagnosis.symptom,
        symptom_source=diagnosis.symptom_source,
        start=frame.start,
        end=frame.end,
        at=fixture.at,
        interval=fixture.interval,
        every=every,
        generated_at=generated_at,
        replicas=frame.replica_names(),
        expected=expected,
        diagnosis=diagnosis,
        summary=summary,
        timeline=_timeline_rows(steps, summary.final_top),
        walk=_walk(diagnosis),
        charts=charts,
    )


def _value_at(values: FloatArray, i: int) -> float | None:
    v = float(values[i]) if values.size > i else math.nan
    return v if math.isfinite(v) else None


def _stat(column: FloatArray, how: Callable[[FloatArray], Any]) -> float | None:
    finite = column[np.isfinite(column)]
    return float(how(finite)) if finite.size else None


def _hhmm(t: float) -> str:
    return format_instant(t)[11:16]


def _median_or_nan(row: FloatArray) -> float:
    value = _stat(row, np.median)
    return math.nan if value is None else value


def chart_table(data: ChartData) -> list[TableRow]:
    """A chart as a few rows: the baseline, round times across the span, and every marker.

    Each row reads one grid step: the fleet's value and the spread over replicas (min,
    median, max), which is what the lines show; the baseline row gives medians over its
    window. Compact enough for a ticket, exact where the chart is approximate.
    """
    c = data.chart
    times = c.times
    if times.size == 0:
        return []
    rows: list[TableRow] = []
    fleet = c.fleet if c.fleet is not None else np.full(times.size, np.nan)
    if c.band is not None:
        sl = slice(
            int(np.searchsorted(times, c.band.start, side="left")),
            int(np.searchsorted(times, c.band.end, side="right")),
        )
        window = c.replicas[:, sl] if c.replicas.size else np.empty((0, 0))
        per_replica = np.array([_median_or_nan(r) for r in window]) if window.size else np.empty(0)
        rows.append(
            TableRow(
                c.band.start,
                f"baseline: median from {_hhmm(c.band.start)} to {_hhmm(c.band.end)}",
                _stat(fleet[sl], np.median),
                _stat(per_replica, np.min),
                _stat(per_replica, np.median),
                _stat(per_replica, np.max),
            )
        )
    labels: dict[float, str] = {}
    ticks = time_ticks(float(times[0]), float(times[-1]), TABLE_ROWS)
    for t in ticks:
        labels[t] = ""
    for m in c.markers:
        labels[m.at] = (labels.get(m.at, "") + ", " if labels.get(m.at) else "") + m.label
    for t in sorted(labels):
        i = max(0, int(np.searchsorted(times, t, side="right")) - 1)
        column = c.replicas[:, i] if c.replicas.size else np.empty(0)
        rows.append(
            TableRow(
                float(times[i]),
                labels[t],
                _value_at(fleet, i),
                _stat(column, np.min),
                _stat(column, np.median),
                _stat(column, np.max),
            )
        )
    return rows


def signed_duration(seconds: float | None) -> str:
    """`12m`, `-2m` (the answer came before the onset it is measured from), or a dash."""
    return "—" if seconds is None else format_duration(seconds)


def _code_md(value: Any) -> str:
    """Inline code that survives backticks inside (a longer fence); pipes escaped for tables."""
    text = printable(str(value)).replace("\n", " ").replace("|", "\\|")
    fence = "`"
    while fence in text:
        fence += "`"
    pad = " " if text.startswith("`") or text.endswith("`") else ""
    return f"{fence}{pad}{text}{pad}{fence}"


@lru_cache(maxsize=8)
def _environment(template_dir: str | None) -> jinja2.Environment:
    """Templates from the user's folder first, then the bundled ones (also as `builtin/...`).

    Autoescaping is on for `*.html.j2` (the HTML report) and off for Markdown, whose
    text goes through the `e_md` filter instead (also known as `md`).
    """
    builtin = jinja2.PackageLoader("triage.report", "templates")
    loaders: list[jinja2.BaseLoader] = []
    if template_dir is not None:
        loaders.append(jinja2.FileSystemLoader(template_dir))
    loaders += [jinja2.PrefixLoader({"builtin": builtin}), builtin]
    env = jinja2.Environment(
        loader=jinja2.ChoiceLoader(loaders),
        undefined=jinja2.StrictUndefined,
        autoescape=jinja2.select_autoescape(enabled_extensions=("html", "htm", "html.j2"), default=False),
        keep_trailing_newline=True,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters["e_md"] = escape_md
    env.filters["md"] = escape_md  # the name user templates written before `e_md` use
    env.filters["code"] = _code_md
    return env


def render_report(report: Report, fmt: Format = "html", template_dir: Path | None = None) -> str:
    """The report as HTML (`fmt="html"`) or Markdown (`"md"`), from `report.<fmt>.j2`.

    The templates get the report and helpers to format numbers and times; they hold no
    clock of their own (`generated_at` is the report's).
    """
    if fmt not in TEMPLATES:
        raise ValueError(f"unknown report format {fmt!r}; expected html or md")
    env = _environment(str(template_dir) if template_dir is not None else None)
    template = env.get_template(TEMPLATES[fmt])
    start = report.start
    charts = [(c, Markup(render_svg(c.chart)), chart_table(c)) for c in report.charts]
    d = report.diagnosis
    ruled_out = [c for c in d.walked if c.status != "ranked"]
    return template.render(
        r=report,
        d=d,
        s=report.summary,
        charts=charts,
        ruled_out=ruled_out,
        generated_at=format_instant(report.generated_at),
        instant=lambda t: "—" if t is None else format_instant(t),
        clock=lambda t: "—" if t is None else format_instant(t)[11:],
        offset=lambda t: "—" if t is None else "+" + format_duration(t - start),
        duration=signed_duration,
        fmt=format_number,
        holds=lambda h: {True: "holds", False: "does not hold", None: "unknown"}[h],
        mark=lambda h: {True: "✔", False: "✘", None: "?"}[h],
    )
