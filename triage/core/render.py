"""Renderings of a Diagnosis: terminal text and JSON (Markdown is `triage.core.markdown`).

The text and the Markdown lay out the sections of `triage.core.sections`, which the TUI
and the webhook service's messages read too, so all of them say the same thing. The
terminal view leads with the verdict, then the symptom, so an engineer paged at night
reads the answer in ten seconds: by default it fits one screen (at most `MAX_LINES` lines
of at most `MAX_COLUMNS` columns; what does not fit is shortened or folded, and `-v`
shows it); verbose shows everything, unshortened and never wrapped, for pipes and grep.
Colour only on a terminal, and never when NO_COLOR is set (rich handles both). JSON is
the contract of VOCABULARY.md.
"""

from __future__ import annotations

import io
import json
import math
import re
from collections.abc import Callable
from dataclasses import dataclass

from rich.console import Console
from rich.text import Text

from triage.core.model import Diagnosis
from triage.core.sections import EvidenceLine, Sections, Spans, Tone, joined, sections

MAX_LINES = 25
"""The default view's height: one screen."""

MAX_COLUMNS = 100
"""The default view's width; longer lines end in `…` (never in verbose)."""

FIRST_MOVERS_SHOWN = 3
"""First movers on the default view's line; verbose shows them all."""


def fmt(value: float | None) -> str:
    """A number as a person reads it: 0.99, 1.2k, 340ms is left to the unit."""
    if value is None or not math.isfinite(value):
        return "—"
    if value == 0:
        return "0"
    if abs(value) >= 10000:
        return f"{value / 1000:,.1f}k"
    if abs(value) >= 100:
        return f"{value:,.0f}"
    return f"{value:.3g}"


def to_json(diagnosis: Diagnosis, indent: int | None = 2) -> str:
    return json.dumps(diagnosis.to_json(), indent=indent, ensure_ascii=False)


STYLES: dict[Tone, str] = {
    "plain": "",
    "holds": "green",
    "fails": "red",
    "unknown": "yellow",
    "muted": "dim",
    "strong": "bold",
    "cause": "bold red",
    "forbidden": "bold red",
    "replicas": "cyan",
    "confirm": "cyan",
    "warn": "bold yellow",
    "ok": "bold green",
}
"""The terminal's colour for each tone of the sections."""


def _line(spans: Spans, prefix: str = "", style: str = "") -> Text:
    line = Text(prefix, style=style)
    for span in spans:
        line.append(span.text, style=STYLES[span.tone] or None)
    return line


def _label(text: str, style: str = "bold") -> Text:
    return Text(text, style=style)


# ----------------------------------------------------------------- fitting one screen


@dataclass
class _Row:
    """A line of the text; `rank` 0 always shows, higher ranks go first when the screen is full.

    A row that opens an `item` of a `group` (an action, a tempting action) is named in the
    group's fold when it does not fit.
    """

    text: Text
    rank: int = 0
    group: str = ""
    item: str = ""
    head: _Row | None = None
    """The row this one continues (a wrapped line): when this one is left out, the head ends in `…`."""


@dataclass
class _Fold:
    """The line that names a group's items left out of the default view."""

    group: str
    make: Callable[[list[str]], list[Text]]


def _fit(layout: list[_Row | _Fold], height: int) -> list[Text]:
    """The most important rows that fit `height` lines with their folds, in layout order.

    Rows are kept by rank (then order); a group whose items were left out gets its fold
    line, and anything else left out one last line that says `-v` shows it.
    """
    rows = [r for r in layout if isinstance(r, _Row)]
    folds = [f for f in layout if isinstance(f, _Fold)]
    order = sorted(range(len(rows)), key=lambda i: (rows[i].rank, i))
    required = sum(1 for r in rows if r.rank == 0)
    kept: set[int] = set(order)
    made: dict[str, list[Text]] = {}
    footer = False

    def left(group: str) -> list[str]:
        return [r.item for i, r in enumerate(rows) if i not in kept and r.group == group and r.item]

    for count in range(len(rows), required - 1, -1):
        kept = set(order[:count])
        made = {f.group: f.make(left(f.group)) for f in folds if left(f.group)}
        footer = any(r.group not in made for i, r in enumerate(rows) if i not in kept)
        if count + sum(len(lines) for lines in made.values()) + footer <= height:
            break
    out: list[Text] = []
    index = {id(r): i for i, r in enumerate(rows)}
    left_out = len(rows) - len(kept)
    cut = {id(r.head) for i, r in enumerate(rows) if r.head is not None and i not in kept}
    for entry in layout:
        if isinstance(entry, _Row):
            if index[id(entry)] in kept:
                out.append(entry.text.copy().append(" …") if id(entry) in cut else entry.text)
        else:
            out.extend(made.get(entry.group, []))
    if footer:
        out.append(Text(f"… {left_out} more line{'s' if left_out != 1 else ''}: -v shows everything", "dim"))
    for line in out:
        line.truncate(MAX_COLUMNS, overflow="ellipsis")
    return out


