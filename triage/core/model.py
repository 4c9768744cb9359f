"""The diagnosis as data: what the walk concludes and every rendering reads.

Plain frozen dataclasses, no behaviour beyond JSON conversion, so the CLI, the TUI, the
webhook service and the report all read one shape. `to_json` is the public contract of
VOCABULARY.md ("Diagnosis as JSON"): keys there are stable; more may be added.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Literal

from signals.timeparse import format_instant

SYMPTOMS: tuple[str, ...] = ("ttft_slow", "tpot_slow", "errors", "rejected", "cost_up", "quality_down")
LAYERS: tuple[str, ...] = ("request", "engine", "resource", "supply")
AUTO = "auto"
NO_SYMPTOM = "none"

Role = Literal["requires", "supports", "against", "detect"]
Status = Literal["ranked", "ruled_out", "unproven", "no_departure"]
Verdict = Literal["cause", "ambiguous", "unexplained", "no_incident"]
VERDICTS: tuple[str, ...] = ("cause", "ambiguous", "unexplained", "no_incident")


def _num(value: float | None) -> float | None:
    """JSON-safe number: None for missing or non-finite, rounded for reading."""
    if value is None or not math.isfinite(value):
        return None
    return float(f"{value:.4g}")


@dataclass(frozen=True)
class Evidence:
    """One check evaluated against the frame: the value now, its baseline, the verdict."""

    signal: str
    check: str
    holds: bool | None
    value: float | None = None
    baseline: float | None = None
    role: Role = "requires"
    note: str = ""
    replicas: tuple[str, ...] = ()
    departure: bool = False
    margin: float = 0.0
    live: bool = True
    """False when what the check found held earlier in the incident but no longer holds in
    the recent window (a rollout that finished, a restart wave that ended): past evidence,
    shown as such and weighed less."""

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "signal": self.signal,
            "value": _num(self.value),
            "baseline": _num(self.baseline),
            "check": self.check,
            "holds": self.holds,
            "role": self.role,
        }
        if self.holds and not self.live:
            out["live"] = False
        if self.note:
            out["note"] = self.note
        if self.replicas:
            out["replicas"] = list(self.replicas)
        return out


@dataclass(frozen=True)
class Action:
    """A first action: what to do, and the query or command that confirms it."""

    id: str
    text: str
    confirm: str = ""

    def to_json(self) -> dict[str, Any]:
        out = {"id": self.id, "text": self.text}
        if self.confirm:
            out["confirm"] = self.confirm
        return out


@dataclass(frozen=True)
class Forbidden:
    """An action that would be wrong now, with the reason drawn from the evidence.

    `tempting` marks the actions this evidence makes tempting (scale-out while queues rise,
    raising gpu_memory_utilization while KV is full): shown first. The others are red lines
    that hold on every path and are folded into one line of the terminal text.
    """

    action: str
    reason: str
    tempting: bool = True

    def to_json(self) -> dict[str, Any]:
        return {"action": self.action, "reason": self.reason, "tempting": self.tempting}


@dataclass(frozen=True)
class FirstMover:
    """A signal (on one replica, or the fleet's view) that left its baseline around the onset."""

    signal: str
    replica: str | None
    layer: str
    moved_at: float
    before: float
    after: float

    @property
    def change(self) -> str:
        return f"{_short(self.before)} -> {_short(self.after)}"

    def to_json(self) -> dict[str, Any]:
        return {
            "signal": self.signal,
            "replica": self.replica,
            "layer": self.layer,
            "moved_at": format_instant(self.moved_at),
            "change": self.change,
            "before": _precise(self.before),
            "after": _precise(self.after),
        }


@dataclass(frozen=True)
class Unmonitored:
    """An exporter the fleet does not run at all: its signals, and the causes left unprovable."""

    source: str
    signals: tuple[str, ...]
    causes: tuple[str, ...]

    def to_json(self) -> dict[str, Any]:
        return {"source": self.source, "signals": list(self.signals), "causes": list(self.causes)}


def _precise(value: float) -> float | None:
    """JSON-safe, to six significant digits: enough to give `change` back as it was written."""
    if not math.isfinite(value):
        return None
    return float(f"{value:.6g}")


def _short(value: float) -> str:
    if not math.isfinite(value):
        return "n/a"
    if value == 0:
        return "0"
    if abs(value) >= 100:
        return f"{value:.0f}"
    return f"{value:.3g}"


@dataclass(frozen=True)
class CauseFinding:
    """One cause as the walk saw it: its status, score, evidence and relations."""

    cause: str
    layer: str
    title: str
    status: Status
    score: float
    evidence: tuple[Evidence, ...]
    explains: tuple[str, ...] = ()
    explained_by: tuple[str, ...] = ()
    actions: tuple[Action, ...] = ()
    why_not: str = ""

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "cause": self.cause,
            "layer": self.layer,
            "score": round(self.score, 3),
            "evidence": [e.to_json() for e in self.evidence],
        }
        if self.explains:
            out["explains"] = list(self.explains)
        if self.explained_by:
            out["explained_by"] = list(self.explained_by)
        return out


