"""The diagnosis as sections: what every rendering of a verdict says, built once.

The terminal text, the Markdown for tickets, the TUI's verdict and warnings and the
webhook service's messages all show the same parts of a Diagnosis: the verdict (a cause,
an ambiguity and what tells it apart, an unexplained symptom, or no incident) and the
evidence that carries it, the headline, the first movers, the notes the verdict rests on,
the other ranked causes, the first actions with their confirm queries, what not to do
and why (the actions this evidence makes tempting, then the red lines of every path),
what could not be read and what is not monitored at all. Building
those parts in one place keeps the renderings from drifting apart (one hiding a check
another shows, one wording a verdict another does not); a rendering only lays the
sections out and colours them.

Sections are plain frozen data (the smaller parts are `triage.core.parts`, re-exported
here). Inline text comes as spans tagged with a tone, a
semantic style name (`holds`, `fails`, `unknown`, `forbidden`, `muted`, ...) that each
rendering maps to its own colours; nothing here knows Rich, Textual or jinja2.

Every string that may come from outside (replica names, notes and reasons built from
label values, servers' messages, and the playbooks' text for good measure) passes
through `printable` here, once, so no rendering can forget to escape it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from signals.timeparse import format_instant
from triage.core.escape import printable
from triage.core.model import CauseFinding, Diagnosis, Evidence, FirstMover, Forbidden, Status, Unmonitored
from triage.core.parts import MARKS as MARKS
from triage.core.parts import RESULT_TONES as RESULT_TONES
from triage.core.parts import ActionItem as ActionItem
from triage.core.parts import FirstMoverLine as FirstMoverLine
from triage.core.parts import ForbiddenItem as ForbiddenItem
from triage.core.parts import Span as Span
from triage.core.parts import Spans as Spans
from triage.core.parts import Tone as Tone
from triage.core.parts import UnmonitoredSource as UnmonitoredSource
from triage.core.parts import Unreadable as Unreadable
from triage.core.parts import joined as joined
from triage.core.walk import onset_text

UNEXPLAINED = "unexplained: {symptom} is breached and no cause holds"
"""The verdict when the symptom shows but no cause holds: said, never papered over with a guess."""

NO_INCIDENT = "no incident: {symptom} is not breached server-side"
"""The verdict when the server's own signals do not breach the symptom."""

PAST = "(past)"
"""After evidence that held earlier in the incident and has ended."""

REPLICAS_SHOWN = 4
"""Replica names listed on an evidence line before the rest is elided."""


@dataclass(frozen=True)
class Headline:
    """What was diagnosed and when: the symptom, where it came from, the moment and the onset."""

    symptom: str
    source: str
    at: str
    onset: str
    visible: bool | None

    @property
    def title(self) -> str:
        """The symptom as a heading: `TTFT SLOW`."""
        return self.symptom.replace("_", " ").upper()


@dataclass(frozen=True)
class EvidenceLine:
    """One check as shown: its result mark, the check, the note, the replicas it is about."""

    signal: str
    role: str
    check: str
    holds: bool | None
    value: float | None
    baseline: float | None
    note: str
    replicas: tuple[str, ...]
    live: bool = True
    """False for evidence that held earlier in the incident and has ended: shown as past."""

    @property
    def past(self) -> bool:
        return bool(self.holds) and not self.live

    @property
    def mark(self) -> str:
        return MARKS[self.holds]

    @property
    def tone(self) -> Tone:
        return RESULT_TONES[self.holds]

    @property
    def in_brief(self) -> bool:
        """Shown under a short verdict: the checks that hold, and the required ones whatever they say."""
        return bool(self.holds) or self.role == "requires"

    @property
    def replica_text(self) -> str:
        """The first few replicas, `…` when there are more."""
        more = " …" if len(self.replicas) > REPLICAS_SHOWN else ""
        return ", ".join(self.replicas[:REPLICAS_SHOWN]) + more

    @property
    def spans(self) -> Spans:
        out = [Span(self.mark, self.tone), Span(f" {self.check}")]
        if self.note:
            out.append(Span(f"  {self.note}", "muted"))
        if self.replicas:
            out.append(Span(f"  [{self.replica_text}]", "replicas"))
        if self.past:
            out.append(Span(f" {PAST}", "muted"))
        return tuple(out)


@dataclass(frozen=True)
class RankedCause:
    """A ranked cause: its score, the causes it explains or is the mechanism of, its evidence."""

    cause: str
    layer: str
    title: str
    score: float
    explains: tuple[str, ...]
    explained_by: tuple[str, ...]
    evidence: tuple[EvidenceLine, ...]

    @property
    def holding(self) -> tuple[EvidenceLine, ...]:
        return tuple(e for e in self.evidence if e.holds)

    @property
    def brief(self) -> tuple[EvidenceLine, ...]:
        return tuple(e for e in self.evidence if e.in_brief)

    @property
    def summary(self) -> str:
        """`kv_pressure 0.93 (via replica_down)`: one entry of the ALSO line."""
        via = f" (via {', '.join(self.explained_by)})" if self.explained_by else ""
        return f"{self.cause} {self.score:.2f}{via}"


