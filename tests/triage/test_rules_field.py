"""`triage rules` alerts that catch the field's causes early, each beside the cases that must NOT page.

Prometheus's own `promtool test rules` evaluates the generated rule file on recorded series
written here:

- EngineStalled fires for a replica whose `replicas_stalled` flag held for its `for`, not for
  one that stalled for less, nor for one that was always making progress;
- AdmissionStall fires when the deferred queue grows (over `factor` times its level
  `baseline` before, and by `min_increase` or more) while KV use stays under `kv_below`; not
  when the same queue grows with KV full (that is KV pressure's queue), nor for a deferred
  queue that was always that long, nor for a small rise;
- BatchCapped: the waiting queue growing the same way beside KV under half; not with KV busy
  (a true capacity shortage);
- GPULinkFaults: a GPU with NVLink errors, or PCIe replays over their own earlier rate; not a
  GPU whose replays always trickled at that rate;
- KVTransferFailures: failed transfers for its `for`; not a single failed burst;
- RouteShareShift: a target's share moved past the line for its `for`; not a smaller move.

Thresholds come from the bundled SLO file, so a changed default moves the cases with it.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
import yaml
from rulekit import alerts_only
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
    (tmp_path / "rules.yml").write_text(alerts_only(rules_text), encoding="utf-8")
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
    humanized = str(int(value)) if value == int(value) and abs(value) < 1000 else None
    plain = {
        k: v.replace("{{ $value | humanize }}", humanized) if humanized is not None else v
        for k, v in rule["annotations"].items()
    }
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


def test_the_field_alerts_read_only_recorded_series(alerts: Mapping[str, dict[str, Any]]) -> None:
    for name in ("EngineStalled", "AdmissionStall", "BatchCapped", "GPULinkFaults", "KVTransferFailures"):
        expr = alerts[name]["expr"]
        assert "vllm" not in expr and "sglang" not in expr and "triage:" in expr, name


def series(name: str, labels: Mapping[str, str], values: str) -> dict[str, str]:
    body = ",".join(f'{k}="{v}"' for k, v in labels.items())
    return {"series": f"{name}{{{body}}}", "values": values}


def test_batch_capped_pages_beside_idle_kv_not_for_a_busy_fleet(
    tmp_path: Path, rules_text: str, alerts: Mapping[str, dict[str, Any]], slo: Slo
) -> None:
    rule = alerts["BatchCapped"]
    assert rule["labels"]["symptom"] == "rejected" and "triage:queue_waiting" in rule["expr"]
    b = slo.batch_capped
    baseline = steps(b.baseline)
    total = baseline * 2 + steps("30m")
    grown = round(b.min_increase * 3)
    queue = f"2x{2 * baseline} {grown}x{total - 2 * baseline}"
    inputs = [
        series("triage:queue_waiting", {"namespace": "capped"}, queue),
        series("triage:kv_usage_ratio", {"namespace": "capped"}, f"0.3x{total}"),
        # the same queue with KV busy: a true capacity shortage, which QueueGrowing pages for
        series("triage:queue_waiting", {"namespace": "short"}, queue),
        series("triage:kv_usage_ratio", {"namespace": "short"}, f"0.9x{total}"),
    ]
    onset = 2 * baseline * STEP / 60
    settled = onset + (parse_duration(b.window) + parse_duration(b.for_)) / 60 + 1
    cases = [
        case("BatchCapped", onset - 1, []),
        case("BatchCapped", settled, [fired(rule, grown, {"namespace": "capped"})]),
    ]
    run(tmp_path, rules_text, inputs, cases)


def test_gpu_link_errors_page_per_gpu_not_for_a_steady_replay_trickle(
    tmp_path: Path, rules_text: str, alerts: Mapping[str, dict[str, Any]], slo: Slo
) -> None:
    rule = alerts["GPULinkFaults"]
    assert rule["labels"]["symptom"] == "tpot_slow"
    g = slo.gpu_links
    baseline = steps(g.baseline)
    total = baseline + steps("30m")
    after = total - baseline
    burst = g.pcie_min_rate * g.pcie_factor * 4
    gpus = {
        ("a", "0"): (f"0x{baseline} 2x{after}", f"0x{total}"),  # NVLink errors from the baseline mark
        ("b", "1"): (f"0x{total}", f"{g.pcie_min_rate}x{baseline} {burst}x{after}"),  # replays jump
        ("c", "2"): (f"0x{total}", f"{burst}x{total}"),  # replays always at that rate
        ("d", "3"): (f"0x{total}", f"0x{total}"),
    }
    inputs = []
    for (instance, gpu), (nvlink, pcie) in gpus.items():
        labels = {"instance": instance, "gpu": gpu}
        inputs.append(series("triage:gpu_nvlink_errors:replica", labels, nvlink))
        inputs.append(series("triage:gpu_pcie_replays:replica", labels, pcie))
    settled = baseline * STEP / 60 + parse_duration(g.for_) / 60 + 1
    expected = [
        fired(rule, 2, {"instance": "a", "gpu": "0"}),
        fired(rule, burst, {"instance": "b", "gpu": "1"}),
    ]
    cases = [case("GPULinkFaults", baseline * STEP / 60 - 1, []), case("GPULinkFaults", settled, expected)]
    run(tmp_path, rules_text, inputs, cases)


def test_kv_transfer_failures_page_when_they_last_not_for_one_burst(
    tmp_path: Path, rules_text: str, alerts: Mapping[str, dict[str, Any]], slo: Slo
) -> None:
    rule = alerts["KVTransferFailures"]
    assert rule["labels"]["symptom"] == "errors"
    hold = steps(slo.kv_transfer_failures.for_)
    inputs = [
        series("triage:kv_transfer_failures", {"namespace": "pd"}, f"0x20 0.5x{hold + 20}"),
        series("triage:kv_transfer_failures", {"namespace": "blip"}, f"0x20 0.5x{hold - 2} 0x{22}"),
    ]
    held = (20 * STEP + parse_duration(slo.kv_transfer_failures.for_)) / 60
    cases = [
        case("KVTransferFailures", held - 0.5, []),
        case("KVTransferFailures", held + 1, [fired(rule, 0.5, {"namespace": "pd"})]),
    ]
    run(tmp_path, rules_text, inputs, cases)


def test_route_share_shift_pages_past_its_line_only(
    tmp_path: Path, rules_text: str, alerts: Mapping[str, dict[str, Any]], slo: Slo
) -> None:
    rule = alerts["RouteShareShift"]
    assert rule["labels"]["symptom"] == "ttft_slow"
    r = slo.route_share_shift
    hold = steps(r.for_)
    moved, small = round(r.share + 0.2, 2), round(r.share - 0.1, 2)
    inputs = [
        series("triage:route_share_shift", {"namespace": "moved"}, f"0x20 {moved}x{hold + 20}"),
        series("triage:route_share_shift", {"namespace": "small"}, f"0x20 {small}x{hold + 20}"),
    ]
    held = (20 * STEP + parse_duration(r.for_)) / 60
    cases = [
        case("RouteShareShift", held - 0.5, []),
        case("RouteShareShift", held + 1, [fired(rule, moved, {"namespace": "moved"})]),
    ]
    run(tmp_path, rules_text, inputs, cases)
