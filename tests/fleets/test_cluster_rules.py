"""`triage rules` on the scraped cluster: every recorded series and every alert is one fleet's.

The rules are evaluated by Prometheus's own rule engine (`promtool test rules`) on the
cluster's history under the label sets the real scrape produced, so the joins the rules
make (DCGM by `exported_pod`, kube-state-metrics by pod and owner chain, LeaderWorkerSet
workers by their leader) meet exactly the labels a cluster has. At each fleet's moment
the alerts of its symptom fire for that fleet alone, carrying its `namespace` and
`model_name`; the healthy control fleet raises nothing.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from signals.catalog import QueryOptions, load_catalog
from signals.notation import compress
from tools.cluster.harness import match
from tools.cluster.scenarios import FleetTruth, Scenario
from triage.rules import load_slo
from triage.rules.render import render_rules


def _selector(name: str, labels: dict[str, str]) -> str:
    body = ",".join(f'{k}="{v}"' for k, v in sorted(labels.items()))
    return f"{name}{{{body}}}"


def _fleet(f: FleetTruth) -> str:
    return _selector("", {"namespace": f.namespace, "model_name": f.model_name})


def _moment(scenario: Scenario, f: FleetTruth) -> str:
    assert scenario.truth is not None
    return f"{round(f.at - scenario.truth.start)}s"


def _case(expr: str, at: str, samples: list[tuple[str, float]]) -> dict[str, Any]:
    return {
        "expr": expr,
        "eval_time": at,
        "exp_samples": [{"labels": labels, "value": value} for labels, value in samples],
    }


@pytest.fixture(scope="module")
def rule_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("rules") / "triage-rules.yml"
    path.write_text(render_rules(load_catalog(), load_slo(), QueryOptions()), encoding="utf-8")
    return path


def _promtool() -> str:
    found = shutil.which("promtool")
    assert found is not None  # the scenario fixture has already required the binaries
    return found


def test_the_rule_file_passes_promtool_check(scenario: Scenario, rule_file: Path) -> None:
    result = subprocess.run(
        [_promtool(), "check", "rules", str(rule_file)], capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_recorded_series_and_alerts_are_each_one_fleets(
    scenario: Scenario, rule_file: Path, tmp_path: Path
) -> None:
    truth, history, scraped = scenario.truth, scenario.history, scenario.scraped
    assert truth is not None and history is not None and scraped is not None
    last = max(f.at for f in truth.fleets)
    keep = round((last - truth.start) / truth.step) + 1
    inputs = [
        {"series": _selector(name, labels), "values": compress(values[:keep])}
        for name, labels, values in match(history, scraped)
        if name != "up"
    ]
    by_name = {f.name: f for f in truth.fleets}
    kv, gpu_fault = by_name["vllm"], by_name["vllm-70b"]
    control = by_name["model-qwen2-5-7b-instruct"]
    cases = []
    for f in truth.fleets:
        at = _moment(scenario, f)
        # Nothing is recorded, and no alert fires, without the labels of the fleet it is about.
        cases.append(_case('{__name__=~"triage:.+",namespace=""}', at, []))
        cases.append(_case('{__name__=~"triage:.+",model_name=""}', at, []))
        cases.append(_case('ALERTS{alertstate="firing",model_name=""}', at, []))
        cases.append(_case(f'ALERTS{{alertstate="firing",namespace="{control.namespace}"}}', at, []))
        if f.symptom is not None:
            # The alerts of a fleet's symptom fire at its moment for that fleet alone.
            firing = f'ALERTS{{alertstate="firing",symptom="{f.symptom}"}}'
            expr = f"count by (namespace, model_name) ({firing}) > bool 0"
            cases.append(_case(expr, at, [(_fleet(f), 1)]))
    at = _moment(scenario, kv)
    # Each fleet has its own view of a signal, and its own GPUs and replicas joined to it.
    cases.append(
        _case(
            "count by (namespace, model_name) (triage:kv_usage_ratio)",
            at,
            [(_fleet(f), 1) for f in truth.fleets],
        )
    )
    gpus = [(_fleet(f), sum(len(p.gpus) for p in f.pods)) for f in truth.fleets]
    cases.append(_case("count by (namespace, model_name) (triage:gpu_temp_celsius:replica)", at, gpus))
    desired = [
        (_selector("triage:replicas_desired", {"namespace": f.namespace, "model_name": f.model_name}), n)
        for f in truth.fleets
        for n in [sum(1 for p in f.pods if p.role == "engine")]
    ]
    cases.append(_case("triage:replicas_desired", at, desired))
    # The faulty GPU's XID alert names the 70B fleet, whose engine on it crash-loops.
    xid = 'count by (namespace, model_name) (ALERTS{alertstate="firing",alertname="GPUXidError"})'
    cases.append(_case(xid, _moment(scenario, gpu_fault), [(_fleet(gpu_fault), len(gpu_fault.faulty_gpus))]))
    test = {
        "rule_files": [str(rule_file)],
        "evaluation_interval": f"{round(truth.step)}s",
        "tests": [{"interval": f"{round(truth.step)}s", "input_series": inputs, "promql_expr_test": cases}],
    }
    path = tmp_path / "cluster-rules-test.yml"
    path.write_text(yaml.safe_dump(test, sort_keys=False, width=1 << 30), encoding="utf-8")
    result = subprocess.run(
        [_promtool(), "test", "rules", str(path)], capture_output=True, text=True, timeout=300
    )
    assert result.returncode == 0, (result.stdout + result.stderr)[-8000:]
