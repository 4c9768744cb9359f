"""Every live command, per fleet, on one scraped Prometheus that holds four fleets at once.

The cluster (tools/cluster) is scraped through the Prometheus Operator's relabeling, so
each exporter names the replicas its own way: the engines by `pod`, DCGM by
`exported_pod`, kube-state-metrics by its owner chain. Each fleet has its own incident
at the same time; each must be diagnosed right, with no layer blinded by the scoping.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from signals.timeparse import format_instant
from tools.cluster import Scenario
from tools.cluster.scenarios import FleetTruth
from triage.cli.common import EXIT_OK, EXIT_USAGE
from triage.cli.main import main

INCIDENTS = ("vllm", "vllm-70b", "sglang-qwen")
"""The fleets with an incident; the fourth (kubeai's) is a healthy control."""

KINDS = {"Deployment": "Deployment", "StatefulSet": "StatefulSet", "LeaderWorkerSet": "LeaderWorkerSet"}
GPU_SIGNALS = ("gpu_xid", "gpu_util_ratio", "gpu_temp_celsius", "gpu_memory_used_ratio")
SUPPLY_SIGNALS = ("replicas_ready", "replicas_desired", "restarts")


def run(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = main(args)
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def fleets_json(scenario: Scenario, capsys: pytest.CaptureFixture[str]) -> dict[str, Any]:
    at = format_instant(scenario.truth.end)
    code, out, err = run(["fleets", "--prometheus", scenario.url, "--at", at, "--format", "json"], capsys)
    assert code == EXIT_OK, err
    found: dict[str, Any] = json.loads(out)
    return found


def entry(found: dict[str, Any], truth: FleetTruth) -> dict[str, Any]:
    matches = [f for f in found["fleets"] if f["workload"] and f["workload"]["name"] == truth.name]
    assert len(matches) == 1, [f["name"] for f in found["fleets"]]
    return matches[0]


def diagnose(scenario: Scenario, truth: FleetTruth, capsys: pytest.CaptureFixture[str], *extra: str) -> Any:
    args = ["diagnose", "--prometheus", scenario.url, "--at", format_instant(truth.at), "--format", "json"]
    code, out, err = run([*args, "--fleet", f"workload={truth.name}", *extra], capsys)
    assert code == EXIT_OK, err
    return json.loads(out)


def test_fleets_finds_every_fleet_and_explains_every_join(
    scenario: Scenario, capsys: pytest.CaptureFixture[str]
) -> None:
    found = fleets_json(scenario, capsys)
    assert len(found["fleets"]) == len(scenario.truth.fleets)
    for truth in scenario.truth.fleets:
        fleet = entry(found, truth)
        assert fleet["labels"] == {"namespace": truth.namespace, "model_name": truth.model_name}
        assert fleet["workload"]["kind"] == KINDS[truth.kind]
        engines = sorted(p.name for p in truth.pods if p.role == "engine")
        assert fleet["replicas"] == engines
        workers = {p.name: f"{truth.name}-{p.replica}" for p in truth.pods if p.role == "worker"}
        assert fleet["workers"] == workers
        gpus = {(g.node, str(g.index)) for p in truth.pods for g in p.gpus}
        assert {(g["hostname"], g["gpu"]) for g in fleet["gpus"]} == gpus
        assert {g["joined_by"] for g in fleet["gpus"]} == {"exported_pod"}
        assert not any(signal in fleet["blind"] for signal in (*GPU_SIGNALS, *SUPPLY_SIGNALS))
    assert found["idle_gpus"] == len(scenario.truth.idle_gpus)
    # The production-stack router's re-export of the engines' gauges joins by pod IP.
    assert entry(found, scenario.truth.fleet("vllm"))["routers"] == sorted(
        p.name for p in scenario.truth.fleet("vllm").pods
    )


@pytest.mark.parametrize("name", INCIDENTS)
def test_each_fleet_is_diagnosed_right_with_no_layer_blinded(
    scenario: Scenario, capsys: pytest.CaptureFixture[str], name: str
) -> None:
    truth = scenario.truth.fleet(name)
    assert truth.symptom is not None
    diagnosis = diagnose(scenario, truth, capsys, "--symptom", truth.symptom)
    assert diagnosis["causes"][0]["cause"] == truth.cause
    assert diagnosis["fleet"]["namespace"] == truth.namespace
    assert diagnosis["fleet"]["model_name"] == truth.model_name
    assert diagnosis["fleet"]["workload"].endswith(f"/{truth.name}")
    missing = set(diagnosis["missing_signals"])
    assert not missing & {*GPU_SIGNALS, *SUPPLY_SIGNALS}, missing
    assert "scale_out" in {f["action"] for f in diagnosis["forbidden"]}


def test_the_gpu_fault_is_this_fleets_and_carries_the_replica_shortfall(
    scenario: Scenario, capsys: pytest.CaptureFixture[str]
) -> None:
    truth = scenario.truth.fleet("vllm-70b")
    diagnosis = diagnose(scenario, truth, capsys, "--symptom", "errors")
    top = diagnosis["causes"][0]
    assert top["cause"] == "gpu_fault"
    evidence = {e["signal"]: e for e in top["evidence"]}
    assert evidence["gpu_xid"]["holds"] is True and evidence["gpu_xid"]["value"] == 79
    faulty = {p.name for p in truth.pods if any(g in truth.faulty_gpus for g in p.gpus)}
    leaders = {f"{truth.name}-{p.replica}" for p in truth.pods if p.name in faulty}
    assert set(evidence["gpu_xid"]["replicas"]) == leaders
    assert evidence["replicas_ready"]["holds"] is True
    assert "replica_down" in {c["cause"] for c in diagnosis["causes"]}


def test_another_fleets_trouble_never_becomes_this_fleets_cause(
    scenario: Scenario, capsys: pytest.CaptureFixture[str]
) -> None:
    """At the 70B fleet's fault, the 8B fleet (KV pressure only later) shows no GPU fault."""
    big, small = scenario.truth.fleet("vllm-70b"), scenario.truth.fleet("vllm")
    args = ["diagnose", "--prometheus", scenario.url, "--at", format_instant(big.at), "--format", "json"]
    code, out, err = run([*args, "--fleet", f"workload={small.name}", "--symptom", "errors"], capsys)
    assert code == EXIT_OK, err
    causes = {c["cause"] for c in json.loads(out)["causes"]}
    assert not causes & {"gpu_fault", "replica_down"}


def test_auto_diagnoses_every_fleet_in_breach_and_a_named_symptom_needs_a_fleet(
    scenario: Scenario, capsys: pytest.CaptureFixture[str]
) -> None:
    truth = scenario.truth.fleet("vllm")
    at = format_instant(truth.at)
    code, out, err = run(["diagnose", "--prometheus", scenario.url, "--at", at, "--format", "json"], capsys)
    assert code == EXIT_OK, err
    result = json.loads(out)
    by_workload = {d["fleet"]["workload"]: d for d in result["fleets"]}
    assert by_workload["Deployment/vllm"]["causes"][0]["cause"] == "kv_pressure"
    assert all(d["symptom_visible"] for d in result["fleets"])
    assert len(result["fleets"]) + len(result["quiet"]) == len(scenario.truth.fleets)

    code, _, err = run(
        ["diagnose", "--prometheus", scenario.url, "--at", at, "--symptom", "tpot_slow"], capsys
    )
    assert code == EXIT_USAGE
    assert "holds 4 fleets; name one with --fleet" in err
    assert all(f.name in err for f in scenario.truth.fleets)


@pytest.mark.parametrize(
    ("fleet", "message"),
    [
        ("nope", "--fleet: no fleet 'nope' in"),
        ("llm/", "--fleet: 'llm/' matches 3 fleets"),
        ("namespace=llm,junk", "--fleet: 'junk' is not key=value"),
    ],
)
def test_a_fleet_that_is_not_there_is_a_usage_error(
    scenario: Scenario, capsys: pytest.CaptureFixture[str], fleet: str, message: str
) -> None:
    at = format_instant(scenario.truth.end)
    code, _, err = run(["diagnose", "--prometheus", scenario.url, "--at", at, "--fleet", fleet], capsys)
    assert code == EXIT_USAGE
    assert message in err and "Traceback" not in err


def test_an_alert_naming_a_fleet_scopes_the_diagnosis_and_an_unknown_one_is_refused(
    scenario: Scenario, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    truth = scenario.truth.fleet("vllm")
    alert = {
        "labels": {"alertname": "TriageTPOTHigh", "symptom": "tpot_slow", **truth.labels},
        "startsAt": format_instant(truth.at),
    }
    path = tmp_path / "alert.json"
    path.write_text(json.dumps(alert), encoding="utf-8")
    args = ["diagnose", "--prometheus", scenario.url, "--alert", str(path), "--format", "json"]
    code, out, err = run(args, capsys)
    assert code == EXIT_OK, err
    diagnosis = json.loads(out)
    assert diagnosis["causes"][0]["cause"] == "kv_pressure"
    assert diagnosis["fleet"]["model_name"] == truth.model_name

    alert["labels"]["namespace"] = "elsewhere"
    path.write_text(json.dumps(alert), encoding="utf-8")
    code, _, err = run(args, capsys)
    assert code == EXIT_USAGE and '--alert: no fleet {namespace="elsewhere"' in err


def test_signals_check_capture_and_audit_take_a_fleet(
    scenario: Scenario, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    truth = scenario.truth.fleet("sglang-qwen")
    fleet = ["--fleet", f"workload={truth.name}"]
    code, out, err = run(
        [
            "signals",
            "check",
            "--prometheus",
            scenario.url,
            *fleet,
            "--at",
            format_instant(truth.at),
            "--format",
            "json",
        ],
        capsys,
    )
    assert code == EXIT_OK, err
    check = json.loads(out)
    assert check["fleet"].endswith("@Deployment/sglang-qwen")
    assert check["signals"]["ttft_p99_seconds"]["replica"] == "sglang"

    output = tmp_path / "capture.yaml"
    start, end = format_instant(truth.at - 1800), format_instant(truth.at)
    capture = ["capture", "--prometheus", scenario.url, "--start", start, "--end", end, "-o", str(output)]
    code, _, err = run([*capture, *fleet], capsys)
    assert code == EXIT_OK, err
    doc = yaml.safe_load(output.read_text(encoding="utf-8"))
    replicas = {
        s["series"].split('instance="', 1)[1].split('"', 1)[0]
        for s in doc["input_series"]
        if 'instance="' in s["series"]
    }
    assert replicas == {p.name for p in truth.pods}

    at = format_instant(truth.at)
    code, out, err = run(
        ["audit", "--prometheus", scenario.url, "--at", at, *fleet, "--format", "json"], capsys
    )
    assert code in (EXIT_OK, 1), err
    items = {item["id"]: item for item in json.loads(out)}
    # DCGM joins to this fleet's three replicas; no other fleet's vLLM configuration is read.
    assert "DCGM series for all 3 engine replicas" in items["nodes.dcgm_alerts"]["evidence"]
    headroom = items["capacity.gpu_memory_headroom"]["evidence"]
    assert "gpu_memory_utilization 0.9 on" not in headroom and "is not exposed" in headroom
