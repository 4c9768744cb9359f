"""Rule analysis on a real PromQL parser: names, quantiles and means read from the syntax tree.

The first tests are cases the former regex scanner got wrong (comments read as metric
names, `NaN` taken for a metric, a quantile hidden behind a comment, a recorded name in
a `__name__` matcher expanded into garbage, a count divided by a sum taken for a mean);
then the constructs a scanner has to approximate (strings, offsets, subqueries, grouping
clauses, `bool`, nested aggregations, recording rules inside recording rules). A rule the
parser refuses is reported with the parser's message, never dropped. Last, every rule of
real rule files (vLLM's, llm-d's, kube-prometheus') is parsed and analysed.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
import yaml

from signals.catalog import QueryOptions, load_catalog, render
from triage.audit.engine import audit
from triage.audit.model import AuditSettings, Fetched
from triage.audit.promql import PromQLError, expand, metric_names_in, parse
from triage.audit.rules import AlertFacts, Rule, RulesView, analyse_alert

REAL = Path(__file__).resolve().parents[2].parent / "shared" / "real"
TTFT_P99 = "histogram_quantile(0.99, sum by (le) (rate(vllm:time_to_first_token_seconds_bucket[5m])))"
TTFT_BUCKET = "vllm:time_to_first_token_seconds_bucket"
E2E = "vllm:e2e_request_latency_seconds"


def alert(query: str, recordings: Mapping[str, str] | None = None) -> AlertFacts:
    return analyse_alert(Rule("alerting", "A", query, "g", "/etc/rules.yaml"), recordings or {})


# --- what the scanner got wrong ---------------------------------------------------------------------


def test_comments_are_not_metric_names() -> None:
    """llm-d's LLMDAvailabilitySLOBurn has `# 1h burn rate` in its expression: the scanner read `burn`."""
    facts = alert(f"(\n  # the P99 of ttft_seconds, burn rate\n  {TTFT_P99}\n) > 1")
    assert facts.names == {TTFT_BUCKET}
    assert facts.quantiles == {"ttft": 0.99}


def test_a_comment_before_the_quantile_does_not_hide_it() -> None:
    """The scanner took `# the SLO's quantile\\n 0.99` for the first argument and found no number."""
    facts = alert(
        "histogram_quantile(\n  # the SLO's quantile\n  0.99,\n"
        f"  sum by (le) (rate({TTFT_BUCKET}[5m]))\n) > 1"
    )
    assert facts.quantiles == {"ttft": 0.99}
    assert facts.names == {TTFT_BUCKET}


def test_nan_and_inf_are_numbers() -> None:
    """The scanner skipped `nan` and `inf` but read `NaN` and `Inf` as metrics."""
    assert metric_names_in(f"{E2E}_count != bool NaN") == {f"{E2E}_count"}
    assert metric_names_in(f"histogram_quantile(0.99, rate({E2E}_bucket[5m])) < +Inf") == {f"{E2E}_bucket"}


def test_a_recorded_name_in_a_name_matcher_is_expanded() -> None:
    """The scanner expanded the name inside the matcher's string and read the result as one metric name."""
    facts = alert('{__name__="job:ttft_seconds:slow"} > 1', {"job:ttft_seconds:slow": TTFT_P99})
    assert facts.names == {"job:ttft_seconds:slow", TTFT_BUCKET}
    assert facts.quantiles == {"ttft": 0.99}


def test_a_count_divided_by_a_sum_is_not_a_mean() -> None:
    """A rate per unit of latency reads `_sum` and `_count` too; only `_sum / _count` is a mean."""
    inverse = alert(f"rate({E2E}_count[5m]) / rate({E2E}_sum[5m]) < 0.2")
    assert inverse.means == ()
    mean = alert(f"rate({E2E}_sum[5m]) / rate({E2E}_count[5m]) > 5")
    assert mean.means == (("latency", f"{E2E}_sum / {E2E}_count"),)


# --- what a scanner has to approximate --------------------------------------------------------------


def test_a_metric_like_word_in_a_string_is_not_read() -> None:
    query = f'label_replace(up{{job="{TTFT_BUCKET}"}}, "dst", "{TTFT_BUCKET}", "src", "(.*)") > 0'
    assert metric_names_in(query) == {"up"}
    recorded = alert(
        'label_replace(up, "series", "job:ttft_seconds:slow", "", "") > 0',
        {"job:ttft_seconds:slow": TTFT_P99},
    )
    assert recorded.names == {"up"} and recorded.quantiles == {}