def _pack(segments: list[Text], sep: str, width: int, indent: int, max_lines: int) -> list[Text]:
    """Segments joined by `sep` into lines of `width`, breaking only between segments, the
    later lines indented; at most `max_lines`, the last ending in `…` when the text goes on."""
    lines: list[Text] = []
    current: Text | None = None
    for segment in segments:
        if current is None:
            current = segment.copy()
        elif current.cell_len + len(sep) + segment.cell_len <= width or len(lines) == max_lines - 1:
            current.append(sep)
            current.append_text(segment)
        else:
            lines.append(current)
            current = Text(" " * indent).append_text(segment)
    if current is not None:
        lines.append(current)
    for line in lines:
        line.truncate(width, overflow="ellipsis")
    return lines


def _wrap(text: Text, width: int, indent: int, max_lines: int) -> list[Text]:
    """`text` wrapped at its spaces (see `_pack`); a leading indent stays with the first word."""
    starts = [m.start() for m in re.finditer(r"(?<=\S)\s+\S", text.plain)]
    words = text.divide(m + 1 for m in starts)
    for word in words:
        word.rstrip()
    return _pack([w for w in words], " ", width, indent, max_lines)


# ----------------------------------------------------------------- the parts


def _verdict(s: Sections) -> Text:
    v = s.verdict
    line = _label("VERDICT  ")
    if v.kind == "cause" and v.top is not None:
        top = v.top
        line.append(top.cause, style=STYLES[v.tone])
        if top.layer:
            line.append(f" ({top.layer})")
        if top.title:
            line.append(f" — {top.title}")
        line.append(f"  score {top.score:.2f}")
        if top.explains:
            line.append(f"  explains {', '.join(top.explains)}", style=STYLES["muted"])
    elif v.kind == "ambiguous":
        line.append("ambiguous", style=STYLES[v.tone])
        line.append(f" between {joined(v.causes)}")
        if any(c.tells for c in v.contenders):
            line.append(" — what tells them apart:")
    else:
        line.append(v.sentence, style=STYLES[v.tone])
    return line


def _headline(s: Sections) -> Text:
    h = s.headline
    head = Text(h.title, style="bold magenta")
    head.append(f"  at {h.at} · {h.onset} · symptom {h.source}", style="dim")
    if h.visible is False:
        head.append(" · not visible in the signals", style="yellow")
    return head


def _contenders(s: Sections, verbose: bool) -> list[list[Text]]:
    """Each contender of an ambiguous verdict with what tells it apart (two lines at most by default)."""
    out = []
    for c in s.verdict.contenders:
        line = Text("    ").append(c.cause, style=STYLES["warn"]).append(c.label[len(c.cause) :])
        if c.tells:
            line.append(f": {c.tells}")
        out.append([line] if verbose else _wrap(line, MAX_COLUMNS, 6, 3))
    return out


def _evidence(e: EvidenceLine) -> Text:
    return _line(e.spans, "    ")


def _movers(s: Sections, verbose: bool) -> list[Text]:
    """`FIRST MOVERS  a · b · c`: one line in verbose; by default the first few, whole, on
    as few lines as fit the width, then how many more."""
    movers = s.first_movers
    shown = movers if verbose else movers[:FIRST_MOVERS_SHOWN]
    segments = [Text(m.text) for m in shown]
    if len(movers) > len(shown):
        segments.append(Text(f"+{len(movers) - len(shown)} more", style=STYLES["muted"]))
    segments[0] = _label("FIRST MOVERS  ").append_text(segments[0])
    if verbose:
        return [Text(" · ").join(segments)]
    return _pack(segments, " · ", MAX_COLUMNS, 14, FIRST_MOVERS_SHOWN)


