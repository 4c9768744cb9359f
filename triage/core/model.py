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

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "signal": self.signal,
            "value": _num(self.value),
            "baseline": _num(self.baseline),
            "check": self.check,
            "holds": self.holds,
            "role": self.role,
        }
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
    """An action that would be wrong now, with the reason drawn from the evidence."""

    action: str
    reason: str

    def to_json(self) -> dict[str, Any]:
        return {"action": self.action, "reason": self.reason}


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
            "signal_problems": dict(self.signal_problems),
            "ruled_out": [
                {"cause": c.cause, "status": c.status, "why": c.why_not}
                for c in self.walked
                if c.status != "ranked"
            ],
        }