def test_name_matchers_count_only_when_they_name_one_metric() -> None:
    assert metric_names_in('{__name__="DCGM_FI_DEV_XID_ERRORS", Hostname="n1"}') == {"DCGM_FI_DEV_XID_ERRORS"}
    assert metric_names_in("{__name__='x_total'}") == {"x_total"}
    assert metric_names_in('{__name__=~"vllm:.*"}') == frozenset()
    assert metric_names_in('{__name__!="up", job="a"}') == frozenset()


def test_offset_and_at_modifiers() -> None:
    assert metric_names_in(f"rate({TTFT_BUCKET}[5m] offset 1h) - rate({TTFT_BUCKET}[5m] @ end())") == {
        TTFT_BUCKET
    }
    shifted = alert(
        "job:ttft_mean offset 1d > 1", {"job:ttft_mean": "rate(x:ttft_sum[5m]) / rate(x:ttft_count[5m])"}
    )
    assert shifted.means == (("ttft", "x:ttft_sum / x:ttft_count"), ("ttft", "job:ttft_mean"))
    assert "offset" not in shifted.expanded  # the recorded name is written out; its offset is dropped


def test_subqueries() -> None:
    peak = alert(f"max_over_time({TTFT_P99}[30m:1m]) > 1")
    assert peak.quantiles == {"ttft": 0.99} and peak.means == ()
    smoothed = alert(
        "quantile_over_time(0.95, job:e2e:rate5m[1h:]) > 1", {"job:e2e:rate5m": f"rate({E2E}_sum[5m])"}
    )
    assert smoothed.quantiles == {"latency": 0.95}
    over_recording = alert("max_over_time(job:ttft:slow[1h]) > 1", {"job:ttft:slow": TTFT_P99})
    assert over_recording.expanded == (
        f"max_over_time((histogram_quantile(0.99, sum by (le) (rate({TTFT_BUCKET}[5m]))))[1h:]) > 1"
    )
    assert metric_names_in(over_recording.expanded) == {TTFT_BUCKET}  # a range over it became a subquery


def test_grouping_clauses_hold_labels_not_metrics() -> None:
    query = (
        f"sum by (le, {TTFT_BUCKET.split(':')[1]}) (rate({TTFT_BUCKET}[5m])) "
        "/ ignoring(le) group_left(model_name) vllm:model_info "
        "* on() group_right vllm:num_requests_running"
    )
    assert metric_names_in(query) == {TTFT_BUCKET, "vllm:model_info", "vllm:num_requests_running"}


def test_bool_comparisons() -> None:
    facts = alert(f"{TTFT_P99} > bool 1 == bool 1")
    assert facts.quantiles == {"ttft": 0.99} and facts.names == {TTFT_BUCKET}


def test_nested_aggregations() -> None:
    averaged_mean = alert(
        f"avg by (model) (max by (pod) (rate({E2E}_sum[5m])) / max by (pod) (rate({E2E}_count[5m]))) > 2"
    )
    assert averaged_mean.means == (
        ("latency", f"{E2E}_sum / {E2E}_count"),
        ("latency", f"avg({E2E}_sum)"),
    )
    averaged_quantile = alert(
        "avg(quantile by (model) (0.99, job:ttft_seconds:slow)) > 1",
        {"job:ttft_seconds:slow": "max(vllm:time_to_first_token_seconds_sum)"},
    )
    assert averaged_quantile.quantiles == {"ttft": 0.99}
    assert averaged_quantile.means == ()  # an average of a quantile is not a mean latency
    topk = alert(f"topk(3, max by (pod) ({TTFT_P99})) > 1")
    assert topk.quantiles == {"ttft": 0.99}


def test_a_recording_rule_used_inside_another() -> None:
    recordings = {"slo:ttft:ratio": "job:ttft_seconds:slow / 2", "job:ttft_seconds:slow": TTFT_P99}
    facts = alert("slo:ttft:ratio > 1", recordings)
    assert facts.names == {"slo:ttft:ratio", "job:ttft_seconds:slow", TTFT_BUCKET}
    assert facts.quantiles == {"ttft": 0.99}
    assert metric_names_in(facts.expanded) == {TTFT_BUCKET}


