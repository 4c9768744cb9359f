"""The widgets: each renders a value it is given and decides nothing.

Numbers come from `tui.view`, diagnoses from the walk; a widget turns them into text
and colour. Colours are named by meaning (ok, warn, bad, blind) in `app.tcss` and in
`STYLE` below, chosen to read on dark and light terminals (no dim grey on black).
"""

from __future__ import annotations

import math

import numpy as np
from rich.text import Text
from textual.app import RenderResult
from textual.message import Message
from textual.widget import Widget
from textual.widgets import Static, Tree
from textual.widgets.tree import TreeNode

from signals.timeparse import format_instant
from triage.core.escape import printable
from triage.core.model import Diagnosis, Evidence
from triage.core.render import FIRST_MOVERS_SHOWN, fmt
from triage.core.sections import (
    EvidenceLine,
    Spans,
    Tone,
    WalkedCause,
    action_item,
    evidence_line,
    joined,
    sections,
    walked_cause,
)
from tui.view import ChartData, Tile, format_value, plot_rows, spark

STYLE = {"ok": "green", "warn": "yellow", "bad": "bold red", "blind": "magenta"}
BAR = " ▁▂▃▄▅▆▇█"


class SignalTile(Widget, can_focus=True):
    """A signal's value, its baseline and a sparkline, bordered in the colour of its level."""

    DEFAULT_CSS = """
    SignalTile { height: 4; }
    """

    def __init__(self, signal: str, label: str) -> None:
        super().__init__(id=f"tile-{signal}", classes="tile -blind")
        self.signal = signal
        self.label = label
        self.tile: Tile | None = None
        self.border_title = label

    class Chosen(Message):
        """The tile was clicked: chart its signal."""

        def __init__(self, signal: str) -> None:
            super().__init__()
            self.signal = signal

    @property
    def chart_signal(self) -> str:
        """The signal its drill-down charts (GPU health is a roll-up; throttling is its commonest part)."""
        return "gpu_throttle" if self.signal == "gpu_health" else self.signal

    def on_click(self) -> None:
        self.post_message(self.Chosen(self.chart_signal))

    def show(self, tile: Tile) -> None:
        self.tile = tile
        self.set_classes(f"tile -{tile.level}")
        self.refresh()

    def render(self) -> RenderResult:
        tile = self.tile
        width = max(4, self.size.width)
        if tile is None:
            return Text("…", style="dim")
        line = Text(tile.value_text, style=STYLE[tile.level])
        if tile.baseline_text:
            line.append(f"  {tile.baseline_text}")
        if tile.note:
            line.append(f"  {printable(tile.note)}")
        line.truncate(width, overflow="ellipsis")
        if tile.level == "blind":
            return Text.assemble(line, "\n", Text("missing: unknown, not healthy", style="magenta"))
        floor = 0.0 if all(v >= 0 for v in tile.history if math.isfinite(v)) else None
        return Text.assemble(line, "\n", Text(spark(tile.history, width, lo=floor), style=STYLE[tile.level]))


TONES: dict[Tone, str] = {
    "plain": "",
    "holds": "green",
    "fails": "red",
    "unknown": "magenta",
    "muted": "italic",
    "strong": "bold",
    "cause": "bold red",
    "forbidden": "bold red",
    "replicas": "cyan",
    "confirm": "cyan",
    "warn": "yellow",
    "ok": "green",
}
"""The screen's colour for each tone of the diagnosis sections (unknown is magenta, as blind tiles)."""


def _append(text: Text, spans: Spans) -> Text:
    for span in spans:
        text.append(span.text, style=TONES[span.tone] or None)
    return text


def _evidence(line: EvidenceLine) -> Text:
    return _append(Text(), line.spans)


def evidence_text(e: Evidence) -> Text:
    return _evidence(evidence_line(e))


def _cause_label(c: WalkedCause) -> Text:
    """The mark's colour runs through the whole label."""
    mark, *rest = c.label
    return _append(Text(mark.text, style=TONES[mark.tone]), tuple(rest))