def _note(note: str) -> Text:
    return _label("NOTE     ").append(note)


def _named(prefix: str, names: list[str]) -> list[Text]:
    """`  ✗ always: a, b, c (-v for the reasons)`: every action named, on more lines only when
    one is too narrow for them."""
    commas = [*[","] * (len(names) - 1), ""]
    segments = [
        Text(name + comma, style=STYLES["forbidden"]) for name, comma in zip(names, commas, strict=True)
    ]
    segments[0] = Text(prefix, style="red").append_text(segments[0])
    segments.append(Text("(-v for the reasons)", style=STYLES["muted"]))
    return _pack(segments, " ", MAX_COLUMNS, len(prefix), len(segments))


def _blind(s: Sections) -> Text:
    return _label("BLIND SPOTS  ", "bold yellow").append(
        ", ".join(s.blind) + " (missing: unknown, never healthy)"
    )


def _unmonitored(text: str) -> Text:
    return _label("NOT MONITORED  ", "bold yellow").append(text)


# ----------------------------------------------------------------- the two views


def _verbose(s: Sections) -> list[Text]:
    """Everything, unshortened: the default view's parts in full, every check, the ruled-out causes."""
    v = s.verdict
    out = [_verdict(s), _headline(s)]
    by_id = {c.cause: c for c in s.causes}
    for contender, lines in zip(v.contenders, _contenders(s, verbose=True), strict=True):
        out.extend(lines)
        if contender.cause in by_id:
            out.extend(_line(e.spans, "      ") for e in by_id[contender.cause].evidence)
    if v.kind == "cause" and v.top is not None:
        out.extend(_evidence(e) for e in v.top.evidence)
    if s.others:
        out.append(_label("ALSO     ").append(" · ".join(c.summary for c in s.others)))
        for c in s.others:
            out.append(_label(f"  {c.cause}"))
            out.extend(_evidence(e) for e in c.evidence)
    if s.first_movers:
        out.extend(_movers(s, verbose=True))
    out.extend(_note(n) for n in s.notes)
    out.append(_label("FIRST ACTIONS"))
    if not s.actions:
        out.append(Text("    none: nothing to act on", style="dim"))
    for a in s.actions:
        out.append(Text(f"  {a.index}. {a.text}"))
        if a.confirm:
            out.append(Text(f"     confirm: {a.confirm}", style=STYLES["confirm"]))
    out.append(_label("DO NOT"))
    if not s.forbidden:
        out.append(Text("  nothing flagged", style="dim"))
    for f in s.tempting:
        out.append(_line(f.spans, "  ✗ ", "red"))
    for f in s.red_lines:
        out.append(_line(f.spans, "  ✗ always: ", "red"))
    for u in s.unreadable:
        out.append(_label("UNREADABLE   ", "bold yellow").append(f"{u.signal}: {u.reason}"))
    if s.blind:
        out.append(_blind(s))
    out.extend(_unmonitored(u.full) for u in s.unmonitored)
    if s.ruled_out:
        out.append(_label("RULED OUT"))
        out.extend(Text(f"  {ruled.cause}: {ruled.why_not}", style="dim") for ruled in s.ruled_out)
    return out


def _wrapped(lines: list[Text], ranks: tuple[int, ...], group: str = "", item: str = "") -> list[_Row]:
    """The lines of one wrapped text as rows: the first opens the item, the others continue it."""
    head = _Row(lines[0], ranks[0], group, item)
    return [head, *(_Row(line, _nth(ranks, j), head=head) for j, line in enumerate(lines[1:], start=1))]


def _nth(ranks: tuple[int, ...], index: int) -> int:
    """The rank of the `index`-th of a kind of line: `ranks[index]`, the last one past the end."""
    return ranks[min(index, len(ranks) - 1)]