@dataclass(frozen=True)
class Diagnosis:
    """The answer: the symptom, ranked causes, first actions, forbidden actions, blind spots."""

    symptom: str
    symptom_source: str
    at: float
    onset: float | None
    baseline_window: tuple[float, float] | None
    causes: tuple[CauseFinding, ...]
    first_actions: tuple[Action, ...]
    forbidden: tuple[Forbidden, ...]
    missing_signals: tuple[str, ...]
    symptom_evidence: tuple[Evidence, ...] = ()
    symptom_visible: bool | None = None
    walked: tuple[CauseFinding, ...] = field(default=(), repr=False)
    layers: tuple[tuple[str, tuple[str, ...]], ...] = ()
    signal_problems: tuple[tuple[str, str], ...] = ()
    fleet: tuple[tuple[str, str], ...] = ()
    """The labels of the fleet diagnosed (`namespace`, `model_name`, its workload); empty when
    the signals were not scoped to one fleet (a fixture of one fleet, an unscoped selector)."""
    verdict: Verdict = "unexplained"
    """`cause`, `ambiguous` (the first causes within the margin), `unexplained` (the symptom
    is breached and no cause holds) or `no_incident` (the server's signals show no breach)."""
    ambiguous: tuple[tuple[str, str], ...] = ()
    """When the verdict is `ambiguous`: each cause within the margin, and what tells it apart."""
    first_movers: tuple[FirstMover, ...] = ()
    notes: tuple[str, ...] = ()
    """What the verdict rests on beyond the causes: the second opinion of the first movers,
    a history that begins inside the window, a symptom not breached server-side."""
    unmonitored: tuple[Unmonitored, ...] = ()
    stand_ins: tuple[tuple[str, str], ...] = ()
    """Signals the evidence read from a source that stands in for them, and what it measures."""
    history_start: float | None = None
    """When the data begins inside the lookback (a new fleet, a restarted Prometheus): there
    is no baseline before it, and no onset is placed at it."""

    @property
    def top(self) -> CauseFinding | None:
        return self.causes[0] if self.causes else None

    def to_json(self) -> dict[str, Any]:
        return {
            "symptom": self.symptom,
            "symptom_source": self.symptom_source,
            "fleet": dict(self.fleet) or None,
            "at": format_instant(self.at),
            "onset": format_instant(self.onset) if self.onset is not None else None,
            "symptom_visible": self.symptom_visible,
            "symptom_evidence": [e.to_json() for e in self.symptom_evidence],
            "causes": [c.to_json() for c in self.causes],
            "first_actions": [a.to_json() for a in self.first_actions],
            "forbidden": [f.to_json() for f in self.forbidden],
            "missing_signals": list(self.missing_signals),
            "verdict": self.verdict,
            "ambiguous": [{"cause": c, "tells_apart": t} for c, t in self.ambiguous],
            "first_movers": [m.to_json() for m in self.first_movers],
            "notes": list(self.notes),
            "unmonitored": [u.to_json() for u in self.unmonitored],
            "history_start": format_instant(self.history_start) if self.history_start is not None else None,
            "signal_problems": dict(self.signal_problems),
            "stand_ins": dict(self.stand_ins),
            "ruled_out": [
                {"cause": c.cause, "status": c.status, "why": c.why_not}
                for c in self.walked
                if c.status != "ranked"
            ],
        }
