"""`triage serve` on the scraped cluster: each alert is diagnosed on the fleet it names.

First the diagnosis step alone, in process, on the cluster's Prometheus: alerts naming a
fleet by its labels or through one of its pods reach that fleet's cause (another
fleet's trouble is not it), alerts naming nothing fall back to the service's selector
and say so, alerts naming a fleet that does not exist are refused with the reason, and
every item about one fleet at one moment reads one frame.

Then the whole path: alerts pushed into a real Alertmanager (0.25) reach `triage serve`
running as a process, and each annotation carries its own fleet's cause and the fleet's
labels, including two alerts of one Alertmanager group that name two fleets.
"""

from __future__ import annotations

import json
import logging
import re
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from service.harness.alertmanager import TemporaryAlertmanager, make_alert, require_alertmanager_binary
from service.harness.sink import RecordingSink
from service.servicekit import ServeProcess, count, rows, wait_until

from signals.catalog import QueryOptions, load_catalog
from signals.prometheus import PrometheusSource
from tools.cluster.scenarios import FleetTruth, Scenario
from triage.service.store import WorkItem, WorkResult
from triage.service.worker import Diagnoser, FetchSettings
from triage.sources import load_graph

TOKEN = "fleet-e2e-token-3d1"


def truth(scenario: Scenario, name: str) -> FleetTruth:
    assert scenario.truth is not None
    return scenario.truth.fleet(name)


def labels_of(fleet: FleetTruth, **more: str) -> dict[str, str]:
    return {"namespace": fleet.namespace, "model_name": fleet.model_name, **more}


def causes(result: WorkResult) -> list[str]:
    assert result.diagnosis is not None, result.summary
    return [c["cause"] for c in result.diagnosis["causes"]]


def test_each_work_item_is_diagnosed_on_the_fleet_its_alerts_name(scenario: Scenario) -> None:
    kv, gpu = truth(scenario, "vllm"), truth(scenario, "vllm-70b")
    diagnoser = Diagnoser(load_graph(), load_catalog(), QueryOptions(), FetchSettings(7200.0, 30.0, 30.0))

    def run(fleet: FleetTruth, *alerts: dict[str, str], item: int = 1) -> WorkResult:
        symptom = fleet.symptom or "auto"
        work = WorkItem(item, "g", fleet.at, symptom, "alert label", 1, "", tuple(alerts))
        with PrometheusSource(scenario.url, timeout=30) as source:
            return diagnoser.run(work, source)

    by_labels = run(kv, labels_of(kv, alertname="TPOTP99High"))
    assert by_labels.cause == kv.cause and "replica_down" not in causes(by_labels)
    assert by_labels.diagnosis is not None
    assert by_labels.diagnosis["fleet"] == labels_of(kv, workload="Deployment/vllm")
    assert by_labels.scope.startswith("fleet llm/meta-llama/Llama-3.1-8B-Instruct@Deployment/vllm, named by")
    assert by_labels.summary.startswith(f"Fleet: {by_labels.scope}\n")
    # Another item about the same fleet at the same moment, named by a pod: the same frame.
    leader = next(p for p in kv.pods if p.role == "engine")
    by_pod = run(kv, {"namespace": kv.namespace, "pod": leader.name}, item=2)
    assert by_pod.cause == kv.cause and by_pod.fetches == 0 and "named by pod" in by_pod.scope

    fault = run(gpu, labels_of(gpu, alertname="ErrorRatioHigh"), item=3)
    assert fault.cause == gpu.cause and kv.cause not in causes(fault)
    assert fault.diagnosis is not None and fault.diagnosis["fleet"]["workload"] == "LeaderWorkerSet/vllm-70b"

    unnamed = run(kv, {"alertname": "TPOTP99High", "service": "llm"}, item=4)
    assert unnamed.diagnosis is not None and unnamed.diagnosis["fleet"] is None
    assert unnamed.scope.startswith(
        "the alerts name no fleet (no namespace, model_name, pod or instance label)"
    )
    assert unnamed.scope.endswith("diagnosed with the service's selector (none: the whole Prometheus)")

    gone = run(kv, {"namespace": "llm", "model_name": "gone"}, item=5)
    assert gone.diagnosis is None and gone.cause is None and gone.unavailable is None
    assert gone.scope.startswith('not diagnosed: no fleet {namespace="llm",model_name="gone"} in Prometheus')
    assert kv.model_name in gone.scope and gone.signature.endswith(":no-fleet")


