"""Each fleet's story, replayed alone through today's raw path, reaches the truth's cause.

The truth record promises a cause per fleet. Until fleet discovery lands, the diagnosis
can only be run one fleet at a time, on series joined by replica (`instance`) the way the
bundled raw fixtures are: this replays the very `RawFleet` each scenario fleet was built
from (`signals.rawreplay`, a real Prometheus) and walks it, so a story that no longer
produces its cause fails here rather than in someone else's discovery tests. The healthy
control fleet is left out: its expectation is "no cause", which is the discovery work's
to check on the cluster itself.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from signals.catalog import load_catalog
from signals.fixture import load_fixture
from signals.rawreplay import replay_raw
from tools.cluster.scenarios import Scenario
from triage.core.walk import diagnose
from triage.replay import fixture_symptom
from triage.sources import load_graph


@pytest.mark.parametrize("name", ["vllm", "vllm-70b", "sglang-qwen"])
def test_a_fleets_story_alone_diagnoses_to_its_expected_cause(
    scenario: Scenario, name: str, tmp_path: Path
) -> None:
    assert scenario.history is not None and scenario.truth is not None
    fleet = scenario.truth.fleet(name)
    (fh,) = [f for f in scenario.history.fleets if f.workload.spec.name == name]
    path = tmp_path / f"{name}.yaml"
    at = f"{round(fleet.at - fleet.start)}s"
    fh.raw.write(str(path), f"{name}-story", fleet.symptom, at=at, expect={"cause": fleet.cause})
    graph = load_graph()
    signals, _ = replay_raw(load_fixture(str(path)), load_catalog())
    symptom, source = fixture_symptom(signals, None, graph.knowledge)
    diagnosis = diagnose(graph, signals.frame, symptom, signals.at, source=source)
    assert diagnosis.causes, f"{name}: no cause named"
    assert diagnosis.causes[0].cause == fleet.cause, [(c.cause, c.score) for c in diagnosis.causes]
    assert diagnosis.onset is not None and fleet.onset - 300 <= diagnosis.onset <= fleet.at
