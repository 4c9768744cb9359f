"""`triage rules`: the generated rule file is valid, records every signal, and alerts as the SLOs say.

The alert tests run Prometheus's own `promtool test rules` on the bundled fixtures: the
fixture's signals are fed in under the recorded names (`triage:<signal>` for the fleet
view, `triage:<signal>:replica` for per-replica rows), and the expected alerts, their
values included, are worked out here from the same samples. A recording-rule case
feeds raw vLLM and SGLang series and checks what the rules record from them.
"""

from __future__ import annotations

import builtins
import math
import os
import re
import shutil
import subprocess
from collections.abc import Callable, Iterator, Mapping
from functools import cache
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import yaml
from rulekit import RECORDED, alerts_only, rules_reading

from signals.catalog import QueryOptions, load_catalog
from signals.errors import InputError, InputErrors
from signals.fixture import Fixture, load_fixture
from signals.notation import compress, parse_values
from signals.timeparse import parse_duration
from triage.core.graph import TriageGraph
from triage.core.model import SYMPTOMS
from triage.rules import SLO_DEFAULTS, Slo, load_slo
from triage.rules.records import UNJOINED
from triage.rules.render import ALERT_GROUP, SIGNAL_GROUP, render_rules

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "fixtures"
TEMPLATE = re.compile(r"\{\{\s*(.*?)\s*\}\}")
LOOKBACK = 300.0


# --- promtool -------------------------------------------------------------------------------


@cache
def _promtool_path() -> str | None:
    found = shutil.which("promtool")
    if found is None and Path("/usr/bin/promtool").exists():
        found = "/usr/bin/promtool"
    return found


def promtool() -> str:
    """promtool's path; skip loudly without it, but fail under CI=true, where it must run."""
    path = _promtool_path()
    if path is None:
        if os.environ.get("CI") == "true":
            pytest.fail("promtool is required in CI (Debian package prometheus)")
        pytest.skip("promtool not installed (Debian package prometheus): generated rules NOT checked")
    return path


@cache
def _promtool_major() -> int:
    out = subprocess.run([promtool(), "--version"], capture_output=True, text=True, timeout=30)
    match = re.search(r"version (\d+)\.", out.stdout + out.stderr)
    return int(match.group(1)) if match else 2