def test_expansion_stops_at_cycles_and_at_the_depth_limit() -> None:
    assert metric_names_in(expand("a > 1", {"a": "b + 1", "b": "a * 2"})) == {"a"}
    chain = {f"r{i}": f"r{i + 1} + 1" for i in range(12)}
    assert metric_names_in(expand("r0", chain)) == {"r8"}


def test_a_name_recorded_by_several_rules_follows_every_one() -> None:
    view = RulesView.of(
        {
            "groups": [
                {
                    "name": "g",
                    "rules": [
                        {
                            "type": "recording",
                            "name": "job:lat:q",
                            "query": f"histogram_quantile(0.5, {TTFT_BUCKET})",
                        },
                        {
                            "type": "recording",
                            "name": "job:lat:q",
                            "query": f"histogram_quantile(0.99, {TTFT_BUCKET})",
                        },
                        {"type": "alerting", "name": "Slow", "query": 'job:lat:q{quantile="0.99"} > 1'},
                    ],
                }
            ]
        }
    )
    assert len(view.recordings["job:lat:q"]) == 2
    assert view.alerts[0].quantiles == {"ttft": 0.99}


def test_expanded_text_is_promql_that_reads_the_same() -> None:
    query = (
        'sum by (model) (rate(x_bucket{le=~"1(\\\\.0)?", path="a\\"b"}[5m:1m] offset 5m)) '
        "/ on(model) group_left() count(y) > bool 0 unless z @ start()"
    )
    again = expand(query, {})
    assert str(parse(again)) == str(parse(query))
    assert metric_names_in(again) == {"x_bucket", "y", "z"}


# --- rules that do not parse ------------------------------------------------------------------------


def test_a_rule_that_does_not_parse_is_an_error_with_the_parsers_message() -> None:
    with pytest.raises(PromQLError) as caught:
        alert("sum(rate(vllm:num_requests_running[5m]) > 1")
    assert caught.value.message == "unclosed left parenthesis"
    with pytest.raises(PromQLError, match=r"^bool modifier can only be used on comparison operators$"):
        metric_names_in("up unless bool vector(1)")


def test_nesting_that_would_crash_the_parser_is_refused_before_parsing() -> None:
    with pytest.raises(PromQLError) as caught:
        parse("(" * 9000 + "up" + ")" * 9000)
    assert caught.value.message == "nested 9000 levels deep, more than the 128 the audit parses"
    with pytest.raises(PromQLError, match=r"^9999 operators, more than the 1024 the audit parses$"):
        parse(" + ".join(["up"] * 10000))


def _rules(*rules: tuple[str, str, str]) -> dict[str, Any]:
    return {
        "groups": [
            {
                "name": "latency",
                "file": "/etc/prometheus/rules/slo.yaml",
                "rules": [{"type": kind, "name": name, "query": query} for kind, name, query in rules],
            }
        ]
    }


UNREADABLE_TPOT = (
    "alerting",
    "TPOTP99",
    "histogram_quantile(0.99, sum by (le) (rate(vllm:inter_token_latency_seconds_bucket[5m] smoothed)))"
    " > 0.05",
)


def test_the_rules_view_keeps_a_rule_that_does_not_parse() -> None:
    view = RulesView.of(
        _rules(
            ("alerting", "TTFTP99", f"{TTFT_P99} > 1"),
            UNREADABLE_TPOT,
            ("recording", "job:smooth", "holt_winters(x[5m], 0.5, 0.5)"),
        )
    )
    assert [a.rule.name for a in view.alerts] == ["TTFTP99"]
    assert [(u.rule.name, u.rule.group, u.message) for u in view.unreadable] == [
        ("TPOTP99", "latency", "invalid promql query"),
        ("job:smooth", "latency", "unknown function with name 'holt_winters'"),
    ]
    assert view.unreadable[0].evidence == (
        "the alerting rule TPOTP99 (slo.yaml:latency) does not parse: invalid promql query"
    )
    assert [u.rule.name for u in view.hiding] == ["TPOTP99"]  # no alert reads job:smooth
    assert view.recordings == {"job:smooth": ("holt_winters(x[5m], 0.5, 0.5)",)}


