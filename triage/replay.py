"""Replaying an incident: the diagnosis at every step, and checking a fixture's expectations.

`timeline` re-diagnoses the frame every `every` seconds, as the tool would have read
the incident live; `summarise` says when the final top cause first appeared, when it
settled (stayed on top to the end) and how long after the onset. `check_expect` is what
`triage test` runs: the conclusions a fixture's `expect` block demands.
"""

from __future__ import annotations

from dataclasses import dataclass

from signals.fixture import Expect, Fixture
from signals.frame import SignalFrame
from triage.core.graph import TriageGraph
from triage.core.model import AUTO, Diagnosis
from triage.core.playbook import Knowledge
from triage.core.walk import diagnose, symptom_from_alert


@dataclass(frozen=True)
class Step:
    at: float
    diagnosis: Diagnosis

    @property
    def top(self) -> str | None:
        return self.diagnosis.top.cause if self.diagnosis.top else None


@dataclass(frozen=True)
class TimelineSummary:
    """When the final answer appeared and settled, relative to the onset."""

    final_top: str | None
    onset: float | None
    first_seen: float | None
    settled: float | None

    @property
    def onset_to_settled(self) -> float | None:
        if self.onset is None or self.settled is None:
            return None
        return self.settled - self.onset


def timeline(
    graph: TriageGraph,
    frame: SignalFrame,
    symptom: str,
    every: float,
    start: float | None = None,
    end: float | None = None,
    source: str = "",
) -> list[Step]:
    """Diagnoses from `start` (default: one step in) to `end` (default: the last sample)."""
    first = frame.start + max(every, frame.step) if start is None else start
    last = frame.end if end is None else end
    steps: list[Step] = []
    t = first
    while t <= last + 1e-9:
        steps.append(Step(t, diagnose(graph, frame, symptom, t, source=source)))
        t += every
    if not steps or steps[-1].at < last - 1e-9:
        steps.append(Step(last, diagnose(graph, frame, symptom, last, source=source)))
    return steps


def summarise(steps: list[Step]) -> TimelineSummary:
    if not steps:
        return TimelineSummary(None, None, None, None)
    final = steps[-1]
    top = final.top
    onset = final.diagnosis.onset
    if top is None:
        return TimelineSummary(None, onset, None, None)
    first_seen = next((s.at for s in steps if s.top == top), None)
    settled = final.at
    for s in reversed(steps):
        if s.top != top:
            break
        settled = s.at
    return TimelineSummary(top, onset, first_seen, settled)


@dataclass(frozen=True)
class ExpectResult:
    passed: bool
    problems: tuple[str, ...]


def check_expect(diagnosis: Diagnosis, expect: Expect) -> ExpectResult:
    """Every way the diagnosis falls short of the fixture's expect block."""
    problems: list[str] = []
    ranked = [c.cause for c in diagnosis.causes]
    flagged = {f.action for f in diagnosis.forbidden}
    if expect.no_cause and ranked:
        problems.append(f"expected no cause, got {', '.join(ranked)}")
    if expect.cause is not None:
        got = ranked[0] if ranked else "no cause"
        if got != expect.cause:
            where = (
                f" (ranked #{ranked.index(expect.cause) + 1})" if expect.cause in ranked else " (not ranked)"
            )
            problems.append(f"expected top cause {expect.cause}{where}, got {got}")
    if expect.verdict is not None and diagnosis.verdict != expect.verdict:
        problems.append(f"expected verdict {expect.verdict}, got {diagnosis.verdict}")
    for cause in expect.also:
        if cause not in ranked:
            problems.append(f"expected {cause} also ranked; it is not")
    for action in expect.forbidden:
        if action not in flagged:
            problems.append(f"expected {action} flagged forbidden; it is not")
    for action in expect.not_forbidden:
        if action in flagged:
            problems.append(f"expected {action} not flagged forbidden; it is")
    return ExpectResult(not problems, tuple(problems))


def fixture_symptom(fixture: Fixture, override: str | None, kb: Knowledge) -> tuple[str, str]:
    """Where a fixture's diagnosis starts, and why: the flag, the fixture, its alert, else auto."""
    if override:
        return override, "given"
    if fixture.symptom:
        return fixture.symptom, "fixture"
    from_alert = symptom_from_alert(fixture.alert_labels, kb)
    if from_alert:
        return from_alert, "alert"
    return AUTO, "auto"
