"""Renderings of a Diagnosis: terminal text and JSON (Markdown is `triage.core.markdown`).

The text and the Markdown lay out the sections of `triage.core.sections`, which the TUI
and the webhook service's messages read too, so all of them say the same thing. The
terminal view puts the symptom and the verdict first so an engineer paged at night
reads it in ten seconds; colour only on a terminal, and never when NO_COLOR is set
(rich handles both). JSON is the contract of VOCABULARY.md.
"""

from __future__ import annotations

import io
import json
import math

from rich.console import Console
from rich.text import Text

from triage.core.model import Diagnosis
from triage.core.sections import Spans, Tone, sections


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
    s = sections(diagnosis)
    h = s.headline
    head = Text()
    head.append(h.title, style="bold magenta")
    head.append(f"  at {h.at} · {h.onset} · symptom {h.source}", style="dim")
    if h.visible is False:
        head.append(" · not visible in the signals", style="yellow")
    console.print(head)
    v = s.verdict
    verdict = Text("VERDICT  ", style="bold")
    if v.top:
        verdict.append(v.top.cause, style=STYLES[v.tone])
        verdict.append(f" ({v.top.layer}) — {v.top.title}  score {v.top.score:.2f}")
        if v.top.explains:
            verdict.append(f"  explains {', '.join(v.top.explains)}", style=STYLES["muted"])
    elif v.kind == "unexplained":
        verdict.append(f"{v.message} (see the first look and the blind spots)", style=STYLES[v.tone])
    else:
        verdict.append(f"{v.message}; nothing to blame yet", style=STYLES[v.tone])
    console.print(verdict)
    if v.top:
        for e in v.top.evidence:
            if e.in_brief or verbose:
                console.print(_line(e.spans, "    "))
    if s.also:
        console.print(Text("ALSO     ", style="bold").append(" · ".join(c.summary for c in s.also)))
        if verbose:
            for c in s.also:
                console.print(Text(f"  {c.cause}", style="bold"))
                for e in c.evidence:
                    console.print(_line(e.spans, "    "))
    console.print(Text("FIRST ACTIONS", style="bold"))
    if not s.actions:
        console.print(Text("    none: nothing to act on", style="dim"))
    for a in s.actions:
        console.print(Text(f"  {a.index}. {a.text}"))
        if a.confirm:
            console.print(Text(f"     confirm: {a.confirm}", style=STYLES["confirm"]))
    console.print(Text("DO NOT", style="bold"))
    for f in s.forbidden:
        console.print(_line(f.spans, "  ✗ ", "red"))
    for u in s.unreadable:
        console.print(Text("UNREADABLE   ", style="bold yellow").append(f"{u.signal}: {u.reason}"))
    if s.missing:
        blind = Text("BLIND SPOTS  ", style="bold yellow")
        console.print(blind.append(", ".join(s.missing) + " (missing: unknown, never healthy)"))
    if verbose and s.ruled_out:
        console.print(Text("RULED OUT", style="bold"))
        for ruled in s.ruled_out:
            console.print(Text(f"  {ruled.cause}: {ruled.why_not}", style="dim"))
    return buffer.getvalue()
