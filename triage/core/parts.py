"""The smaller parts of the diagnosis sections: spans and their tones, and the lines that
are not about one cause (first actions, actions not to take, unreadable signals, first
movers, unmonitored sources).

Plain frozen data like `triage.core.sections`, which builds them (escaping every outside
string there, once) and which every rendering imports them from.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

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
`ok` when there is no incident)."""

MARKS: dict[bool | None, str] = {True: "✔", False: "✘", None: "?"}
RESULT_TONES: dict[bool | None, Tone] = {True: "holds", False: "fails", None: "unknown"}


@dataclass(frozen=True)
class Span:
    """A run of text and what it means."""

    text: str
    tone: Tone = "plain"


Spans = tuple[Span, ...]


def joined(names: tuple[str, ...] | list[str]) -> str:
    """`a`, `a and b`, `a, b and c`."""
    if len(names) <= 1:
        return "".join(names)
    return f"{', '.join(names[:-1])} and {names[-1]}"


@dataclass(frozen=True)
class ActionItem:
    """A first action, numbered, with the query or command that confirms it."""

    index: int
    text: str
    confirm: str


_NOW = " Now: "
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=\S)")


@dataclass(frozen=True)
class ForbiddenItem:
    """An action not to take now, and the reason drawn from the evidence.

    `tempting`: this evidence makes it tempting (shown first, each with its reason);
    otherwise a red line that holds on every path.
    """

    action: str
    reason: str
    tempting: bool = True

    @property
    def spans(self) -> Spans:
        return (Span(self.action, "forbidden"), Span(f" — {self.reason}"))

    @property
    def rule(self) -> str:
        """The reason without its `Now: ...` evidence: why the action is wrong in general."""
        return self.reason.split(_NOW, 1)[0].strip()

    @property
    def now(self) -> str:
        """The evidence of this incident the reason ends with (`Now: ...`), or empty."""
        parts = self.reason.split(_NOW, 1)
        return f"Now: {parts[1].strip()}" if len(parts) == 2 else ""

    @property
    def first_sentence(self) -> str:
        """The rule's first sentence: the reason, shortened for one screen."""
        return _SENTENCE_END.split(self.rule, maxsplit=1)[0]


@dataclass(frozen=True)
class Unreadable:
    """A signal that could not be read, and why (the server's words)."""

    signal: str
    reason: str


@dataclass(frozen=True)
class FirstMoverLine:
    """A signal that left its baseline around the onset: where, its layer, when, and how far."""

    signal: str
    replica: str | None
    layer: str
    moved_at: str
    change: str

    @property
    def where(self) -> str:
        """`kv_usage_ratio@vllm-2`, or the signal alone for the fleet's view."""
        return f"{self.signal}@{self.replica}" if self.replica else self.signal

    @property
    def clock(self) -> str:
        """`14:21:30Z`: the time of day it moved (the date is the headline's)."""
        return self.moved_at[11:] if len(self.moved_at) > 11 else self.moved_at

    @property
    def text(self) -> str:
        """`kv_usage_ratio@vllm-2 (resource) 14:21:30Z 0.6 -> 0.99`."""
        layer = f" ({self.layer})" if self.layer else ""
        return f"{self.where}{layer} {self.clock} {self.change}"


@dataclass(frozen=True)
class UnmonitoredSource:
    """An exporter the fleet does not run at all, its signals, and the causes left unprovable."""

    source: str
    signals: tuple[str, ...]
    causes: tuple[str, ...]

    @property
    def text(self) -> str:
        """`gateway (5 signals): gateway_bottleneck, stale_backend unprovable`."""
        count = f"{len(self.signals)} signal{'s' if len(self.signals) != 1 else ''}"
        unprovable = f": {', '.join(self.causes)} unprovable" if self.causes else ""
        return f"{self.source} ({count}){unprovable}"

    @property
    def full(self) -> str:
        """The text with every signal named: `gateway (5 signals: a, b, ...): ... unprovable`."""
        unprovable = f": {', '.join(self.causes)} unprovable" if self.causes else ""
        return f"{self.source} ({len(self.signals)} signals: {', '.join(self.signals)}){unprovable}"
