"""The playbook schema: the strict pydantic models one playbook file must fit, and `Knowledge`.

Unknown keys are rejected and closed sets are literals, so a typo fails at load. Which
parameters each check kind takes is declared here (`CHECK_PARAMS`), beside the model
that enforces it. Kept apart from the loading so the shape of a playbook reads in one
place.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Discriminator, Field, Tag, model_validator

from signals.timeparse import parse_duration

SCHEMA_VERSION = 1

CheckKind = Literal[
    "rise",
    "drop",
    "above",
    "below",
    "event",
    "change",
    "label_is",
    "outlier",
    "broad",
    "sudden",
    "gradual",
    "shortfall",
    "replicas_lost",
    "wave",
    "steady",
    "symptom_is",
]
View = Literal["fleet", "max_replica", "median_replica"]
LayerName = Literal["request", "engine", "resource", "supply"]

# Which parameters each check kind takes; the first tuple is required, the second optional.
CHECK_PARAMS: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    "rise": (("signal",), ("factor", "min_delta", "view", "baseline")),
    "drop": (("signal",), ("factor", "min_delta", "view", "baseline")),
    "above": (("signal", "threshold"), ("for_", "view")),
    "below": (("signal", "threshold"), ("for_", "view")),
    "event": (("signal",), ("threshold", "within")),
    "change": (("signal",), ("labels",)),
    "label_is": (("signal", "label"), ("values", "threshold")),
    "outlier": (("signal",), ("factor", "min_delta", "max_share", "direction")),
    "broad": (("signal",), ("factor", "min_delta", "share", "baseline")),
    "sudden": (("signal",), ("factor", "within", "share", "view", "baseline")),
    "gradual": (("signal",), ("factor", "within", "share", "view", "baseline")),
    "shortfall": (("signal", "of"), ("min_delta", "factor", "within")),
    "replicas_lost": ((), ("min_count",)),
    "wave": (("signal",), ("min_count", "threshold")),
    "steady": (("signal",), ("factor", "min_delta", "direction", "view", "baseline", "times")),
    "symptom_is": (("values",), ()),
}
_PARAM_NAMES = (
    "signal",
    "factor",
    "min_delta",
    "view",
    "threshold",
    "for_",
    "labels",
    "label",
    "values",
    "max_share",
    "direction",
    "share",
    "within",
    "of",
    "min_count",
    "baseline",
    "times",
)


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)


class CheckSpec(_Strict):
    """One check over named signals; its kind decides which parameters it takes."""

    kind: CheckKind
    signal: str | None = None
    view: View | None = None
    factor: float | None = Field(None, gt=0)
    min_delta: float | None = Field(None, ge=0)
    threshold: float | None = None
    for_: str | None = Field(None, alias="for")
    labels: tuple[str, ...] | None = None
    label: str | None = None
    values: tuple[str, ...] | None = None
    max_share: float | None = Field(None, gt=0, le=1)
    direction: Literal["high", "low"] | None = None
    share: float | None = Field(None, gt=0, le=1)
    within: str | None = None
    of: str | tuple[str, ...] | None = None
    min_count: int | None = Field(None, ge=1)
    baseline: Literal["onset", "long"] | None = None
    times: str | None = None
    """Read the signal multiplied by this one (the fleet's views): a hit ratio times the prompt
    length is the cached tokens per request, which longer prompts alone do not lower."""
    weight: float = Field(1.0, gt=0, le=10)
    note: str = ""
    not_: bool = Field(False, alias="not")
    """Holds when the check does not: "no version change", "no OOM kill since the onset"."""
    key: bool = False
    """The cause's signature: when it cannot be evaluated, the cause is unproven, whatever else holds."""

    @model_validator(mode="after")
    def _params_fit_kind(self) -> CheckSpec:
        required, optional = CHECK_PARAMS[self.kind]
        for name in required:
            if getattr(self, name) is None:
                raise ValueError(f"a {self.kind} check needs {name.rstrip('_')}")
        for name in _PARAM_NAMES:
            if getattr(self, name) is not None and name not in required and name not in optional:
                raise ValueError(f"a {self.kind} check takes no {name.rstrip('_')}")
        if self.kind == "label_is" and (self.values is None) == (self.threshold is None):
            raise ValueError(
                "a label_is check needs values or a threshold (the label read as a number), not both"
            )
        for name in ("for_", "within"):
            value = getattr(self, name)
            if value is not None:
                parse_duration(value)
        return self

    def signals(self) -> list[str]:
        return [s for s in (self.signal, *self.of_signals(), self.times) if s is not None]

    def of_signals(self) -> tuple[str, ...]:
        """The signals a shortfall compares against; several are summed (running plus waiting)."""
        if self.of is None:
            return ()
        return (self.of,) if isinstance(self.of, str) else self.of


class SymptomSpec(_Strict):
    title: str
    question: str = ""
    detect: tuple[CheckSpec, ...] = ()
    breach: tuple[CheckSpec, ...] = ()
    """Checks that show the symptom in the server's own signals below the alerting lines of
    `detect` (a P99 well up on its baseline, under the SLO): with none of these nor `detect`
    holding, the verdict is no incident."""
    onset: tuple[str, ...] = ()
    layers: dict[LayerName, tuple[str, ...]] = Field(default_factory=dict)
    first_look: tuple[str, ...] = ()


class AnyOf(_Strict):
    """Holds when any member holds; fails when all fail; unknown otherwise."""

    any: tuple[CheckSpec, ...] = Field(min_length=2)
    weight: float = Field(1.0, gt=0, le=10)
    note: str = ""
    key: bool = False


def _check_or_group(value: Any) -> str:
    if isinstance(value, dict):
        return "any" if "any" in value else "check"
    return "any" if isinstance(value, AnyOf) else "check"


CheckOrGroup = Annotated[
    Annotated[CheckSpec, Tag("check")] | Annotated[AnyOf, Tag("any")],
    Discriminator(_check_or_group),
]


class CauseSpec(_Strict):
    layer: LayerName
    title: str
    mechanism: str = ""
    requires: tuple[CheckOrGroup, ...] = Field(min_length=1)
    supports: tuple[CheckOrGroup, ...] = ()
    against: tuple[CheckOrGroup, ...] = ()
    explains: tuple[str, ...] = ()
    first_actions: tuple[str, ...] = Field(min_length=1)


class ActionSpec(_Strict):
    text: str
    confirm: str = ""


class ForbiddenWhen(_Strict):
    always: bool = False
    symptoms: tuple[str, ...] = ()
    causes: tuple[str, ...] = ()
    checks: tuple[CheckSpec, ...] = ()


class ForbiddenSpec(_Strict):
    title: str
    reason: str
    when: ForbiddenWhen
    unless_top_cause: tuple[str, ...] = ()
    because: dict[str, str] = Field(default_factory=dict)
    """Per top cause, why the action is wrong for that cause in particular (shown with its evidence)."""
    tempting_when: tuple[CheckSpec, ...] = ()
    """Checks that make a red line tempting right now (scale-out while queues rise): when one
    holds, the action is listed first among what not to do, not folded with the red lines.
    A rule triggered by causes or checks is tempting whenever it is flagged."""


class Windows(_Strict):
    baseline: str = "60m"
    recent: str = "5m"
    guard: str = "2m"
    lead: str = "15m"
    lookback: str = "6h"
    warmup: str = "5m"
    """After a series is born (a new fleet, a restarted Prometheus), how long its rates read
    low while their windows fill: no baseline is taken and no onset placed inside it."""

    @model_validator(mode="after")
    def _durations(self) -> Windows:
        for name in ("baseline", "recent", "guard", "lead", "lookback", "warmup"):
            parse_duration(getattr(self, name))
        return self


class AlertSymptom(_Strict):
    """An alertname pattern (a Python regex, searched case-insensitively) and the symptom it means."""

    match: str
    symptom: str

    @model_validator(mode="after")
    def _compiles(self) -> AlertSymptom:
        try:
            re.compile(self.match)
        except re.error as exc:
            raise ValueError(f"match is not a valid regular expression: {exc}") from None
        return self


class Settings(_Strict):
    windows: Windows = Field(default_factory=Windows)
    alert_symptoms: tuple[AlertSymptom, ...] = ()
    onset_min_score: float = Field(6.0, gt=0)
    onset_min_shift: float = Field(0.15, gt=0, lt=10)
    min_score: float = Field(0.3, ge=0, le=1)
    floors: dict[str, float] = Field(default_factory=dict)
    """Per signal, the smallest absolute change that counts as a departure, beside every
    ratio a check or a change point asks for: a near-zero signal that triples is still
    near zero."""
    ambiguity_margin: float = Field(0.05, ge=0, lt=1)
    """Top causes scoring within this of each other are an ambiguous verdict, not a pick."""
    past_weight: float = Field(0.6, gt=0, le=1)
    """How much a cause whose evidence has ended before the recent window still weighs."""
    second_opinion_penalty: float = Field(0.9, gt=0, le=1)
    """Score factor for a ranked cause whose chain leaves the first mover's layer unexplained."""


class PlaybookFile(_Strict):
    schema_version: Literal[1]
    settings: Settings | None = None
    symptoms: dict[str, SymptomSpec] = Field(default_factory=dict)
    causes: dict[str, CauseSpec] = Field(default_factory=dict)
    actions: dict[str, ActionSpec] = Field(default_factory=dict)
    forbidden: dict[str, ForbiddenSpec] = Field(default_factory=dict)


CheckLike = CheckSpec | AnyOf


@dataclass(frozen=True)
class Knowledge:
    """All playbooks merged: what the graph is built from, with where each id came from."""

    settings: Settings
    symptoms: Mapping[str, SymptomSpec]
    causes: Mapping[str, CauseSpec]
    actions: Mapping[str, ActionSpec]
    forbidden: Mapping[str, ForbiddenSpec]
    origins: Mapping[str, tuple[str, int]] = field(default_factory=dict)