VerdictKind = Literal["cause", "ambiguous", "unexplained", "no_incident"]


@dataclass(frozen=True)
class Contender:
    """A cause an ambiguous verdict cannot choose, and what tells it apart (a query or command)."""

    cause: str
    layer: str
    score: float | None
    tells: str

    @property
    def detail(self) -> str:
        """`resource 0.91`: its layer and score where ranked."""
        return " ".join(x for x in (self.layer, f"{self.score:.2f}" if self.score is not None else "") if x)

    @property
    def label(self) -> str:
        """`kv_pressure (resource 0.91)`."""
        return f"{self.cause} ({self.detail})" if self.detail else self.cause


@dataclass(frozen=True)
class Verdict:
    """The answer: the top cause, the causes it cannot choose between, or why there is none.

    `kind` is the diagnosis's own verdict (`cause`, `ambiguous`, `unexplained`,
    `no_incident`); nothing here second-guesses it, but a `cause` verdict without a ranked
    cause reads as unexplained rather than naming nothing.
    """

    kind: VerdictKind
    top: RankedCause | None
    symptom: str
    visible: bool | None
    contenders: tuple[Contender, ...] = ()
    hint: str = ""
    """Where to look when no cause holds: `see the first movers`, `see the blind spots`."""

    @property
    def causes(self) -> tuple[str, ...]:
        """The causes the verdict names: the top one, or the contenders."""
        if self.kind == "ambiguous":
            return tuple(c.cause for c in self.contenders)
        return (self.top.cause,) if self.kind == "cause" and self.top else ()

    @property
    def message(self) -> str:
        """The verdict in words, as every rendering leads with it (the cause's detail aside).

        `replica_down (supply)`, `ambiguous between kv_pressure and batch_oversized`,
        `unexplained: ttft_slow is breached and no cause holds`, `no incident: ttft_slow is
        not breached server-side`.
        """
        if self.kind == "cause" and self.top is not None:
            return f"{self.top.cause} ({self.top.layer})" if self.top.layer else self.top.cause
        if self.kind == "ambiguous":
            return f"ambiguous between {joined(self.causes)}"
        if self.kind == "no_incident":
            return NO_INCIDENT.format(symptom=self.symptom if self.symptom != "none" else "no symptom")
        return UNEXPLAINED.format(symptom=self.symptom)

    @property
    def sentence(self) -> str:
        """The message with where to look next, for a verdict without a cause."""
        if self.kind == "unexplained" and self.hint:
            return f"{self.message} — {self.hint}"
        return self.message

    @property
    def tone(self) -> Tone:
        return _VERDICT_TONES[self.kind]


_VERDICT_TONES: dict[VerdictKind, Tone] = {
    "cause": "cause",
    "ambiguous": "warn",
    "unexplained": "warn",
    "no_incident": "ok",
}


@dataclass(frozen=True)
class WalkedCause:
    """A cause as the walk asked it: ranked, ruled out, unproven or not departing, and why not."""

    cause: str
    status: Status
    score: float
    explained_by: tuple[str, ...]
    why_not: str
    evidence: tuple[EvidenceLine, ...]

    @property
    def label(self) -> Spans:
        """The cause in the walk: a mark, the cause, its score or status (`via` its deeper cause)."""
        if self.status == "ranked":
            out = [Span("✔ ", "holds"), Span(self.cause, "strong"), Span(f" {self.score:.2f}")]
            if self.explained_by:
                out.append(Span(f"  via {', '.join(self.explained_by)}", "muted"))
            return tuple(out)
        mark: Span = Span("? ", "unknown") if self.status == "unproven" else Span("✘ ", "fails")
        return (mark, Span(self.cause), Span(f"  {self.status.replace('_', ' ')}", "muted"))


@dataclass(frozen=True)
class Sections:
    """Every section of one diagnosis, in the order the renderings show them."""

    headline: Headline
    verdict: Verdict
    causes: tuple[RankedCause, ...]
    actions: tuple[ActionItem, ...]
    forbidden: tuple[ForbiddenItem, ...]
    """Every action not to take: the tempting ones first, in the diagnosis's order, then the red lines."""
    unreadable: tuple[Unreadable, ...]
    missing: tuple[str, ...]
    """Every signal missing, whether its exporter runs or not (`blind` are the former)."""
    walked: tuple[WalkedCause, ...]
    first_movers: tuple[FirstMoverLine, ...] = ()
    """Earliest first."""
    notes: tuple[str, ...] = ()
    unmonitored: tuple[UnmonitoredSource, ...] = ()

    @property
    def also(self) -> tuple[RankedCause, ...]:
        """The ranked causes after the top one."""
        return self.causes[1:]

    @property
    def others(self) -> tuple[RankedCause, ...]:
        """The ranked causes the verdict does not name (after the top one, or the contenders)."""
        named = set(self.verdict.causes)
        return tuple(c for c in self.causes if c.cause not in named)

    @property
    def tempting(self) -> tuple[ForbiddenItem, ...]:
        """The actions this evidence makes tempting, in order: each shown with its reason."""
        return tuple(f for f in self.forbidden if f.tempting)

    @property
    def red_lines(self) -> tuple[ForbiddenItem, ...]:
        """The actions wrong on every path, folded into one line where space is short."""
        return tuple(f for f in self.forbidden if not f.tempting)

    @property
    def blind(self) -> tuple[str, ...]:
        """Missing signals whose exporter runs (the unmonitored sources' signals are theirs)."""
        theirs = {signal for u in self.unmonitored for signal in u.signals}
        return tuple(m for m in self.missing if m not in theirs)

    @property
    def ruled_out(self) -> tuple[WalkedCause, ...]:
        return tuple(c for c in self.walked if c.status != "ranked")


