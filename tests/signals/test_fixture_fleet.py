"""A fixture names its fleet: `fleet:` at the top, `expect.fleet` in a raw fixture holding several.

The fleets of a raw fixture are found in its own series, as discovery finds them on a
server, so a name that matches none or several is a located error when the file loads.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from signals.capture import dump_fixture, frame_to_fixture
from signals.errors import InputError
from signals.fixture import load_fixture
from signals.fixturefleet import FixtureFleet, fleets_in

TWO = """\
name: two
level: raw
interval: 30s
start: 2026-10-14T13:00:00Z
input_series:
  - series: 'vllm:num_requests_running{namespace="llm",model_name="m-8b",pod="rs-x1",instance="10.0.0.1:80"}'
    values: '1x3'
  - series: 'vllm:num_requests_running{namespace="llm",model_name="m-8b",pod="rs-x2",instance="10.0.0.2:80"}'
    values: '1x3'
  - series: 'vllm:num_requests_running{namespace="llm",model_name="m-70b",pod="big-0",instance="10.0.0.3:80"}'
    values: '1x3'
  - series: 'kube_pod_owner{namespace="llm",pod="rs-x1",owner_kind="ReplicaSet",owner_name="rs"}'
    values: '1x3'
  - series: 'kube_pod_owner{namespace="llm",pod="rs-x2",owner_kind="ReplicaSet",owner_name="rs"}'
    values: '1x3'
  - series: 'kube_replicaset_owner{namespace="llm",replicaset="rs",owner_kind="Deployment",owner_name="vllm"}'
    values: '1x3'
  - series: 'kube_pod_owner{namespace="llm",pod="big-0",owner_kind="StatefulSet",owner_name="big"}'
    values: '1x3'
expect:
  fleet: llm/m-8b
  cause: kv_pressure
