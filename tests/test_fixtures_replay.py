"""Every bundled fixture replays to its expected conclusion: a regression test of the playbooks."""

from __future__ import annotations

from pathlib import Path

import pytest
from rawreplays import bundled_raw

from signals.fixture import load_fixture
from triage.core.graph import TriageGraph
from triage.core.walk import diagnose
from triage.replay import check_expect, fixture_symptom, summarise, timeline

ROOT = Path(__file__).resolve().parent.parent
ALL_FIXTURES = sorted((ROOT / "fixtures").glob("*.yaml"))
# Raw fixtures replay through a real Prometheus: tests/test_raw_fixtures.py checks them.
RAW = set(bundled_raw())
FIXTURES = [p for p in ALL_FIXTURES if p not in RAW]


def test_there_is_a_fixture_for_every_cause_and_a_quiet_one(graph: TriageGraph) -> None:
    expected = set()
    quiet = 0
    for path in ALL_FIXTURES:
        f = load_fixture(str(path))
        assert f.expect is not None, f"{path.name} has no expect block"
        if f.expect.no_cause:
            quiet += 1
        if f.expect.cause:
            expected.add(f.expect.cause)
    assert quiet >= 1
    assert set(graph.knowledge.causes) <= expected, set(graph.knowledge.causes) - expected


@pytest.mark.parametrize("path", FIXTURES, ids=[p.stem for p in FIXTURES])
def test_fixture_replays_to_its_expectation(graph: TriageGraph, path: Path) -> None:
    fixture = load_fixture(str(path))
    assert fixture.expect is not None
    symptom, source = fixture_symptom(fixture, None, graph.knowledge)
    d = diagnose(graph, fixture.frame, symptom, fixture.at, source=source)
    result = check_expect(d, fixture.expect)
    assert result.passed, result.problems
    flagged = {f.action for f in d.forbidden}
    if fixture.expect.no_cause:
        assert d.causes == ()
        return
    top = d.causes[0]
    assert top.cause == fixture.expect.cause
    required = [e for e in top.evidence if e.role == "requires"]
    assert required and all(e.holds is not False for e in required)
    assert any(e.holds and e.departure for e in top.evidence)
    assert all(e.signal == "" or fixture.frame.has(e.signal) or e.holds is None for e in top.evidence)
    assert ("scale_out" in flagged) == (top.cause != "capacity_shortage")
    assert {a.id for a in d.first_actions} == set(graph.knowledge.causes[top.cause].first_actions) - flagged


def test_replay_settles_on_the_answer_after_the_onset(graph: TriageGraph) -> None:
    fixture = load_fixture(str(ROOT / "fixtures" / "replica-down-queue-growth.yaml"))
    steps = timeline(graph, fixture.frame, "ttft_slow", 60.0, end=fixture.at)
    summary = summarise(steps)
    assert summary.final_top == "replica_down"
    assert summary.onset is not None and summary.settled is not None and summary.first_seen is not None
    assert summary.first_seen <= summary.settled
    assert summary.settled >= summary.onset - 600
    before = [s for s in steps if s.at < fixture.start + 50 * 60]
    assert before and all(s.top is None for s in before)  # nothing was blamed before the replicas went
