"""Renderings of a Diagnosis: terminal text, Markdown for tickets, and JSON.

The terminal view puts the symptom and the verdict first so an engineer paged at night
reads it in ten seconds; colour only on a terminal, and never when NO_COLOR is set
(rich handles both). Markdown comes from a jinja2 template with autoescaping off (it
is not HTML) and table cells escaped by a filter; JSON is the contract of VOCABULARY.md.
"""

from __future__ import annotations

import io
import json
import math
from typing import Any

import jinja2
from rich.console import Console
from rich.text import Text

from signals.timeparse import format_instant
from triage.core.model import Diagnosis, Evidence
from triage.core.walk import onset_text

MARK = {True: ("✔", "green"), False: ("✘", "red"), None: ("?", "yellow")}


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


def _escape_md(value: Any) -> str:
    return str(value).replace("|", "\\|").replace("\n", " ")


_ENV = jinja2.Environment(
    loader=jinja2.PackageLoader("triage.core", "templates"),
    undefined=jinja2.StrictUndefined,
    autoescape=False,
    keep_trailing_newline=True,
    trim_blocks=False,
)
_ENV.filters["e_md"] = _escape_md


def markdown_template(name: str) -> jinja2.Template:
    """A bundled Markdown template (no autoescape; table cells escaped by the `e_md` filter)."""
    return _ENV.get_template(name)


def to_markdown(diagnosis: Diagnosis) -> str:
    template = markdown_template("diagnosis.md.j2")
    return template.render(d=diagnosis, at=format_instant(diagnosis.at), onset=onset_text(diagnosis), fmt=fmt)


def _evidence_line(e: Evidence) -> Text:
    mark, colour = MARK[e.holds]
    line = Text("    ")
    line.append(mark, style=colour)
    line.append(f" {e.check}")
    if e.note:
        line.append(f"  {e.note}", style="dim")
    if e.replicas:
        line.append(f"  [{', '.join(e.replicas[:4])}{' …' if len(e.replicas) > 4 else ''}]", style="cyan")
    return line


def to_text(diagnosis: Diagnosis, color: bool = False, verbose: bool = False) -> str:
    """The terminal view; ANSI colour only when `color` (the caller decides: TTY and no NO_COLOR).

    Lines are never hard-wrapped, so the text pipes and greps cleanly; a terminal wraps them.
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
    d = diagnosis
    head = Text()
    head.append(d.symptom.upper().replace("_", " "), style="bold magenta")
    head.append(f"  at {format_instant(d.at)} · {onset_text(d)} · symptom {d.symptom_source}", style="dim")
    if d.symptom_visible is False:
        head.append(" · not visible in the signals", style="yellow")
    console.print(head)
    verdict = Text("VERDICT  ", style="bold")
    if d.top:
        verdict.append(d.top.cause, style="bold red")
        verdict.append(f" ({d.top.layer}) — {d.top.title}  score {d.top.score:.2f}")
        if d.top.explains:
            verdict.append(f"  explains {', '.join(d.top.explains)}", style="dim")
    elif d.symptom_visible:
        verdict.append(
            "the symptom is real, but no cause in the playbooks holds; nothing is guessed "
            "(see the first look and the blind spots)",
            style="bold yellow",
        )
    else:
        verdict.append("no cause departs from its baseline; nothing to blame yet", style="bold green")
    console.print(verdict)
    if d.top:
        for e in d.top.evidence:
            if e.holds or verbose or e.role == "requires":
                console.print(_evidence_line(e))
    if len(d.causes) > 1:
        also = Text("ALSO     ", style="bold")
        also.append(
            " · ".join(
                f"{c.cause} {c.score:.2f}" + (f" (via {', '.join(c.explained_by)})" if c.explained_by else "")
                for c in d.causes[1:]
            )
        )
        console.print(also)
        if verbose:
            for c in d.causes[1:]:
                console.print(Text(f"  {c.cause}", style="bold"))
                for e in c.evidence:
                    console.print(_evidence_line(e))
    console.print(Text("FIRST ACTIONS", style="bold"))
    if not d.first_actions:
        console.print(Text("    none: nothing to act on", style="dim"))
    for i, a in enumerate(d.first_actions, start=1):
        console.print(Text(f"  {i}. {a.text}"))
        if a.confirm:
            console.print(Text(f"     confirm: {a.confirm}", style="cyan"))
    console.print(Text("DO NOT", style="bold"))
    for f in d.forbidden:
        line = Text("  ✗ ", style="red")
        line.append(f.action, style="bold red")
        line.append(f" — {f.reason}")
        console.print(line)
    for signal, reason in d.signal_problems:
        line = Text("UNREADABLE   ", style="bold yellow")
        line.append(f"{signal}: {reason}")
        console.print(line)
    if d.missing_signals:
        blind = Text("BLIND SPOTS  ", style="bold yellow")
        blind.append(", ".join(d.missing_signals) + " (missing: unknown, never healthy)")
        console.print(blind)
    if verbose:
        ruled = [c for c in d.walked if c.status != "ranked"]
        if ruled:
            console.print(Text("RULED OUT", style="bold"))
            for c in ruled:
                console.print(Text(f"  {c.cause}: {c.why_not}", style="dim"))
    return buffer.getvalue()