"""
SMALL, LARGE = "llm/m-8b@Deployment/vllm", "llm/m-70b@StatefulSet/big"
LINES = TWO.count("\n")


def write(tmp_path: Path, text: str) -> str:
    path = tmp_path / "f.yaml"
    path.write_text(text, encoding="utf-8")
    return str(path)


def test_a_raw_fixture_holds_several_fleets_and_its_expectation_names_one(tmp_path: Path) -> None:
    f = load_fixture(write(tmp_path, TWO))
    assert f.expect is not None and f.expect.fleet == "llm/m-8b" and f.fleet is None
    found = fleets_in(((s.signal, s.label_map) for s in f.frame.series), None)
    assert [x.name for x in found.fleets] == [LARGE, SMALL]
    assert found.fleets[1].replicas == ("rs-x1", "rs-x2")


def test_expect_fleet_takes_labels_as_fleet_does(tmp_path: Path) -> None:
    f = load_fixture(write(tmp_path, TWO.replace("fleet: llm/m-8b", "fleet: model_name=m-70b")))
    assert f.expect is not None and f.expect.fleet == "model_name=m-70b"


@pytest.mark.parametrize(
    ("change", "line", "key", "fragment"),
    [
        (
            ("fleet: llm/m-8b", "fleet: llm/m-13b"),
            LINES - 1,
            "expect.fleet",
            f"no fleet 'llm/m-13b' in the fixture; the fleets are: {LARGE}, {SMALL}",
        ),
        (("fleet: llm/m-8b", "fleet: llm/m"), LINES - 1, "expect.fleet", "'llm/m' matches 2 fleets"),
        (("fleet: llm/m-8b", "fleet: a=b,c"), LINES - 1, "expect.fleet", "'c' is not key=value"),
        (("fleet: llm/m-8b", "fleet: [1]"), LINES - 1, "expect.fleet", "expected a fleet's name or labels"),
        (
            ("  fleet: llm/m-8b\n", ""),
            LINES - 2,
            "expect",
            "the fixture holds 2 fleets (llm/m-70b@StatefulSet/big, llm/m-8b@Deployment/vllm): "
            "say which one this expectation is about with expect.fleet",
        ),
        (
            ("level: raw\n", "level: raw\nfleet: {labels: {namespace: llm, model_name: m-13b}}\n"),
            3,
            "fleet",
            f"llm/m-13b matches no fleet in the fixture; the fleets are: {LARGE}, {SMALL}",
        ),
        (
            ("level: raw\n", "level: raw\nfleet: {labels: {namespace: llm, model_name: m-70b}}\n"),
            LINES,
            "expect.fleet",
            f"names {SMALL}, but `fleet:` records {LARGE}",
        ),
        (("level: raw\n", "level: raw\nfleet: vllm\n"), 3, "fleet", "expected a mapping with labels"),
        (("level: raw\n", "level: raw\nfleet: {labels: {}}\n"), 3, "fleet.labels", "the fleet's labels"),
        (
            ("level: raw\n", "level: raw\nfleet: {labels: {namespace: llm}, workload: vllm}\n"),
            3,
            "fleet.workload",
            "expected Kind/name",
        ),
        (
            ("level: raw\n", "level: raw\nfleet: {labels: {namespace: llm}, kind: Deployment}\n"),
            3,
            "fleet.kind",
            "unknown key; allowed: labels, workload",
        ),
        (
            ("level: raw\n", "level: raw\nfleet: {labels: {namespace: [llm]}}\n"),
            3,
            "fleet.labels.namespace",
            "expected a string",
        ),
    ],
)
def test_bad_fleet_keys_are_located(
    tmp_path: Path, change: tuple[str, str], line: int, key: str, fragment: str
) -> None:
    text = TWO.replace(*change)
    assert text != TWO
    with pytest.raises(InputError) as err:
        load_fixture(write(tmp_path, text))
    assert (err.value.line, err.value.key) == (line, key), str(err.value)
    assert fragment in err.value.message, str(err.value)
    assert str(err.value).startswith(f"{tmp_path / 'f.yaml'}:{line}: {key}: ")


SIGNAL = """\
name: one
fleet:
  labels: {namespace: llm, model_name: m-8b}
  workload: Deployment/vllm
start: 2026-10-14T13:00:00Z
input_series:
  - series: 'kv_usage_ratio{instance="rs-x1"}'
    values: '0.5x3'
expect:
  cause: kv_pressure
"""


def test_a_signal_level_fixture_records_its_one_fleet(tmp_path: Path) -> None:
    f = load_fixture(write(tmp_path, SIGNAL))
    assert f.fleet == FixtureFleet((("namespace", "llm"), ("model_name", "m-8b")), "Deployment/vllm")
    assert f.fleet.name == SMALL


def test_a_signal_level_fixture_cannot_name_a_fleet_in_expect(tmp_path: Path) -> None:
    with pytest.raises(InputError) as err:
        load_fixture(write(tmp_path, SIGNAL.replace("  cause:", "  fleet: llm/m-8b\n  cause:")))
    assert err.value.key == "expect.fleet" and "only a raw fixture (level: raw)" in err.value.message


def test_a_capture_writes_its_fleet_at_the_top_and_reads_back(tmp_path: Path) -> None:
    frame = load_fixture(write(tmp_path, SIGNAL)).frame
    record = FixtureFleet((("namespace", "llm"), ("model_name", "m-8b")), "Deployment/vllm")
    text = dump_fixture(frame_to_fixture(frame, "captured", "from a test", fleet=record))
    assert text.splitlines()[2:6] == [
        "fleet:",
        "  labels:",
        "    namespace: llm",
        "    model_name: m-8b",
    ]
    assert load_fixture(write(tmp_path, text)).fleet == record
    unscoped = dump_fixture(frame_to_fixture(frame, "captured", "from a test"))
    assert "fleet" not in unscoped and load_fixture(write(tmp_path, unscoped)).fleet is None