def test_the_service_says_once_a_fleet_that_a_large_raw_read_is_worth_recording(
    scenario: Scenario, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Read from raw series, a fleet at the size where `triage rules` pays gets one warning per
    process, however many of its alerts follow; a fleet under that size gets none. The
    cluster's fleets are a few replicas, so the size is moved to them."""
    import signals.live

    kv, gpu = truth(scenario, "vllm"), truth(scenario, "vllm-70b")
    diagnoser = Diagnoser(load_graph(), load_catalog(), QueryOptions(), FetchSettings(7200.0, 30.0, 30.0))

    def run(fleet: FleetTruth, item: int, at: float) -> WorkResult:
        work = WorkItem(item, "g", at, fleet.symptom or "auto", "alert label", 1, "", (labels_of(fleet),))
        with PrometheusSource(scenario.url, timeout=30) as source:
            return diagnoser.run(work, source)

    def hints() -> list[str]:
        return [r.getMessage() for r in caplog.records if "triage rules" in r.getMessage()]

    caplog.set_level(logging.WARNING, logger="triage.service")
    monkeypatch.setattr(signals.live, "RECORDING_PAYS_REPLICAS", 10_000)
    assert run(kv, 1, kv.at).fetches == 1
    assert hints() == []
    monkeypatch.setattr(signals.live, "RECORDING_PAYS_REPLICAS", 1)
    assert run(kv, 2, kv.at - 600).fetches == 1 and run(kv, 3, kv.at - 1200).fetches == 1  # other spans
    assert run(gpu, 4, gpu.at).fetches == 1
    said = hints()
    assert len(said) == 2, said  # one for each fleet, though the first was read twice
    assert said[0].startswith(f"fleet {kv.namespace}/{kv.model_name}@Deployment/vllm: ")
    assert said[1].startswith(f"fleet {gpu.namespace}/{gpu.model_name}@LeaderWorkerSet/vllm-70b: ")
    assert all(re.search(r": \d+ replicas read from raw series", line) for line in said)


def _alert(name: str, fleet: FleetTruth, **labels: str) -> dict[str, Any]:
    starts = datetime.fromtimestamp(fleet.at, UTC)
    return make_alert(name, starts_at=starts, symptom=fleet.symptom or "auto", **labels)


def test_alerts_through_a_real_alertmanager_are_annotated_with_their_own_fleets_cause(
    scenario: Scenario, tmp_path: Path
) -> None:
    binary = require_alertmanager_binary()
    kv, gpu, burst = truth(scenario, "vllm"), truth(scenario, "vllm-70b"), truth(scenario, "sglang-qwen")
    db = tmp_path / "triage.db"
    token = tmp_path / "token"
    token.write_text(TOKEN + "\n")
    leader = next(p for p in kv.pods if p.role == "engine")
    alerts = {
        "kv": _alert("TPOTP99High", kv, **labels_of(kv)),
        "kv-pod": _alert("KVCacheNearFull", kv, namespace=kv.namespace, pod=leader.name),
        "fault": _alert("ErrorRatioHigh", gpu, **labels_of(gpu)),
        # One Alertmanager group (alertname, service), two fleets: diagnosed apart.
        "burst": _alert("TTFTP99High", burst, **labels_of(burst)),
        "gone": _alert("TTFTP99High", burst, namespace="llm", model_name="gone"),
    }
    with RecordingSink() as sink:
        config = tmp_path / "serve.yaml"
        config.write_text(f"sinks:\n  - name: hook\n    kind: webhook\n    url: {sink.url}\n")
        args = [
            "--config", str(config), "--store", str(db), "--prometheus", scenario.url,
            "--token-file", str(token), "--workers", "2", "--prometheus-timeout", "30s",
        ]  # fmt: skip
        with (
            ServeProcess(args, tmp_path / "serve.log") as serve,
            TemporaryAlertmanager(f"{serve.url}/api/alertmanager", bearer_token=TOKEN, binary=binary) as am,
        ):
            am.push(list(alerts.values()))
            wait_until(lambda: count(db, "annotations") == len(alerts), timeout=60)
            wait_until(lambda: count(db, "annotations", "state != 'pending'") == len(alerts), timeout=180)
            assert sink.wait_for(4, timeout=60)  # one message per group: TPOT, KV, errors, TTFT
            assert serve.terminate() == 0
        assert "Traceback" not in (tmp_path / "serve.log").read_text()
    stored = {
        a["alertname"] + ":" + json.loads(a["labels"]).get("model_name", "pod"): a
        for a in rows(
            db,
            "SELECT a.alertname, a.labels, a.state, a.cause, a.signals, "
            "w.scope, w.diagnosis, w.fetches, w.id FROM annotations a JOIN work w ON w.id = a.work_id",
        )
    }

    def diagnosis(key: str) -> dict[str, Any]:
        found: dict[str, Any] = json.loads(stored[key]["diagnosis"])
        return found

    tpot, by_pod = stored[f"TPOTP99High:{kv.model_name}"], stored["KVCacheNearFull:pod"]
    assert tpot["cause"] == by_pod["cause"] == kv.cause
    assert diagnosis(f"TPOTP99High:{kv.model_name}")["fleet"] == labels_of(kv, workload="Deployment/vllm")
    assert not {"gpu_fault", "replica_down"} & {
        c["cause"] for c in diagnosis("KVCacheNearFull:pod")["causes"]
    }
    assert tpot["fetches"] + by_pod["fetches"] == 1  # one frame per fleet and moment, shared by two groups

    fault = stored[f"ErrorRatioHigh:{gpu.model_name}"]
    assert fault["cause"] == gpu.cause
    assert diagnosis(f"ErrorRatioHigh:{gpu.model_name}")["fleet"]["workload"] == "LeaderWorkerSet/vllm-70b"
    assert kv.cause not in {c["cause"] for c in diagnosis(f"ErrorRatioHigh:{gpu.model_name}")["causes"]}

    ttft, gone = stored[f"TTFTP99High:{burst.model_name}"], stored["TTFTP99High:gone"]
    assert ttft["cause"] == burst.cause and ttft["id"] != gone["id"]
    assert gone["state"] == "annotated" and gone["cause"] is None and gone["signals"] == "not read"
    assert gone["scope"].startswith('not diagnosed: no fleet {namespace="llm",model_name="gone"}')
    sent = {r.json["group_labels"]["alertname"]: r.json["diagnosis"] for r in sink.accepted()}
    assert sent["TPOTP99High"]["fleet"] == labels_of(kv, workload="Deployment/vllm")
    assert sent["TPOTP99High"]["scope"] == tpot["scope"]
