"""Capture and replay keep the fleet: a recording of a shared Prometheus diagnoses one fleet.

The bundled two-fleet raw fixture holds an 8B fleet under KV pressure beside a 70B fleet
that lost a GPU. Its replay is scoped to the fleet its `expect` names (discovered on the
temporary Prometheus, as a live `--fleet` is), and so is `triage test`; a capture with
`--fleet` writes which fleet it is. Needs `prometheus` and `promtool` (skipped loudly
without them, failed under CI=true).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from fleetrecording import LARGE, SMALL, TWO_FLEETS, recording, serving
from promserver import require_prometheus_binaries

from signals.catalog import QueryOptions, load_catalog
from signals.fixture import load_fixture
from signals.fixturefleet import fleets_in
from signals.fleets import discover
from signals.fleets.inventory import fetch_inventory
from signals.live import fetch_frame
from signals.prometheus import PrometheusSource
from signals.timeparse import format_instant
from triage.cli.common import EXIT_FAILED, EXIT_OK
from triage.cli.main import main
from triage.core.graph import TriageGraph
from triage.core.walk import diagnose


@pytest.fixture(scope="module")
def url() -> Iterator[str]:
    require_prometheus_binaries()
    with serving(recording()) as prometheus:
        yield prometheus.url


def test_the_fleets_found_in_the_file_are_the_ones_its_prometheus_shows(url: str) -> None:
    fixture = recording()
    offline = fleets_in(((s.signal, s.label_map) for s in fixture.frame.series), None)
    frame = fixture.frame
    live = discover(fetch_inventory(PrometheusSource(url), frame.end, frame.end - frame.start))
    assert [f.name for f in offline.fleets] == [f.name for f in live.fleets] == [LARGE, SMALL]
    for mine, theirs in zip(offline.fleets, live.fleets, strict=True):
        assert (mine.replicas, mine.workers, mine.gpus) == (theirs.replicas, theirs.workers, theirs.gpus)
    assert offline.problems == live.problems


def test_the_whole_recording_blames_the_wrong_fleets_trouble(url: str, graph: TriageGraph) -> None:
    """Why the fixture names its fleet: unscoped, the 8B fleet's slow decode reads as a lost replica."""
    fixture = recording()
    frame = fixture.frame
    signals, _ = fetch_frame(
        PrometheusSource(url), load_catalog(), QueryOptions(), frame.end, frame.end - frame.start, frame.step
    )
    d = diagnose(graph, signals, "tpot_slow", fixture.at)
    assert d.top is not None and d.top.cause != "kv_pressure", [c.cause for c in d.causes]


def test_triage_test_diagnoses_the_fleet_the_expectation_names(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    require_prometheus_binaries()
    text = TWO_FLEETS.read_text(encoding="utf-8")
    at, expect = text.index("\nat: "), text.index("\nexpect:\n")
    other = (
        text[:at]
        + "\nat: 41m\nsymptom: errors"
        + text[text.index("\ninput_series:") : expect]
        + f"\nexpect:\n  fleet: {LARGE}\n  cause: gpu_fault\n"
    )
    path = tmp_path / "other-fleet.yaml"
    path.write_text(other.replace("name: two-fleets", "name: other-fleet", 1), encoding="utf-8")
    assert main(["test", str(path)]) == EXIT_OK
    assert f"errors -> gpu_fault  (fleet {LARGE})" in capsys.readouterr().out
    path.write_text(path.read_text().replace("cause: gpu_fault", "cause: kv_pressure"), encoding="utf-8")
    assert main(["test", str(path)]) == EXIT_FAILED
    out = capsys.readouterr().out
    assert f"FAIL  {path}  errors -> gpu_fault  (fleet {LARGE})" in out


def test_a_capture_with_fleet_records_it_and_replays_to_its_cause(
    url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    fixture = recording()
    out = tmp_path / "captured.yaml"
    argv = ["capture", "--prometheus", url, "--fleet", "llm/meta-llama/Llama-3.1-8B-Instruct"]
    argv += ["--start", format_instant(fixture.start), "--end", format_instant(fixture.at)]
    assert main([*argv, "--step", "30s", "--symptom", "tpot_slow", "-o", str(out)]) == EXIT_OK
    assert f", fleet {SMALL}\n" in capsys.readouterr().out
    captured = load_fixture(str(out))
    assert captured.fleet is not None and captured.fleet.name == SMALL
    assert dict(captured.fleet.labels) == {
        "namespace": "llm",
        "model_name": "meta-llama/Llama-3.1-8B-Instruct",
    }
    assert captured.fleet.workload == "Deployment/vllm"
    assert len(captured.frame.replicas("kv_usage_ratio").replicas) == 3
    assert main(["diagnose", "--fixture", str(out), "--format", "json"]) == EXIT_OK
    assert json.loads(capsys.readouterr().out)["causes"][0]["cause"] == "kv_pressure"