def _audit(rules: Mapping[str, Any]) -> dict[str, tuple[str, str]]:
    names = frozenset({TTFT_BUCKET, "vllm:inter_token_latency_seconds_bucket", "vllm:num_requests_running"})
    fetched = Fetched("http://prom:9090", 0.0, names, rules, {"activeTargets": []}, None)
    report = audit(fetched, load_catalog(), QueryOptions(), AuditSettings())
    return {item.id: (item.status, item.evidence) for item in report.items}


def test_an_unparsable_alert_is_evidence_and_makes_the_rule_items_unknown() -> None:
    items = _audit(_rules(("alerting", "TTFTP99", f"{TTFT_P99} > 1"), UNREADABLE_TPOT))
    p99_status, p99 = items["scheduling.p99_ttft_tpot_alerts"]
    assert p99_status == "unknown"
    assert p99 == (
        "no readable TPOT alert; P99 TTFT: TTFTP99 (slo.yaml:latency); "
        "the alerting rule TPOTP99 (slo.yaml:latency) does not parse: invalid promql query"
    )
    mean_status, mean = items["red_lines.mean_latency_sla"]
    assert mean_status == "unknown"
    assert mean.startswith("1 readable alerting rules, none on a mean latency")
    assert mean.endswith("the alerting rule TPOTP99 (slo.yaml:latency) does not parse: invalid promql query")
    assert (
        "KV use: no readable alert reads it, and TPOTP99 (slo.yaml:latency) could not be parsed"
        in (items["capacity.memory_monitoring"][1])
    )


def test_an_unparsable_recording_no_alert_reads_is_named_but_decides_nothing() -> None:
    rules = _rules(
        ("alerting", "TTFTP99", f"{TTFT_P99} > 1"),
        ("alerting", "TPOTP99", UNREADABLE_TPOT[2].replace(" smoothed", "")),
        ("recording", "job:smooth", "holt_winters(x[5m], 0.5, 0.5)"),
    )
    status, evidence = _audit(rules)["scheduling.p99_ttft_tpot_alerts"]
    assert status == "pass"
    assert evidence.endswith(
        "the recording rule job:smooth (slo.yaml:latency) does not parse: "
        "unknown function with name 'holt_winters'"
    )


def test_a_fail_no_unreadable_rule_could_overturn_stays_a_fail() -> None:
    means = _rules(
        ("alerting", "E2EMean", f"rate({E2E}_sum[5m]) / rate({E2E}_count[5m]) > 5"), UNREADABLE_TPOT
    )
    status, evidence = _audit(means)["red_lines.mean_latency_sla"]
    assert status == "fail"
    assert evidence.startswith("E2EMean (slo.yaml:latency) alerts on a mean latency")


# --- the catalog and real rule files ----------------------------------------------------------------


def test_every_bundled_catalog_query_parses() -> None:
    """`signal_metrics` skips a template the parser refuses; the bundled catalog must have none."""
    refused: list[tuple[str, str]] = []
    for signal, sources in load_catalog().sources.items():
        for source in sources:
            for template in (source.replica, source.fleet):
                if template is None:
                    continue
                try:
                    parse(render(template, QueryOptions(selector='namespace="llm"')))
                except PromQLError as exc:
                    refused.append((signal, exc.message))
    assert refused == []


def _rule_groups(path: Path) -> list[dict[str, Any]]:
    """The rule groups of a rule file or of a PrometheusRule (`spec.groups`)."""
    try:
        document = yaml.safe_load(path.read_text(encoding="utf-8"))
    except yaml.YAMLError:
        pytest.skip(f"{path.name} is a Helm template: its Go-template syntax ({{{{- if ...}}}}) is not YAML")
    if document.get("kind") == "PrometheusRule":
        groups: list[dict[str, Any]] = document["spec"]["groups"]
        return groups
    plain: list[dict[str, Any]] = document["groups"]
    return plain


def _api_shape(path: Path) -> dict[str, Any]:
    """A rule file as `/api/v1/rules` answers it: every rule typed, named and with its query."""
    return {
        "groups": [
            {
                "name": group["name"],
                "file": str(path),
                "rules": [
                    {
                        "type": "alerting" if "alert" in rule else "recording",
                        "name": rule.get("alert") or rule["record"],
                        "query": str(rule["expr"]),
                    }
                    for rule in group["rules"]
                ],
            }
            for group in _rule_groups(path)
        ]
    }


