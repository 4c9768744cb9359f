"""`triage rules` at the edge: the gateway's P99 latency and its upstream error ratio.

`GatewayLatencyP99High` (symptom `ttft_slow`) and `UpstreamErrorRatioHigh` (symptom `errors`)
read only `triage:gateway_latency_p99_seconds` and `triage:upstream_error_ratio`, exist only
when the catalog records those signals, and keep the fleet labels of the series they fire
on. `promtool test rules` holds them to what they promise, firing and not firing: a slow
edge in front of healthy engines fires, slow engines behind an edge within its SLO do
not fire the edge's alert, a blip shorter than `for:` fires nothing, and upstream errors
on zero traffic fire nothing (the ratio has no sample). Two cases feed raw LiteLLM series
through the recording rules, so the catalog's sources are tested with the alerts.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from rulekit import alerts_only, rules_reading
from test_rules import annotate, promtool, run_promtool

from signals.catalog import Catalog, QueryOptions, load_catalog
from triage.rules import load_slo
from triage.rules.alerts import alerts
from triage.rules.records import Views
from triage.rules.render import ALERT_GROUP, SIGNAL_GROUP, render_rules

EDGE = ("GatewayLatencyP99High", "UpstreamErrorRatioHigh")
STEP = "15s"
FLEET = {"namespace": "llm", "model_name": "m"}
EDGE_FLEET = {"namespace": "llm"}  # LiteLLM's series carry the namespace they are scraped in, no model_name
RATIO = "triage:upstream_error_ratio"


@pytest.fixture(scope="module")
def rules_text() -> str:
    return render_rules(load_catalog(), load_slo(), QueryOptions())


@pytest.fixture(scope="module")
def edge_rules(rules_text: str) -> dict[str, dict[str, Any]]:
    doc = yaml.safe_load(rules_text)
    group = next(g for g in doc["groups"] if g["name"] == ALERT_GROUP)
    return {r["alert"]: r for r in group["rules"] if r["alert"] in EDGE}


def _series(name: str, labels: dict[str, str]) -> str:
    return name + "{" + ",".join(f'{k}="{v}"' for k, v in sorted(labels.items())) + "}"


def _fired(rule: dict[str, Any], value: float, labels: dict[str, str]) -> dict[str, Any]:
    return {"exp_labels": {**labels, **rule["labels"]}, "exp_annotations": annotate(rule, value, labels)}


def _case(name: str, at: str, fired: list[dict[str, Any]]) -> dict[str, Any]:
    return {"eval_time": at, "alertname": name, "exp_alerts": fired}


def _promtool_test(tmp_path: Path, rules_text: str, tests: list[dict[str, Any]], *, recorded: bool) -> None:
    """`recorded`: the inputs are the recorded `triage:` series, so only the alert group runs;
    otherwise the edge alerts run with the records they read."""
    rule_file = tmp_path / "rules.yml"
    used = alerts_only(rules_text) if recorded else rules_reading(rules_text, {*EDGE, RATIO})
    rule_file.write_text(used, encoding="utf-8")
    document = {"rule_files": [str(rule_file)], "evaluation_interval": STEP, "tests": tests}
    test_file = tmp_path / "edge.yml"
    test_file.write_text(yaml.safe_dump(document, sort_keys=False, width=1 << 30), encoding="utf-8")
    result = run_promtool("test", "rules", str(test_file))
    assert result.returncode == 0, result.stdout + result.stderr


# --- the rules themselves ---------------------------------------------------------------------------


def test_the_edge_alerts_read_the_recorded_edge_signals_and_say_where_triage_starts(
    edge_rules: dict[str, dict[str, Any]],
) -> None:
    slo = load_slo()
    latency, upstream = edge_rules["GatewayLatencyP99High"], edge_rules["UpstreamErrorRatioHigh"]
    assert latency["expr"] == f"triage:gateway_latency_p99_seconds > {slo.gateway_latency.p99_seconds:g}"
    assert latency["for"] == slo.gateway_latency.for_ and latency["labels"] == {
        "symptom": "ttft_slow",
        "severity": slo.gateway_latency.severity,
    }
    assert upstream["expr"] == f"triage:upstream_error_ratio > {slo.upstream_error_ratio.ratio:g}"
    assert upstream["labels"] == {"symptom": "errors", "severity": slo.upstream_error_ratio.severity}
    assert "Triage from ttft_slow" in latency["annotations"]["description"]
    assert "engines behind it" in latency["annotations"]["description"]
    assert "Triage from errors" in upstream["annotations"]["description"]
    assert all("$value" in r["annotations"]["summary"] for r in edge_rules.values())


def test_the_thresholds_come_from_the_slo_file(tmp_path: Path) -> None:
    path = tmp_path / "slo.yaml"
    path.write_text(
        "gateway_latency:\n  p99_seconds: 4\n  for: 2m\n"
        "upstream_error_ratio:\n  ratio: 0.05\n  severity: page\n",
        encoding="utf-8",
    )
    text = render_rules(load_catalog(), load_slo(str(path)), QueryOptions())
    group = next(g for g in yaml.safe_load(text)["groups"] if g["name"] == ALERT_GROUP)
    found = {r["alert"]: r for r in group["rules"]}
    assert found["GatewayLatencyP99High"]["expr"] == "triage:gateway_latency_p99_seconds > 4"
    assert found["GatewayLatencyP99High"]["for"] == "2m"
    assert found["UpstreamErrorRatioHigh"]["expr"] == "triage:upstream_error_ratio > 0.05"
    assert found["UpstreamErrorRatioHigh"]["labels"]["severity"] == "page"


def test_the_edge_alerts_exist_only_where_the_catalog_records_their_signals(tmp_path: Path) -> None:
    bundled = load_catalog()
    edge = ("gateway_latency_p99_seconds", "upstream_error_ratio")
    edge_blind = Catalog({s: (() if s in edge else v) for s, v in bundled.sources.items()}, bundled.files)
    text = render_rules(edge_blind, load_slo(), QueryOptions())
    doc = yaml.safe_load(text)
    names = {r["alert"] for g in doc["groups"] if g["name"] == ALERT_GROUP for r in g["rules"]}
    records = {r["record"] for g in doc["groups"] if g["name"] == SIGNAL_GROUP for r in g["rules"]}
    assert not names & set(EDGE) and "TTFTP99High" in names
    assert "triage:gateway_latency_p99_seconds" not in records
    assert "# not generated: GatewayLatencyP99High (no source for gateway_latency_p99_seconds)" in text
    assert "# not generated: UpstreamErrorRatioHigh (no source for upstream_error_ratio)" in text
    path = tmp_path / "blind.yml"
    path.write_text(text, encoding="utf-8")
    result = run_promtool("check", "rules", str(path))
    assert result.returncode == 0, result.stdout + result.stderr


def test_upstream_errors_recorded_only_per_backend_alert_per_backend() -> None:
    views = Views(fleet=frozenset(), replica=frozenset({"upstream_error_ratio"}))
    found, skipped = alerts(load_slo(), views, "instance", ("namespace", "model_name"))
    rule = next(a.rule() for a in found if a.name == "UpstreamErrorRatioHigh")
    assert rule["expr"] == "triage:upstream_error_ratio:replica > 0.01"
    assert "on {{ $labels.instance }}" in rule["annotations"]["summary"]
    assert any(s.startswith("GatewayLatencyP99High") for s in skipped)


# --- promtool test rules: on the recorded series ------------------------------------------------------


def test_edge_alerts_fire_and_hold_back_on_recorded_series(
    tmp_path: Path, rules_text: str, edge_rules: dict[str, dict[str, Any]]
) -> None:
    promtool()
    latency, upstream = edge_rules["GatewayLatencyP99High"], edge_rules["UpstreamErrorRatioHigh"]
    ttft = "triage:ttft_p99_seconds"
    edge = "triage:gateway_latency_p99_seconds"
    ratio = "triage:upstream_error_ratio"
    tests = [
        {
            # The edge slows from minute 10 while the engines behind it stay fast: only the edge fires,
            # and only once the breach has held for `for:` (5m).
            "name": "slow edge, healthy engines",
            "interval": STEP,
            "input_series": [
                {"series": _series(edge, EDGE_FLEET), "values": "0.4x39 2.5x120"},
                {"series": _series(ttft, FLEET), "values": "0.3x159"},
            ],
            "alert_rule_test": [
                _case("GatewayLatencyP99High", "14m", []),
                _case("GatewayLatencyP99High", "16m", [_fired(latency, 2.5, EDGE_FLEET)]),
                _case("GatewayLatencyP99High", "30m", [_fired(latency, 2.5, EDGE_FLEET)]),
                _case("TTFTP99High", "30m", []),
            ],
        },
        {
            # Engines over their TTFT SLO, the edge within its own: the engines' alert, not the edge's.
            "name": "slow engines, edge within its SLO",
            "interval": STEP,
            "input_series": [
                {"series": _series(edge, EDGE_FLEET), "values": "1.3x159"},
                {"series": _series(ttft, FLEET), "values": "1.2x159"},
            ],
            "alert_rule_test": [
                _case("GatewayLatencyP99High", "30m", []),
                _case("TTFTP99High", "30m", [_fired(_rule(rules_text, "TTFTP99High"), 1.2, FLEET)]),
            ],
        },
        {
            # Three minutes at 3 s, shorter than `for:`: pending, never firing, and gone after.
            "name": "a blip shorter than for",
            "interval": STEP,
            "input_series": [
                {"series": _series(edge, EDGE_FLEET), "values": "0.4x39 3x11 0.4x109"},
                {"series": _series(ratio, EDGE_FLEET), "values": "0.001x39 0.3x11 0.001x109"},
            ],
            "alert_rule_test": [
                _case("GatewayLatencyP99High", "12m45s", []),
                _case("GatewayLatencyP99High", "20m", []),
                _case("UpstreamErrorRatioHigh", "12m45s", []),
                _case("UpstreamErrorRatioHigh", "20m", []),
            ],
        },
        {
            "name": "upstream errors, sustained",
            "interval": STEP,
            "input_series": [{"series": _series(ratio, EDGE_FLEET), "values": "0.001x39 0.2x120"}],
            "alert_rule_test": [
                _case("UpstreamErrorRatioHigh", "14m", []),
                _case("UpstreamErrorRatioHigh", "20m", [_fired(upstream, 0.2, EDGE_FLEET)]),
            ],
        },
    ]
    _promtool_test(tmp_path, rules_text, tests, recorded=True)


def _rule(rules_text: str, name: str) -> dict[str, Any]:
    group = next(g for g in yaml.safe_load(rules_text)["groups"] if g["name"] == ALERT_GROUP)
    return next(r for r in group["rules"] if r["alert"] == name)


# --- promtool test rules: raw LiteLLM series through the recording rules --------------------------------


def _litellm(name: str, values: str, **labels: str) -> dict[str, str]:
    return {"series": _series(name, {**EDGE_FLEET, "job": "litellm", **labels}), "values": values}


def test_edge_alerts_on_raw_litellm_series(
    tmp_path: Path, rules_text: str, edge_rules: dict[str, dict[str, Any]]
) -> None:
    promtool()
    latency, upstream = edge_rules["GatewayLatencyP99High"], edge_rules["UpstreamErrorRatioHigh"]
    # 4 requests/s, every one between 2 s and 5 s: the P99 interpolates to 2 + 3 x 0.99 = 4.97 s
    buckets = [("1", "0x160"), ("2", "0x160"), ("5", "0+60x160"), ("+Inf", "0+60x160")]
    slow = [_litellm("litellm_request_total_latency_metric_bucket", v, le=le) for le, v in buckets]
    backend = {"api_base": "http://vllm-0:8000/v1", "model_id": "m0"}
    failed = {**backend, "exception_status": "503"}
    failing = [
        _litellm("litellm_deployment_total_requests_total", "0+60x160", **backend),
        _litellm("litellm_deployment_failure_responses_total", "0+6x160", **failed),
    ]
    # Failures counted long ago, no traffic now: the ratio is 0/0, which records no sample.
    idle = [
        _litellm("litellm_deployment_total_requests_total", "5000x160", **backend),
        _litellm("litellm_deployment_failure_responses_total", "900x160", **failed),
    ]
    # Traffic that fails for ten minutes, then stops: the alert resolves with the traffic.
    stopped = [
        _litellm("litellm_deployment_total_requests_total", "0+60x40 2400x120", **backend),
        _litellm("litellm_deployment_failure_responses_total", "0+30x40 1200x120", **failed),
    ]
    tests = [
        {
            "name": "LiteLLM: slow edge and failing backend",
            "interval": STEP,
            "input_series": slow + failing,
            "alert_rule_test": [
                _case("GatewayLatencyP99High", "20m", [_fired(latency, 4.97, EDGE_FLEET)]),
                _case("UpstreamErrorRatioHigh", "20m", [_fired(upstream, 0.1, EDGE_FLEET)]),
            ],
            "promql_expr_test": [
                {
                    "expr": "triage:upstream_error_ratio",
                    "eval_time": "20m",
                    "exp_samples": [{"labels": _series(RATIO, EDGE_FLEET), "value": 0.1}],
                }
            ],
        },
        {
            "name": "LiteLLM: upstream errors on zero traffic",
            "interval": STEP,
            "input_series": idle,
            "alert_rule_test": [_case("UpstreamErrorRatioHigh", "20m", [])],
            "promql_expr_test": [{"expr": RATIO, "eval_time": "20m", "exp_samples": []}],
        },
        {
            "name": "LiteLLM: failing traffic that stops",
            "interval": STEP,
            "input_series": stopped,
            "alert_rule_test": [
                _case("UpstreamErrorRatioHigh", "9m", [_fired(upstream, 0.5, EDGE_FLEET)]),
                _case("UpstreamErrorRatioHigh", "30m", []),
            ],
        },
    ]
    _promtool_test(tmp_path, rules_text, tests, recorded=False)