def run_promtool(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([promtool(), *args], capture_output=True, text=True, timeout=300)


# --- the generated rules --------------------------------------------------------------------


@pytest.fixture(scope="module")
def slo() -> Slo:
    return load_slo(None)


@pytest.fixture(scope="module")
def rules_text(slo: Slo) -> str:
    return render_rules(load_catalog(), slo, QueryOptions())


@pytest.fixture(scope="module")
def rules(rules_text: str) -> dict[str, list[dict[str, Any]]]:
    doc = yaml.safe_load(rules_text)
    return {group["name"]: group["rules"] for group in doc["groups"]}


def alerts_of(rules: Mapping[str, list[dict[str, Any]]]) -> dict[str, dict[str, Any]]:
    return {rule["alert"]: rule for rule in rules[ALERT_GROUP]}


def test_rule_file_passes_promtool_check(tmp_path: Path, rules_text: str) -> None:
    path = tmp_path / "triage-rules.yml"
    path.write_text(rules_text, encoding="utf-8")
    result = run_promtool("check", "rules", str(path))
    assert result.returncode == 0, result.stdout + result.stderr
    total = sum(len(g["rules"]) for g in yaml.safe_load(rules_text)["groups"])
    assert f"SUCCESS: {total} rules found" in result.stdout


def test_selector_and_replica_label_reach_every_rule(tmp_path: Path, slo: Slo) -> None:
    """The rules of a single fleet (no fleet labels): exactly as before fleets existed."""
    options = QueryOptions(replica_label="pod", selector='namespace="llm"')
    text = render_rules(load_catalog(), slo, options, ())
    doc = yaml.safe_load(text)
    records = doc["groups"][0]["rules"]
    assert all("instance" not in r["expr"] for r in records)
    assert any("by (le, pod)" in r["expr"] for r in records)
    assert all('namespace="llm"' in r["expr"] for r in records if "{" in r["expr"])
    kv = next(r for r in doc["groups"][1]["rules"] if r["alert"] == "KVCacheNearFull")
    assert "on(pod)" in kv["expr"] and "$labels.pod" in kv["annotations"]["summary"]
    path = tmp_path / "pod-rules.yml"
    path.write_text(text, encoding="utf-8")
    result = run_promtool("check", "rules", str(path))
    assert result.returncode == 0, result.stdout + result.stderr


def test_every_signal_with_a_source_is_recorded_as_the_or_of_its_sources_in_order(
    rules: Mapping[str, list[dict[str, Any]]],
) -> None:
    catalog = load_catalog()
    records = {r["record"]: r["expr"] for r in rules[SIGNAL_GROUP]}
    for signal, sources in catalog.sources.items():
        for view, suffix in (("fleet", ""), ("replica", ":replica")):
            # Endpoints addresses name no pod: per-fleet rules leave them out
            templates = [
                getattr(s, view)
                for s in sources
                if getattr(s, view) is not None and s.exporter not in UNJOINED
            ]
            name = f"triage:{signal}{suffix}"
            if not templates:
                assert name not in records
                continue
            expr = records[name]
            if len(templates) > 1:
                assert expr.startswith("(") and ") or (" in expr
            # each source's first metric, found after the previous source's (several share one)
            metrics = [re.search(r"([a-zA-Z_:][a-zA-Z0-9_:]*)\{", t) for t in templates]
            position = 0
            for m in metrics:
                if m is not None:
                    found = expr.find(m.group(1), position)
                    assert found >= position, f"{name}: sources out of catalog order ({m.group(1)})"
                    position = found + 1
    assert "triage:list_price_per_1k_tokens" not in records  # no exporter publishes it
    assert "triage:replicas_ready" in records and "triage:replicas_ready:replica" not in records


def test_user_catalog_sources_come_first(tmp_path: Path, slo: Slo) -> None:
    extra = tmp_path / "mine.yaml"
    extra.write_text(
        "schema_version: 1\nsignals:\n  ttft_p99_seconds:\n    - source: mine\n"
        "      requires: [my_ttft_p99]\n      fleet: max(my_ttft_p99{$sel})\n",
        encoding="utf-8",
    )
    text = render_rules(load_catalog([str(extra)]), slo, QueryOptions())
    record = next(
        r for r in yaml.safe_load(text)["groups"][0]["rules"] if r["record"] == "triage:ttft_p99_seconds"
    )
    assert record["expr"].startswith(
        "(max by (namespace, model_name, service_name) "
        '((my_ttft_p99{server="",namespace!="",model_name!=""}) or '
    )
    assert ") or (histogram_quantile(0.99" in record["expr"]
    assert f"# catalog: bundled, {extra}" in text


def test_latency_alerts_are_separate_p99s_never_the_mean(rules: Mapping[str, list[dict[str, Any]]]) -> None:
    alerts = alerts_of(rules)
    for rule in alerts.values():
        expr = rule["expr"]
        assert not re.search(r"_sum\b|_count\b", expr), f"{rule['alert']} divides a sum by a count: {expr}"
        for name in RECORDED.findall(expr):
            assert name.startswith("triage:"), "alerts read only the recorded series"
    assert set(RECORDED.findall(alerts["TTFTP99High"]["expr"])) == {"triage:ttft_p99_seconds"}
    assert set(RECORDED.findall(alerts["TPOTP99High"]["expr"])) == {"triage:tpot_p99_seconds"}
    assert "avg" not in alerts["TTFTP99High"]["expr"] and "avg" not in alerts["TPOTP99High"]["expr"]
    records = {r["record"]: r["expr"] for r in rules[SIGNAL_GROUP]}
    for signal in ("ttft_p99_seconds", "tpot_p99_seconds"):
        for name in (f"triage:{signal}", f"triage:{signal}:replica"):
            assert records[name].count("histogram_quantile(0.99,") >= 1
            assert not re.search(r"_sum\b|_count\b|avg", records[name])


def test_every_alert_names_a_vocabulary_symptom_and_a_severity(
    rules: Mapping[str, list[dict[str, Any]]], graph: TriageGraph
) -> None:
    alerts = alerts_of(rules)
    assert set(alerts) == {
        "TTFTP99High",
        "TPOTP99High",
        "GatewayLatencyP99High",
        "ErrorRatioHigh",
        "UpstreamErrorRatioHigh",
        "RejectedRatioHigh",
        "QueueGrowing",
        "KVCacheNearFull",
        "PrefixHitRatioDrop",
        "GPUXidError",
        "GPUEccErrors",
        "ReplicasBelowDesired",
        "SpendJump",
        "EngineStalled",
        "AdmissionStall",
        "BatchCapped",
        "GPULinkFaults",
        "KVTransferFailures",
        "RouteShareShift",
    }
    patterns = graph.knowledge.settings.alert_symptoms
    for name, rule in alerts.items():
        labels = rule["labels"]
        assert set(labels) == {"symptom", "severity"}
        assert labels["symptom"] in SYMPTOMS and labels["symptom"] in graph.knowledge.symptoms
        assert all("{{" not in v and "$" not in v for v in labels.values()), "label values must be literal"
        assert set(rule["annotations"]) == {"summary", "description"}
        assert "$value" in rule["annotations"]["summary"]
        by_name = next((p.symptom for p in patterns if re.search(p.match, name, re.IGNORECASE)), None)
        assert by_name in (None, labels["symptom"]), f"{name}: its name reads as {by_name}"
    assert alerts["TTFTP99High"]["labels"]["symptom"] == "ttft_slow"
    assert alerts["TPOTP99High"]["labels"]["symptom"] == "tpot_slow"
    assert alerts["SpendJump"]["labels"]["symptom"] == "cost_up"


def test_thresholds_come_from_the_slo(slo: Slo) -> None:
    custom = slo.model_copy(update={"ttft": slo.ttft.model_copy(update={"p99_seconds": 2.5, "for_": "2m"})})
    alerts = alerts_of(
        {
            g["name"]: g["rules"]
            for g in yaml.safe_load(render_rules(load_catalog(), custom, QueryOptions()))["groups"]
        }
    )
    assert alerts["TTFTP99High"]["expr"] == "triage:ttft_p99_seconds > 2.5"
    assert alerts["TTFTP99High"]["for"] == "2m"
    assert alerts["TPOTP99High"]["expr"] == "triage:tpot_p99_seconds > 0.05"


def test_render_is_pure_and_deterministic(monkeypatch: pytest.MonkeyPatch, slo: Slo) -> None:
    catalog = load_catalog()
    first = render_rules(catalog, slo, QueryOptions())

    def no_io(*args: object, **kwargs: object) -> None:
        raise AssertionError("render_rules opened a file")

    monkeypatch.setattr(builtins, "open", no_io)
    assert render_rules(catalog, slo, QueryOptions()) == first


# --- promtool test rules on the fixtures ----------------------------------------------------


def _labels(pairs: Mapping[str, str]) -> str:
    return "{" + ",".join(f'{k}="{v}"' for k, v in sorted(pairs.items())) + "}" if pairs else ""


def recorded_inputs(fixture: Fixture, names: set[str]) -> list[dict[str, str]]:
    """The fixture's signals under the recorded names the alerts read, in promtool notation."""
    frame = fixture.frame
    out = []
    for name in sorted(names):
        signal = name.removeprefix("triage:").removesuffix(":replica")
        if not frame.has(signal):
            continue
        if name.endswith(":replica"):
            for row in frame.rows(signal):
                if row.replica is not None:
                    out.append({"series": name + _labels(row.label_map), "values": compress(row.values)})
        else:
            out.append({"series": name, "values": compress(frame.fleet(signal))})
    return out


class Samples:
    """What promtool holds for one input series: the values as written, on the fixture's grid."""

    def __init__(self, values_text: str, step: float) -> None:
        self.values = parse_values(values_text)
        self.times = step * np.arange(len(self.values))

    def window(self, t: float, span: float) -> np.ndarray:
        """A range selector `[span]` at t: closed on the left before Prometheus 3, open from 3 on."""
        low = self.times > t - span if _promtool_major() >= 3 else self.times >= t - span
        picked = self.values[low & (self.times <= t)]
        return picked[np.isfinite(picked)]

    def instant(self, t: float) -> float:
        """An instant selector at t: the latest sample within the lookback."""
        recent = self.window(t, LOOKBACK)
        return float(recent[-1]) if recent.size else math.nan


def prom_quantile(q: float, values: np.ndarray) -> float:
    """Prometheus's quantile_over_time (same interpolation, same arithmetic)."""
    if values.size == 0:
        return math.nan
    ordered = np.sort(values)
    rank = q * (len(ordered) - 1)
    lower = max(0, math.floor(rank))
    upper = min(len(ordered) - 1, lower + 1)
    weight = rank - math.floor(rank)
    return float(ordered[lower] * (1 - weight) + ordered[upper] * weight)


def annotate(rule: Mapping[str, Any], value: float, labels: Mapping[str, str]) -> dict[str, str]:
    """The rule's annotations as Prometheus renders them for this value and these labels."""

    def one(match: re.Match[str]) -> str:
        body = match.group(1)
        if body == '$value | printf "%.3g"':
            return f"{value:.3g}"
        if body.startswith("$labels."):
            return labels[body.removeprefix("$labels.")]
        raise AssertionError(f"no renderer for the template {{{{ {body} }}}}")

    return {k: TEMPLATE.sub(one, v) for k, v in rule["annotations"].items()}


def eval_times(at: float, hold: str | None, step: float) -> Iterator[float]:
    """Every rule evaluation in [at - for, at]: an alert fires at `at` only if it held at each."""
    span = parse_duration(hold) if hold else 0.0
    t = at - span
    while t <= at + 1e-9:
        yield t
        t += step


Condition = Callable[[dict[str, Samples], float], float | None]


def expected_alerts(
    rule: Mapping[str, Any],
    inputs: list[dict[str, str]],
    step: float,
    at: float,
    condition: Condition,
    series: str,
) -> list[dict[str, Any]]:
    """Alerts firing at `at`: one per row of `series` whose `condition` held at every evaluation.

    The condition sees every input of the same replica (or the fleet rows, for a fleet
    series) by name, and returns the alert's value, or None when it does not hold.
    """
    table: dict[str, list[tuple[dict[str, str], Samples]]] = {}
    for item in inputs:
        name, _, rest = item["series"].partition("{")
        labels = dict(re.findall(r'(\w+)="([^"]*)"', rest))
        table.setdefault(name, []).append((labels, Samples(item["values"], step)))
    out = []
    for labels, samples in table[series]:
        instance = labels.get("instance")
        own = {
            name: next(s for lb, s in rows if lb.get("instance") == instance)
            for name, rows in table.items()
            if any(lb.get("instance") == instance for lb, _ in rows)
        }
        own[series] = samples
        values = [condition(own, t) for t in eval_times(at, rule.get("for"), step)]
        if all(v is not None for v in values):
            value = values[-1]
            assert value is not None
            out.append(
                {"exp_labels": {**labels, **rule["labels"]}, "exp_annotations": annotate(rule, value, labels)}
            )
    return out


def above(series: str, threshold: float) -> Condition:
    def check(s: dict[str, Samples], t: float) -> float | None:
        v = s[series].instant(t)
        return v if v > threshold else None

    return check


def kv_near_full(slo: Slo) -> Condition:
    k = slo.kv_near_full

    def check(s: dict[str, Samples], t: float) -> float | None:
        median = prom_quantile(0.5, s["triage:kv_usage_ratio:replica"].window(t, parse_duration(k.window)))
        preempting = s["triage:preemption_rate:replica"].instant(t) > k.min_preemption_rate
        return median if median >= k.ratio and preempting else None

    return check


def xid_held(slo: Slo) -> Condition:
    """A non-zero last code that appeared or changed within `hold` (the code persists after the fault)."""

    def check(s: dict[str, Samples], t: float) -> float | None:
        held = s["triage:gpu_xid:replica"].window(t, parse_duration(slo.gpu_xid.hold))
        changed = bool(held.size) and bool((np.diff(held) != 0).any())
        return float(held[-1]) if changed and held[-1] > 0 else None

    return check


def promtool_test(
    tmp_path: Path,
    rules_text: str,
    fixture: Fixture,
    inputs: list[dict[str, str]],
    cases: list[dict[str, Any]],
) -> None:
    rule_file = tmp_path / "rules.yml"
    rule_file.write_text(alerts_only(rules_text), encoding="utf-8")
    step = f"{round(fixture.interval)}s"
    test = {
        "rule_files": [str(rule_file)],
        "evaluation_interval": step,
        "tests": [{"name": fixture.name, "interval": step, "input_series": inputs, "alert_rule_test": cases}],
    }
    test_file = tmp_path / "test.yml"
    test_file.write_text(yaml.safe_dump(test, sort_keys=False, width=1 << 30), encoding="utf-8")
    result = run_promtool("test", "rules", str(test_file))
    assert result.returncode == 0, result.stdout + result.stderr


def _case(name: str, at: float, alerts: list[dict[str, Any]]) -> dict[str, Any]:
    return {"eval_time": f"{round(at)}s", "alertname": name, "exp_alerts": alerts}


def _referenced(rules: Mapping[str, list[dict[str, Any]]]) -> set[str]:
    return {n for rule in rules[ALERT_GROUP] for n in RECORDED.findall(rule["expr"])}


def test_ttft_p99_fires_on_replica_down(
    tmp_path: Path, rules_text: str, rules: Mapping[str, list[dict[str, Any]]], slo: Slo
) -> None:
    promtool()
    fixture = load_fixture(str(FIXTURES / "replica-down-queue-growth.yaml"))
    inputs = recorded_inputs(fixture, _referenced(rules))
    at = fixture.at - fixture.start
    rule = alerts_of(rules)["TTFTP99High"]
    expected = expected_alerts(
        rule,
        inputs,
        fixture.interval,
        at,
        above("triage:ttft_p99_seconds", slo.ttft.p99_seconds),
        "triage:ttft_p99_seconds",
    )
    assert len(expected) == 1 and expected[0]["exp_labels"]["symptom"] == "ttft_slow"
    promtool_test(tmp_path, rules_text, fixture, inputs, [_case("TTFTP99High", at, expected)])


def test_tpot_p99_and_kv_near_full_fire_on_kv_pressure(
    tmp_path: Path, rules_text: str, rules: Mapping[str, list[dict[str, Any]]], slo: Slo
) -> None:
    promtool()
    fixture = load_fixture(str(FIXTURES / "kv-pressure-long-context.yaml"))
    inputs = recorded_inputs(fixture, _referenced(rules))
    at = fixture.at - fixture.start
    alerts = alerts_of(rules)
    tpot = expected_alerts(
        alerts["TPOTP99High"],
        inputs,
        fixture.interval,
        at,
        above("triage:tpot_p99_seconds", slo.tpot.p99_seconds),
        "triage:tpot_p99_seconds",
    )
    kv = expected_alerts(
        alerts["KVCacheNearFull"],
        inputs,
        fixture.interval,
        at,
        kv_near_full(slo),
        "triage:kv_usage_ratio:replica",
    )
    assert len(tpot) == 1 and tpot[0]["exp_labels"]["symptom"] == "tpot_slow"
    assert len(kv) >= 3, "most replicas of this fixture are pinned near full"
    assert all(a["exp_labels"]["symptom"] == "tpot_slow" and "instance" in a["exp_labels"] for a in kv)
    promtool_test(
        tmp_path,
        rules_text,
        fixture,
        inputs,
        [_case("TPOTP99High", at, tpot), _case("KVCacheNearFull", at, kv)],
    )


def test_xid_fires_per_gpu_on_gpu_fault(
    tmp_path: Path, rules_text: str, rules: Mapping[str, list[dict[str, Any]]], slo: Slo
) -> None:
    promtool()
    fixture = load_fixture(str(FIXTURES / "gpu-fault-xid79-replica-lost.yaml"))
    inputs = recorded_inputs(fixture, _referenced(rules))
    at = fixture.at - fixture.start
    rule = alerts_of(rules)["GPUXidError"]
    expected = expected_alerts(rule, inputs, fixture.interval, at, xid_held(slo), "triage:gpu_xid:replica")
    assert [a["exp_labels"]["instance"] for a in expected] == ["vllm-5"]
    assert expected[0]["exp_labels"]["gpu"] == "0" and "XID 79 " in expected[0]["exp_annotations"]["summary"]
    promtool_test(tmp_path, rules_text, fixture, inputs, [_case("GPUXidError", at, expected)])


def test_xid_fires_for_a_new_code_never_for_one_held_from_before(
    tmp_path: Path, rules_text: str, rules: Mapping[str, list[dict[str, Any]]]
) -> None:
    """DCGM_FI_DEV_XID_ERRORS is the last code, held after the fault: a GPU that has shown
    XID 43 since before anything was recorded is no new fault, one whose code appears (0 -> 13)
    or changes (43 -> 79) is, for `hold` (10m) after the change."""
    promtool()
    rule = alerts_of(rules)["GPUXidError"]
    series = {
        ("a", "0"): "43x120",
        ("b", "0"): "0x39 13x80",
        ("c", "1"): "43x39 79x80",
    }
    inputs = [
        {"series": f'triage:gpu_xid:replica{{instance="{i}",gpu="{g}"}}', "values": v}
        for (i, g), v in series.items()
    ]

    def fired(instance: str, gpu: str, code: float) -> dict[str, Any]:
        labels = {"instance": instance, "gpu": gpu}
        return {"exp_labels": {**labels, **rule["labels"]}, "exp_annotations": annotate(rule, code, labels)}

    cases = [
        _case("GPUXidError", 9 * 60, []),
        _case("GPUXidError", 15 * 60, [fired("b", "0", 13), fired("c", "1", 79)]),
        _case("GPUXidError", 25 * 60, []),
    ]
    test = {
        "rule_files": [str(tmp_path / "rules.yml")],
        "evaluation_interval": "15s",
        "tests": [{"name": "xid", "interval": "15s", "input_series": inputs, "alert_rule_test": cases}],
    }
    (tmp_path / "rules.yml").write_text(alerts_only(rules_text), encoding="utf-8")
    (tmp_path / "test.yml").write_text(yaml.safe_dump(test, sort_keys=False, width=1 << 30), encoding="utf-8")
    result = run_promtool("test", "rules", str(tmp_path / "test.yml"))
    assert result.returncode == 0, result.stdout + result.stderr


def test_no_alert_fires_on_a_healthy_fleet(
    tmp_path: Path, rules_text: str, rules: Mapping[str, list[dict[str, Any]]]
) -> None:
    promtool()
    fixture = load_fixture(str(FIXTURES / "healthy-fleet-no-incident.yaml"))
    inputs = recorded_inputs(fixture, _referenced(rules))
    assert {"triage:kv_usage_ratio:replica", "triage:ttft_p99_seconds", "triage:queue_waiting"} <= {
        i["series"].partition("{")[0] for i in inputs
    }
    end = fixture.frame.end - fixture.start
    times = sorted({*np.arange(0.0, end + 1, 300.0).tolist(), fixture.at - fixture.start, end})
    cases = [_case(name, t, []) for name in alerts_of(rules) for t in times]
    promtool_test(tmp_path, rules_text, fixture, inputs, cases)


# --- recording rules on raw exporter series -------------------------------------------------


def test_recording_rules_on_raw_vllm_and_sglang_series(tmp_path: Path, rules_text: str) -> None:
    promtool()
    rule_file = tmp_path / "rules.yml"
    read = {"triage:request_rate", "triage:error_ratio", "triage:ttft_p99_seconds", "triage:kv_usage_ratio"}
    read |= {"triage:request_rate:replica", "triage:kv_usage_ratio:replica"}
    rule_file.write_text(rules_reading(rules_text, read), encoding="utf-8")
    # histogram_quantile interpolates inside the bucket (0.5, 1] that holds every request
    ttft_p99 = 0.5 + (1.0 - 0.5) * ((0.99 * 4.0) / 4.0)
    vllm = {
        "interval": "15s",
        "input_series": [
            # V1 names on a; b runs 0.9 (old KV name only); c runs 0.10 (old and new: `or`, never summed)
            {
                "series": 'vllm:request_success_total{instance="a",finished_reason="stop"}',
                "values": "0+45x80",
            },
            {
                "series": 'vllm:request_success_total{instance="a",finished_reason="abort"}',
                "values": "0+15x80",
            },
            {
                "series": 'vllm:request_success_total{instance="b",finished_reason="stop"}',
                "values": "0+30x80",
            },
            {"series": 'vllm:kv_cache_usage_perc{instance="a"}', "values": "0.25x80"},
            {"series": 'vllm:gpu_cache_usage_perc{instance="b"}', "values": "0.75x80"},
            {"series": 'vllm:kv_cache_usage_perc{instance="c"}', "values": "0.5x80"},
            {"series": 'vllm:gpu_cache_usage_perc{instance="c"}', "values": "0.5x80"},
            {"series": 'vllm:time_to_first_token_seconds_bucket{instance="a",le="0.5"}', "values": "0x80"},
            {"series": 'vllm:time_to_first_token_seconds_bucket{instance="a",le="1"}', "values": "0+60x80"},
            {
                "series": 'vllm:time_to_first_token_seconds_bucket{instance="a",le="+Inf"}',
                "values": "0+60x80",
            },
            {"series": 'vllm:time_to_first_token_seconds_sum{instance="a"}', "values": "0+1x80"},
            {"series": 'vllm:time_to_first_token_seconds_count{instance="a"}', "values": "0+60x80"},
        ],
        "promql_expr_test": [
            {
                "expr": "triage:request_rate",
                "eval_time": "10m",
                "exp_samples": [{"labels": "triage:request_rate", "value": 6}],
            },
            {
                "expr": "triage:request_rate:replica",
                "eval_time": "10m",
                "exp_samples": [
                    {"labels": 'triage:request_rate:replica{instance="a"}', "value": 4},
                    {"labels": 'triage:request_rate:replica{instance="b"}', "value": 2},
                ],
            },
            {
                "expr": "triage:error_ratio",
                "eval_time": "10m",
                "exp_samples": [{"labels": "triage:error_ratio", "value": 1 / 6}],
            },
            {
                "expr": "triage:kv_usage_ratio",
                "eval_time": "10m",
                "exp_samples": [{"labels": "triage:kv_usage_ratio", "value": 0.5}],
            },
            {
                "expr": "triage:kv_usage_ratio:replica",
                "eval_time": "10m",
                "exp_samples": [
                    {"labels": 'triage:kv_usage_ratio:replica{instance="a"}', "value": 0.25},
                    {"labels": 'triage:kv_usage_ratio:replica{instance="b"}', "value": 0.75},
                    {"labels": 'triage:kv_usage_ratio:replica{instance="c"}', "value": 0.5},
                ],
            },
            # the quantile of the buckets, not the mean that _sum / _count would give (1/60 s)
            {
                "expr": "triage:ttft_p99_seconds",
                "eval_time": "10m",
                "exp_samples": [{"labels": "triage:ttft_p99_seconds", "value": ttft_p99}],
            },
        ],
    }
    sglang = {
        "interval": "15s",
        "input_series": [
            {"series": 'sglang:num_requests_total{instance="s0"}', "values": "0+30x80"},
            {"series": 'sglang:token_usage{instance="s0"}', "values": "0.25x80"},
            {"series": 'sglang:token_usage{instance="s1"}', "values": "0.75x80"},
        ],
        "promql_expr_test": [
            {
                "expr": "triage:request_rate",
                "eval_time": "10m",
                "exp_samples": [{"labels": "triage:request_rate", "value": 2}],
            },
            {
                "expr": "triage:kv_usage_ratio",
                "eval_time": "10m",
                "exp_samples": [{"labels": "triage:kv_usage_ratio", "value": 0.5}],
            },
        ],
    }
    test = {"rule_files": [str(rule_file)], "evaluation_interval": "15s", "tests": [vllm, sglang]}
    test_file = tmp_path / "recording.yml"
    test_file.write_text(yaml.safe_dump(test, sort_keys=False, width=1 << 30), encoding="utf-8")
    result = run_promtool("test", "rules", str(test_file))
    assert result.returncode == 0, result.stdout + result.stderr


# --- the SLO file ---------------------------------------------------------------------------


def test_defaults_file_is_the_default(slo: Slo) -> None:
    assert slo.ttft.p99_seconds == 1.0 and slo.tpot.p99_seconds == 0.05
    assert slo.error_ratio.ratio == 0.01 and slo.rejected_ratio.ratio == 0.01
    assert slo.kv_near_full.ratio == 0.95 and slo.kv_near_full.min_preemption_rate == 0
    assert slo.prefix_hit_drop.factor == 0.7 and slo.prefix_hit_drop.baseline == "1h"
    assert slo.spend_jump.factor == 1.3 and slo.spend_jump.baseline == "1d"

    lines = SLO_DEFAULTS.read_text(encoding="utf-8").splitlines()
    for i, line in enumerate(lines):
        if re.match(r"^[a-z_]+:\s*$", line):  # a group: a comment block says which alert and why
            assert lines[i - 1].startswith("#"), f"{line} is not documented"
        elif re.match(r"^  [a-z_0-9]+:", line) and not re.match(r"^  (for|severity):", line):
            assert "#" in line, f"{line.strip()} is not documented"  # for and severity: in the header


def test_a_user_file_overrides_only_what_it_sets(tmp_path: Path, slo: Slo) -> None:
    path = tmp_path / "slo.yaml"
    path.write_text("ttft:\n  p99_seconds: 2\ntpot:\n  for: 10m\n", encoding="utf-8")
    mine = load_slo(str(path))
    assert mine.ttft.p99_seconds == 2.0 and mine.ttft.for_ == slo.ttft.for_
    assert mine.tpot.for_ == "10m" and mine.tpot.p99_seconds == slo.tpot.p99_seconds
    assert mine.spend_jump == slo.spend_jump


def _problems(tmp_path: Path, text: str) -> list[str]:
    path = tmp_path / "slo.yaml"
    path.write_text(text, encoding="utf-8")
    with pytest.raises((InputError, InputErrors)) as info:
        load_slo(str(path))
    return str(info.value).splitlines()


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("ttft:\n  p99_secs: 2\n", r"slo\.yaml:2: ttft\.p99_secs: unknown key \(did you mean p99_seconds"),
        ("tpot:\n  for: 5m\nlatency: {}\n", r"slo\.yaml:3: latency: unknown key"),
        ("ttft:\n  p99_seconds: fast\n", r"slo\.yaml:2: ttft\.p99_seconds: Input should be a valid number"),
        ("kv_near_full:\n  ratio: 1.5\n", r"slo\.yaml:2: kv_near_full\.ratio: .*less than or equal to 1"),
        ("spend_jump:\n  for: 30 minutes\n", r"slo\.yaml:2: spend_jump\.for: '30 minutes' is not a"),
        ("queue_growth:\n  window: 0s\n", r"slo\.yaml:2: queue_growth\.window: must be longer than zero"),
        ("replicas: 3\n", r"slo\.yaml:1: replicas: expected a mapping of min_missing, for, severity"),
        ("ttft:\n  severity: PAGE!\n", r"slo\.yaml:2: ttft\.severity: String should match pattern"),
        ("schema_version: 2\n", r"slo\.yaml:1: schema_version: Input should be 1"),
        ("- ttft\n", r"slo\.yaml:1: \(document\): an SLO file is a mapping"),
    ],
)
def test_bad_slo_files_are_located(tmp_path: Path, text: str, expected: str) -> None:
    problems = _problems(tmp_path, text)
    assert any(re.search(expected, p) for p in problems), problems


def test_every_problem_is_reported_at_once(tmp_path: Path) -> None:
    problems = _problems(tmp_path, "ttft:\n  p99_second: 1\ntpot:\n  p99_seconds: '0.05'\n")
    assert len(problems) == 2
    assert problems[0].endswith(
        "slo.yaml:2: ttft.p99_second: unknown key (did you mean p99_seconds?); "
        "allowed: p99_seconds, for, severity"
    )
    assert re.search(r"slo\.yaml:4: tpot\.p99_seconds: Input should be a valid number", problems[1])


def test_a_missing_slo_file_is_an_input_error(tmp_path: Path) -> None:
    with pytest.raises(InputError, match=r"nope\.yaml:0: \(file\): no such file"):
        load_slo(str(tmp_path / "nope.yaml"))
