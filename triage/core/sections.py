"""The diagnosis as sections: what every rendering of a verdict says, built once.

The terminal text, the Markdown for tickets, the TUI's verdict and warnings and the
webhook service's messages all show the same parts of a Diagnosis: the headline, the
verdict and the evidence that carries it, the other ranked causes, the first actions
with their confirm queries, what not to do and why, what could not be read. Building
those parts in one place keeps the renderings from drifting apart (one hiding a check
another shows, one wording a verdict another does not); a rendering only lays the
sections out and colours them.

Sections are plain frozen data. Inline text comes as spans tagged with a tone, a
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
from triage.core.model import CauseFinding, Diagnosis, Evidence, Status
from triage.core.walk import onset_text

Tone = Literal[
    "plain",
    "holds",
    "fails",
    "unknown",
    "muted",
    "strong",
    "cause",
    "forbidden",
    "replicas",
    "confirm",
    "warn",
    "ok",
]
"""What a span means, for a rendering to colour: a check's result (`holds`, `fails`,
`unknown`), secondary text (`muted`), a cause in the walk (`strong`), the verdict's
cause (`cause`), an action not to take (`forbidden`), replica names (`replicas`), a
confirm query (`confirm`), a verdict without a cause (`warn` when the symptom is real,
`ok` when nothing departs)."""

MARKS: dict[bool | None, str] = {True: "✔", False: "✘", None: "?"}
RESULT_TONES: dict[bool | None, Tone] = {True: "holds", False: "fails", None: "unknown"}

UNEXPLAINED = "the symptom is real, but no cause in the playbooks holds; nothing is guessed"
"""The verdict when the symptom shows but no cause holds: said, never papered over with a guess."""

QUIET = "no cause departs from its baseline"
"""The verdict when nothing departs from its baseline."""

REPLICAS_SHOWN = 4
"""Replica names listed on an evidence line before the rest is elided."""


@dataclass(frozen=True)
class Span:
    """A run of text and what it means."""

    text: str
    tone: Tone = "plain"


Spans = tuple[Span, ...]


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


VerdictKind = Literal["cause", "unexplained", "quiet"]


@dataclass(frozen=True)
class Verdict:
    """The answer: the top cause, or why there is none (the symptom is real, or nothing departs)."""

    top: RankedCause | None
    visible: bool | None

    @property
    def kind(self) -> VerdictKind:
        if self.top is not None:
            return "cause"
        return "unexplained" if self.visible else "quiet"

    @property
    def message(self) -> str:
        """The sentence that stands in for a cause; empty when there is one."""
        return _VERDICT_MESSAGES[self.kind]

    @property
    def tone(self) -> Tone:
        return _VERDICT_TONES[self.kind]


_VERDICT_MESSAGES: dict[VerdictKind, str] = {"cause": "", "unexplained": UNEXPLAINED, "quiet": QUIET}
_VERDICT_TONES: dict[VerdictKind, Tone] = {"cause": "cause", "unexplained": "warn", "quiet": "ok"}


@dataclass(frozen=True)
class ActionItem:
    """A first action, numbered, with the query or command that confirms it."""

    index: int
    text: str
    confirm: str


@dataclass(frozen=True)
class ForbiddenItem:
    """An action not to take now, and the reason drawn from the evidence."""

    action: str
    reason: str

    @property
    def spans(self) -> Spans:
        return (Span(self.action, "forbidden"), Span(f" — {self.reason}"))


@dataclass(frozen=True)
class Unreadable:
    """A signal that could not be read, and why (the server's words)."""

    signal: str
    reason: str


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
    unreadable: tuple[Unreadable, ...]
    missing: tuple[str, ...]
    walked: tuple[WalkedCause, ...]

    @property
    def also(self) -> tuple[RankedCause, ...]:
        """The ranked causes after the top one."""
        return self.causes[1:]

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
    return Headline(d.symptom, d.symptom_source, format_instant(d.at), onset_text(d), d.symptom_visible)


def forbidden(d: Diagnosis) -> tuple[ForbiddenItem, ...]:
    return tuple(ForbiddenItem(f.action, printable(f.reason)) for f in d.forbidden)


def unreadable(d: Diagnosis) -> tuple[Unreadable, ...]:
    return tuple(Unreadable(printable(signal), printable(reason)) for signal, reason in d.signal_problems)


def sections(d: Diagnosis) -> Sections:
    """Every section of the diagnosis."""
    causes = tuple(ranked_cause(c) for c in d.causes)
    return Sections(
        headline=headline(d),
        verdict=Verdict(causes[0] if causes else None, d.symptom_visible),
        causes=causes,
        actions=tuple(action_item(i, a.text, a.confirm) for i, a in enumerate(d.first_actions, start=1)),
        forbidden=forbidden(d),
        unreadable=unreadable(d),
        missing=tuple(printable(m) for m in d.missing_signals),
        walked=tuple(walked_cause(c) for c in d.walked),
    )