class WalkTree(Tree[str]):
    """The walk: symptom → layers → causes → checks, each check marked holds, fails or unknown."""

    def show(self, d: Diagnosis) -> None:
        self.clear()
        root = self.root
        root.set_label(
            Text.assemble((d.symptom.replace("_", " ").upper(), "bold"), f"  ({d.symptom_source})")
        )
        root.data = ""
        root.expand()
        visible = root.add(Text("seen: " + self._visible(d)), data="", expand=True)
        for e in d.symptom_evidence:
            visible.add_leaf(evidence_text(e), data=e.signal)
        by_id = {c.cause: c for c in d.walked}
        layers = d.layers or (("all causes", tuple(by_id)),)
        top = d.top.cause if d.top else None
        for layer, causes in layers:
            findings = [by_id[c] for c in causes if c in by_id]
            ranked = sum(1 for c in findings if c.status == "ranked")
            node = root.add(
                Text.assemble((layer, "bold"), f"  {ranked} of {len(findings)} hold"),
                data="",
                expand=any(c.cause == top for c in findings) or ranked > 0,
            )
            for c in sorted(findings, key=lambda f: (f.status != "ranked", -f.score, f.cause)):
                entry = walked_cause(c)
                cause_node = node.add(_cause_label(entry), data="", expand=c.cause == top)
                if entry.why_not:
                    cause_node.add_leaf(Text(entry.why_not, style=TONES["muted"]), data="")
                for line in entry.evidence:
                    cause_node.add_leaf(_evidence(line), data=line.signal)
        self.move_cursor(root)

    @staticmethod
    def _visible(d: Diagnosis) -> str:
        if d.symptom_visible is None:
            return "unknown (its signals are missing)"
        return "yes" if d.symptom_visible else "no, not in the signals"

    def signal_at_cursor(self) -> str | None:
        node: TreeNode[str] | None = self.cursor_node
        return node.data if node is not None and node.data else None


def verdict_text(d: Diagnosis) -> Text:
    """The answer in one block: the verdict first, then the symptom and onset, the evidence (or
    the contenders and what tells them apart), the other causes, the first movers, the notes."""
    s = sections(d)
    v = s.verdict
    text = Text()
    text.append("VERDICT ", style="bold")
    if v.kind == "cause" and v.top:
        text.append(v.top.cause, style=TONES[v.tone])
        text.append(f" ({v.top.layer}) — {v.top.title}  score {v.top.score:.2f}\n")
    elif v.kind == "ambiguous":
        text.append("ambiguous", style=TONES[v.tone])
        text.append(f" between {joined(v.causes)}\n")
    else:
        text.append(f"{v.sentence}\n", style=TONES[v.tone])
    text.append(s.headline.title, style="bold")
    text.append(f"  at {s.headline.at} · {s.headline.onset}\n")
    if v.kind == "cause" and v.top:
        for e in v.top.brief:
            text.append("  ")
            text.append_text(_evidence(e))
            text.append("\n")
    for c in v.contenders:
        text.append("  ")
        text.append(c.label, style=TONES["warn"])
        text.append(f": {c.tells}\n" if c.tells else "\n")
    if s.others:
        text.append("ALSO ", style="bold")
        text.append(" · ".join(c.summary for c in s.others) + "\n")
    if s.first_movers:
        text.append("FIRST MOVERS ", style="bold")
        shown = s.first_movers[:FIRST_MOVERS_SHOWN]
        more = len(s.first_movers) - len(shown)
        text.append(" · ".join(m.text for m in shown) + (f" · +{more} more" if more else "") + "\n")
    for note in s.notes:
        text.append("NOTE ", style="bold")
        text.append(f"{note}\n", style=TONES["muted"])
    return text


def warnings_text(d: Diagnosis) -> Text:
    """What not to do (the tempting actions first, then the red lines, red, each with its reason)
    and what the tool cannot see: unreadable signals, blind spots, exporters not run at all."""
    s = sections(d)
    text = Text()
    text.append("DO NOT\n", style="bold red")
    if not s.forbidden:
        text.append("  nothing flagged\n")
    for f in s.tempting:
        text.append("  ✗ ", style="red")
        _append(text, f.spans)
        text.append("\n")
    for f in s.red_lines:
        text.append("  ✗ always: ", style="red")
        _append(text, f.spans)
        text.append("\n")
    for u in s.unreadable:
        text.append("UNREADABLE ", style="bold magenta")
        text.append(f"{u.signal}: {u.reason}\n")
    if s.blind:
        text.append("BLIND SPOTS ", style="bold magenta")
        text.append(", ".join(s.blind) + " (missing: unknown, never healthy)\n")
    for source in s.unmonitored:
        text.append("NOT MONITORED ", style="bold magenta")
        text.append(f"{source.text}\n")
    return text


def action_text(index: int, text: str, confirm: str) -> Text:
    a = action_item(index, text, confirm)
    out = Text(f"{a.index}. {a.text}")
    if a.confirm:
        out.append(f"\n   confirm: {a.confirm}", style=TONES["confirm"])
    return out


