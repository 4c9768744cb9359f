"""`triage rules` alerts that catch an engine that stops making progress, and an admission stall.

Prometheus's own `promtool test rules` evaluates the generated rule file on recorded series
written here, each case beside the ones that must NOT page:

- EngineStalled fires for a replica whose `replicas_stalled` flag held for its `for`, not for
  one that stalled for less, nor for one that was always making progress;
- AdmissionStall fires when the deferred queue grows (over `factor` times its level
  `baseline` before, and by `min_increase` or more) while KV use stays under `kv_below`; not
  when the same queue grows with KV full (that is KV pressure's queue), nor for a deferred
  queue that was always that long, nor for a small rise.

Thresholds come from the bundled SLO file, so a changed default moves the cases with it.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
import yaml
from test_rules import alerts_of, annotate, promtool, run_promtool

from signals.catalog import QueryOptions, load_catalog
from signals.timeparse import parse_duration
from triage.rules import Slo, load_slo
from triage.rules.render import render_rules

STEP = 30
"""Seconds between samples, and between rule evaluations."""


@pytest.fixture(scope="module")
def slo() -> Slo:
    return load_slo(None)


@pytest.fixture(scope="module")
def rules_text(slo: Slo) -> str:
    return render_rules(load_catalog(), slo, QueryOptions())


@pytest.fixture(scope="module")
def alerts(rules_text: str) -> dict[str, dict[str, Any]]:
    doc = yaml.safe_load(rules_text)
    return alerts_of({g["name"]: g["rules"] for g in doc["groups"]})


def steps(duration: str) -> int:
    return round(parse_duration(duration) / STEP)


def run(tmp_path: Path, rules_text: str, inputs: list[dict[str, str]], cases: list[dict[str, Any]]) -> None:
    promtool()
    (tmp_path / "rules.yml").write_text(rules_text, encoding="utf-8")
    test = {
        "rule_files": [str(tmp_path / "rules.yml")],
        "evaluation_interval": f"{STEP}s",
        "tests": [
            {"name": "progress", "interval": f"{STEP}s", "input_series": inputs, "alert_rule_test": cases}
        ],
    }
    (tmp_path / "test.yml").write_text(yaml.safe_dump(test, sort_keys=False, width=1 << 30), encoding="utf-8")
    result = run_promtool("test", "rules", str(tmp_path / "test.yml"))
    assert result.returncode == 0, result.stdout + result.stderr


def fired(rule: Mapping[str, Any], value: float, labels: Mapping[str, str]) -> dict[str, Any]:
    """The alert promtool must show: its labels and its annotations rendered for `value` (a whole
    count renders the same under `humanize` as printed plainly)."""
    assert value == int(value) and abs(value) < 1000
    plain = {k: v.replace("{{ $value | humanize }}", str(int(value))) for k, v in rule["annotations"].items()}
    rendered = annotate({**rule, "annotations": plain}, value, labels)
    return {"exp_labels": {**labels, **rule["labels"]}, "exp_annotations": rendered}


def case(name: str, minute: float, expected: list[dict[str, Any]]) -> dict[str, Any]:
    return {"eval_time": f"{round(minute * 60)}s", "alertname": name, "exp_alerts": expected}


def test_engine_stalled_pages_for_the_stalled_replica_only(
    tmp_path: Path, rules_text: str, alerts: Mapping[str, dict[str, Any]], slo: Slo
) -> None:
    rule = alerts["EngineStalled"]
    assert rule["expr"] == "triage:replicas_stalled:replica > 0" and rule["labels"]["symptom"] == "errors"
    hold = steps(slo.engine_stalled.for_)
    series = {
        "stalled": f"0x20 1x{40 + hold}",  # stalled from minute 10 on
        "blip": f"0x20 1x{hold - 2} 0x{40 + 2}",  # stalled for less than `for`
        "healthy": f"0x{60 + hold}",
    }
    inputs = [
        {"series": f'triage:replicas_stalled:replica{{instance="{name}"}}', "values": values}
        for name, values in series.items()
    ]
    onset = 20 * STEP / 60
    held = onset + parse_duration(slo.engine_stalled.for_) / 60
    cases = [
        case("EngineStalled", onset, []),  # pending, not firing
        case("EngineStalled", held - 0.5, []),
        case("EngineStalled", held + 1, [fired(rule, 1, {"instance": "stalled"})]),
        case("EngineStalled", 5, []),  # before anything stalled
    ]
    run(tmp_path, rules_text, inputs, cases)


def test_admission_stall_pages_for_a_deferred_queue_beside_free_kv_only(
    tmp_path: Path, rules_text: str, alerts: Mapping[str, dict[str, Any]], slo: Slo
) -> None:
    rule = alerts["AdmissionStall"]
    assert rule["labels"]["symptom"] == "rejected" and "triage:kv_usage_ratio < " in rule["expr"]
    a = slo.admission_stall
    baseline = steps(a.baseline)
    total = baseline * 3
    grown = a.min_increase * 4
    # four fleets, told apart by namespace (the rules' fleet labels)
    fleets = {
        # the deferred queue grows at the 2x baseline mark; KV at 40%: an admission stall
        "stall": (f"0x{2 * baseline} {grown}x{total - 2 * baseline}", f"0.4x{total}"),
        # the same growth with KV full: KV pressure's queue, not admission's
        "kv-full": (f"0x{2 * baseline} {grown}x{total - 2 * baseline}", f"0.97x{total}"),
        # a deferred queue that was always this long
        "steady": (f"{grown}x{total}", f"0.4x{total}"),
        # a rise smaller than min_increase
        "small": (f"1x{2 * baseline} {a.min_increase - 2}x{total - 2 * baseline}", f"0.4x{total}"),
    }
    inputs = []
    for namespace, (deferred, kv) in fleets.items():
        inputs.append({"series": f'triage:queue_deferred{{namespace="{namespace}"}}', "values": deferred})
        inputs.append({"series": f'triage:kv_usage_ratio{{namespace="{namespace}"}}', "values": kv})
    onset = 2 * baseline * STEP / 60
    hold = parse_duration(a.for_) / 60
    settled = onset + parse_duration(a.window) / 60 + hold + 1  # the window all after the jump
    cases = [
        case("AdmissionStall", onset - 1, []),
        case("AdmissionStall", onset + hold - 0.5, []),  # growing, but not for `for` yet
        case("AdmissionStall", settled, [fired(rule, grown, {"namespace": "stall"})]),
    ]
    run(tmp_path, rules_text, inputs, cases)


def test_both_alerts_read_only_recorded_series(alerts: Mapping[str, dict[str, Any]]) -> None:
    for name in ("EngineStalled", "AdmissionStall"):
        expr = alerts[name]["expr"]
        assert "vllm" not in expr and "sglang" not in expr and "triage:" in expr, name