def _real_files() -> list[Path]:
    return sorted(REAL.glob("alerts-*.yaml")) if REAL.is_dir() else []


@pytest.fixture(params=_real_files() or [None], ids=lambda p: p.name if p else "none")
def real_rules(request: pytest.FixtureRequest) -> RulesView:
    path: Path | None = request.param
    if path is None:
        pytest.skip(f"the real rule files are not beside the repository ({REAL})")
    data = _api_shape(path)
    for group in data["groups"]:
        for rule in group["rules"]:
            parse(rule["query"])  # every rule parses
    view = RulesView.of(data)
    assert view.unreadable == ()
    for facts in view.alerts:
        assert metric_names_in(facts.expanded) <= facts.names  # the expansion is PromQL again
    return view


def test_every_real_rule_parses_and_is_analysed(real_rules: RulesView) -> None:
    assert real_rules.alerts


def _real(name: str) -> RulesView:
    path = REAL / name
    if not path.is_file():
        pytest.skip(f"{path} is not beside the repository")
    return RulesView.of(_api_shape(path))


def _latency(view: RulesView) -> dict[str, dict[str, float]]:
    return {a.rule.name: dict(a.quantiles) for a in view.alerts if a.quantiles}


def test_vllm_alerts_are_p99_latency_alerts_and_none_is_a_mean() -> None:
    view = _real("alerts-vllm-k8s-monitoring-prometheusrule.yaml")
    assert len(view.alerts) == 8
    assert _latency(view) == {
        "VllmE2ELatencyP99TooHigh": {"latency": 0.99},
        "VllmTTFTP99TooHigh": {"ttft": 0.99},
        "VllmITLP99TooHigh": {"tpot": 0.99},
    }
    assert all(a.means == () for a in view.alerts)
    slow = next(a for a in view.alerts if a.rule.name == "VllmSlowRequestsPresent")
    assert slow.names == {f"{E2E}_bucket", f"{E2E}_count"}  # a bucket against the count: neither P99 nor mean


def test_llm_d_alerts_tell_p95_from_p99_and_ignore_comments() -> None:
    view = _real("alerts-llm-d-prometheus-alerting-rules.yaml")
    assert len(view.alerts) == 23
    assert _latency(view) == {
        "LLMDExtremeTTFT": {"ttft": 0.99},
        "LLMDHighLatencyP99": {"latency": 0.99},
        "LLMDHighTTFT": {"ttft": 0.99},
        "LLMDLatencySLOViolation": {"latency": 0.99},
        "LLMDTTFTSLO": {"ttft": 0.95},
    }
    assert all(a.means == () for a in view.alerts)  # avg by(pod) of KV use or GPU use is not a latency
    burn = next(a for a in view.alerts if a.rule.name == "LLMDAvailabilitySLOBurn")
    assert burn.names == {"inference_model_request_error_total", "inference_model_request_total"}


def test_kube_prometheus_alerts_are_expanded_through_their_recording_rules() -> None:
    view = _real("alerts-kube-prometheus-kubernetes-control-plane-rules.yaml")
    assert len(view.alerts) == 63
    recorded = "node_quantile:kubelet_pleg_relist_duration_seconds:histogram_quantile"
    assert len(view.recordings[recorded]) == 3  # recorded at 0.99, 0.9 and 0.5
    pleg = next(a for a in view.alerts if a.rule.name == "KubeletPlegDurationHigh")
    assert pleg.quantiles == {"latency": 0.99}
    assert "kubelet_pleg_relist_duration_seconds_bucket" in pleg.names
    overcommit = next(a for a in view.alerts if a.rule.name == "KubeCPUOvercommit")
    assert not overcommit.names & {"node", "HA", "Skip", "allocatable"}  # words of its comments


def test_gateway_inference_extension_alert_is_a_p99_latency_alert() -> None:
    view = _real("alerts-gie-epp-v1.5.0.yaml")
    assert _latency(view) == {"HighInferenceRequestLatencyP99": {"latency": 0.99}}