def _one_screen(s: Sections) -> list[Text]:
    """What fits one screen, most important first.

    Always: the verdict, the headline, what tells the contenders apart, the first action,
    the first tempting action and the red lines (and the first movers when no cause holds).
    Then, rank by rank: the first check, movers, note and confirm query, the other tempting
    actions and the blind spots; the other checks, the other causes and why the first
    tempting action is wrong now; the second action; and the rest.
    """
    v = s.verdict
    layout: list[_Row | _Fold] = [_Row(_verdict(s)), _Row(_headline(s))]
    for lines in _contenders(s, verbose=False):
        layout.extend(_wrapped(lines, (0, 1, 3)))
    if v.kind == "cause" and v.top is not None:
        layout.extend(_Row(_evidence(e), _nth((1, 2, 2, 5), i)) for i, e in enumerate(v.top.brief))
    if s.others:
        layout.append(_Row(_label("ALSO     ").append(" · ".join(c.summary for c in s.others)), 2))
    if s.first_movers:
        layout.extend(_wrapped(_movers(s, verbose=False), (0,) if v.kind == "unexplained" else (1, 3)))
    for i, note in enumerate(s.notes):
        layout.extend(_wrapped(_wrap(_note(note), MAX_COLUMNS, 9, 2), (1, 3) if i == 0 else (4,)))
    layout.append(_Row(_label("FIRST ACTIONS")))
    if not s.actions:
        layout.append(_Row(Text("    none: nothing to act on", style="dim")))
    for i, a in enumerate(s.actions):
        layout.append(_Row(Text(f"  {a.index}. {a.text}"), _nth((0, 3, 6), i), "actions", str(a.index)))
        if a.confirm:
            confirm = Text(f"     confirm: {a.confirm}", style=STYLES["confirm"])
            layout.append(_Row(confirm, _nth((1, 4, 6), i)))
    layout.append(_Fold("actions", lambda items: [Text(f"  … {len(items)} more (-v)", style="dim")]))
    layout.append(_Row(_label("DO NOT")))
    if not s.forbidden:
        layout.append(_Row(Text("  nothing flagged", style="dim")))
    for i, f in enumerate(s.tempting):
        line = Text("  ✗ ", style="red").append(f.action, style=STYLES["forbidden"])
        rule = _wrap(line.append(f" — {f.first_sentence}"), MAX_COLUMNS, 6, 2)
        ranks = (_nth((0, 1, 1, 5), i), _nth((3, 4, 4, 6), i))
        layout.extend(_wrapped(rule, ranks, "tempting", f.action))
        if f.now:
            now = _wrap(Text(f"      {f.now}"), MAX_COLUMNS, 6, 1)
            layout.extend(_Row(line, _nth((2, 3, 3, 6), i)) for line in now)
    layout.append(_Fold("tempting", lambda items: _named("  ✗ also tempting: ", items)))
    if s.red_lines:
        layout.extend(_Row(line) for line in _named("  ✗ always: ", [f.action for f in s.red_lines]))
    if s.unreadable:
        reasons = " · ".join(f"{u.signal}: {u.reason}" for u in s.unreadable)
        layout.append(_Row(_label("UNREADABLE   ", "bold yellow").append(reasons), 1))
    if s.blind:
        layout.append(_Row(_blind(s), 1))
    for i, u in enumerate(s.unmonitored):
        layout.append(_Row(_unmonitored(u.text), _nth((1, 1, 4), i), "unmonitored", u.source))
    layout.append(_Fold("unmonitored", lambda items: [_unmonitored(f"also {', '.join(items)} (-v)")]))
    return _fit(layout, MAX_LINES)


def to_text(diagnosis: Diagnosis, color: bool = False, verbose: bool = False) -> str:
    """The terminal view; ANSI colour only when `color` (the caller decides: TTY and no NO_COLOR).

    The first line is the verdict. By default the text fits one screen (`MAX_LINES` by
    `MAX_COLUMNS`); `verbose` shows everything, and its lines are never hard-wrapped, so
    the text pipes and greps cleanly (a terminal wraps them).
    """
    buffer = io.StringIO()
    console = Console(
        file=buffer,
        width=10_000,
        highlight=False,
        soft_wrap=True,
        force_terminal=color,
        no_color=not color,
        color_system="standard" if color else None,
    )
    s = sections(diagnosis)
    for line in _verbose(s) if verbose else _one_screen(s):
        console.print(line)
    return buffer.getvalue()