def evidence_line(e: Evidence) -> EvidenceLine:
    return EvidenceLine(
        e.signal,
        e.role,
        printable(e.check),
        e.holds,
        e.value,
        e.baseline,
        printable(e.note),
        tuple(printable(r) for r in e.replicas),
        e.live,
    )


def ranked_cause(c: CauseFinding) -> RankedCause:
    return RankedCause(
        c.cause,
        c.layer,
        printable(c.title),
        c.score,
        c.explains,
        c.explained_by,
        tuple(evidence_line(e) for e in c.evidence),
    )


def walked_cause(c: CauseFinding) -> WalkedCause:
    return WalkedCause(
        c.cause,
        c.status,
        c.score,
        c.explained_by,
        printable(c.why_not),
        tuple(evidence_line(e) for e in c.evidence),
    )


def action_item(index: int, text: str, confirm: str) -> ActionItem:
    return ActionItem(index, printable(text), printable(confirm))


def headline(d: Diagnosis) -> Headline:
    return Headline(
        printable(d.symptom),
        printable(d.symptom_source),
        format_instant(d.at),
        onset_text(d),
        d.symptom_visible,
    )


def forbidden_item(f: Forbidden) -> ForbiddenItem:
    return ForbiddenItem(printable(f.action), printable(f.reason), f.tempting)


def forbidden(d: Diagnosis) -> tuple[ForbiddenItem, ...]:
    """The tempting actions first, in the diagnosis's order, then the red lines."""
    items = [forbidden_item(f) for f in d.forbidden]
    return tuple([f for f in items if f.tempting] + [f for f in items if not f.tempting])


def unreadable(d: Diagnosis) -> tuple[Unreadable, ...]:
    return tuple(Unreadable(printable(signal), printable(reason)) for signal, reason in d.signal_problems)


def first_mover(m: FirstMover) -> FirstMoverLine:
    return FirstMoverLine(
        printable(m.signal),
        printable(m.replica) if m.replica is not None else None,
        printable(m.layer),
        format_instant(m.moved_at),
        printable(m.change),
    )


def unmonitored_source(u: Unmonitored) -> UnmonitoredSource:
    return UnmonitoredSource(
        printable(u.source), tuple(printable(x) for x in u.signals), tuple(printable(x) for x in u.causes)
    )


def verdict(d: Diagnosis, causes: tuple[RankedCause, ...]) -> Verdict:
    """The diagnosis's verdict, with the contenders of an ambiguous one and where to look for none."""
    top = causes[0] if causes else None
    kind: VerdictKind = d.verdict
    if kind == "cause" and top is None:
        kind = "unexplained"
    by_id = {c.cause: c for c in causes}
    contenders: tuple[Contender, ...] = ()
    if kind == "ambiguous":
        named = d.ambiguous or tuple((c.cause, "") for c in causes[:2])
        contenders = tuple(
            Contender(
                printable(cause),
                by_id[cause].layer if cause in by_id else "",
                by_id[cause].score if cause in by_id else None,
                printable(tells),
            )
            for cause, tells in named
        )
    if d.first_movers:
        hint = "see the first movers"
    elif d.missing_signals or d.unmonitored:
        hint = "see the blind spots"
    else:
        hint = "nothing is guessed"
    return Verdict(kind, top, printable(d.symptom), d.symptom_visible, contenders, hint)


def sections(d: Diagnosis) -> Sections:
    """Every section of the diagnosis."""
    causes = tuple(ranked_cause(c) for c in d.causes)
    return Sections(
        headline=headline(d),
        verdict=verdict(d, causes),
        causes=causes,
        actions=tuple(action_item(i, a.text, a.confirm) for i, a in enumerate(d.first_actions, start=1)),
        forbidden=forbidden(d),
        unreadable=unreadable(d),
        missing=tuple(printable(m) for m in d.missing_signals),
        walked=tuple(walked_cause(c) for c in d.walked),
        first_movers=tuple(first_mover(m) for m in d.first_movers),
        notes=tuple(printable(n) for n in d.notes),
        unmonitored=tuple(unmonitored_source(u) for u in d.unmonitored),
    )
