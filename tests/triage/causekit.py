"""What the tests of one cause share: its fixtures diagnosed, its findings read, frames changed.

A cause's tests diagnose its bundled fixture and its confounder's, read one cause's finding and
evidence, and change the fixture's frame in ways that must or must not change the answer.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np

from signals.fixture import Fixture, load_fixture
from signals.frame import Series, SignalFrame, build_frame
from triage.core.graph import TriageGraph
from triage.core.model import CauseFinding, Diagnosis
from triage.core.walk import diagnose
from triage.replay import fixture_symptom

ROOT = Path(__file__).resolve().parents[2]


def bundled(name: str) -> Fixture:
    """The bundled fixture `fixtures/<name>.yaml`."""
    return load_fixture(str(ROOT / "fixtures" / f"{name}.yaml"))


def diagnosed(graph: TriageGraph, name: str, frame: SignalFrame | None = None) -> Diagnosis:
    """Fixture `name` diagnosed at its moment, from its own symptom, on `frame` if given."""
    fixture = bundled(name)
    symptom, source = fixture_symptom(fixture, None, graph.knowledge)
    return diagnose(graph, frame if frame is not None else fixture.frame, symptom, fixture.at, source=source)


def finding(d: Diagnosis, cause: str) -> CauseFinding | None:
    return next((c for c in d.causes if c.cause == cause), None)


def holds(found: CauseFinding, signal: str, role: str) -> bool:
    """Whether a check on `signal` in `role` (requires, supports, against) holds for the cause."""
    return any(e.signal == signal and e.role == role and e.holds for e in found.evidence)


def mapped(frame: SignalFrame, change: Callable[[Series], np.ndarray | None]) -> SignalFrame:
    """`frame` with each series' values replaced by `change` (None keeps them)."""
    out = []
    for s in frame.series:
        values = change(s)
        out.append(Series(s.signal, s.labels, (s.values if values is None else values).copy()))
    return build_frame(frame.times, out, frame.source)


def with_healthy_replica(frame: SignalFrame, like: str, name: str) -> SignalFrame:
    """A copy of replica `like`'s series under a new name: one more healthy replica."""
    extra = [
        Series(
            s.signal, tuple(sorted((k, name if k == "instance" else v) for k, v in s.labels)), s.values.copy()
        )
        for s in frame.series
        if dict(s.labels).get("instance") == like
    ]
    return build_frame(frame.times, [*frame.series, *extra], frame.source)