class Chart(Widget):
    """A signal over the window as columns of eighths; baseline dotted, onset and cursor marked."""

    def __init__(self, data: ChartData, red_line: float | None = None, id: str | None = None) -> None:
        super().__init__(id=id)
        self.data = data
        self.red_line = red_line

    def render(self) -> RenderResult:
        d = self.data
        values = d.fleet
        finite = values[np.isfinite(values)]
        if not finite.size:
            return Text("no data for this signal in the window: unknown, not healthy", style="magenta")
        axis = 9
        width = max(8, self.size.width - axis)
        height = max(3, self.size.height - 1)
        lo = min(0.0, float(finite.min()))
        extra = [v for v in (d.baseline, self.red_line) if v is not None and math.isfinite(v)]
        hi = max([float(finite.max()), *extra])
        grid = plot_rows(values, width, height, lo, hi)
        columns = len(grid[0]) if grid else 0
        span = hi - lo if hi > lo else 1.0

        def row_of(v: float) -> int:
            return height - 1 - min(height - 1, int((v - lo) / span * height))

        def col_of(t: float) -> int | None:
            if not len(d.times) or t < d.times[0] or t > d.times[-1]:
                return None
            frac = (t - d.times[0]) / max(d.times[-1] - d.times[0], 1e-9)
            return min(columns - 1, int(frac * columns))

        base_row = row_of(d.baseline) if d.baseline is not None else None
        red_row = row_of(self.red_line) if self.red_line is not None else None
        onset_col = col_of(d.onset) if d.onset is not None else None
        out = Text()
        for r, cells in enumerate(grid):
            label = ""
            if r == 0:
                label = format_value(hi, d.signal)
            elif r == height - 1:
                label = format_value(lo, d.signal)
            elif r == base_row:
                label = "baseline"
            out.append(f"{label[: axis - 1]:>{axis - 1}} ", style="italic")
            for c, eighths in enumerate(cells):
                if eighths:
                    out.append(BAR[eighths] if eighths < 8 else "█", style="cyan")
                elif c == onset_col:
                    out.append("│", style="bold yellow")
                elif r == red_row:
                    out.append("─", style="red")
                elif r == base_row:
                    out.append("┄", style="green")
                else:
                    out.append(" ")
            out.append("\n")
        start = format_instant(float(d.times[0]))[11:16] if len(d.times) else ""
        end = format_instant(float(d.times[-1]))[11:16] if len(d.times) else ""
        marks = "  │ onset" if onset_col is not None else ""
        out.append(
            f"{'':>{axis}}{start}{marks}{end:>{max(1, columns - len(start) - len(marks))}}", style="italic"
        )
        return out


def replica_lines(d: ChartData, width: int, limit: int = 64) -> Text:
    """One sparkline per replica, worst (by its latest value) first, on a shared scale."""
    text = Text()
    if not d.replicas:
        text.append("no per-replica series for this signal (a fleet-level source)", style="italic")
        return text
    values = d.replica_values
    finite = values[np.isfinite(values)]
    lo = float(finite.min()) if finite.size else 0.0
    hi = float(finite.max()) if finite.size else 1.0
    last = []
    for i, name in enumerate(d.replicas):
        row = values[i]
        idx = np.flatnonzero(np.isfinite(row))
        last.append(
            (
                float(row[idx[-1]]) if idx.size else -math.inf,
                name,
                i,
                bool(idx.size and idx[-1] < len(row) - 3),
            )
        )
    last.sort(key=lambda x: (-x[0], x[1]))
    name_width = min(24, max(len(n) for n in d.replicas))
    spark_width = max(8, width - name_width - 12)
    for value, name, i, stale in last[:limit]:
        text.append(f"{printable(name)[:name_width]:<{name_width}} ")
        text.append(spark(values[i], spark_width, lo, hi), style="cyan")
        shown = "gone" if stale else format_value(value if math.isfinite(value) else None, d.signal)
        text.append(f" {shown}\n", style="bold red" if stale else "")
    if len(last) > limit:
        text.append(f"+{len(last) - limit} more replicas\n", style="italic")
    return text


class StatusLine(Static):
    """Mode, moment, refresh and errors, always in the same place."""


def fmt_age(seconds: float) -> str:
    if seconds < 60:
        return f"{seconds:.0f}s ago"
    return f"{fmt(seconds / 60)}m ago"
