"""`triage audit`: the deployment checklist held against a fleet.

Two real Prometheus servers, backfilled with raw exporter series and loaded with rule
files, play a HEALTHY fleet (the rules `triage rules` generates, gpu_memory_utilization
0.9, DCGM and kube-state-metrics present) and a MISCONFIGURED one (0.97, a mean-latency
alert hidden behind a recording rule, no TPOT alert, prefix caching on with a hit ratio
near zero, no DCGM): the key items pass on the first, exactly the broken ones fail on
the second, each with its evidence. Unit tests drive every check with synthetic inputs,
and the fetch path with a stand-in that fails.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import replace
from typing import Any

import numpy as np
import pytest
from conftest import frame_of
from promserver import PromStandIn, Reply, require_prometheus_binaries

from signals.catalog import QueryOptions, Scope, load_catalog
from signals.frame import SignalFrame
from signals.prometheus import PrometheusSource
from signals.tempprom import TemporaryPrometheus, to_openmetrics
from tools.rawsynth import (
    VLLM_ITL_BUCKETS,
    VLLM_REQUEST_LATENCY_BUCKETS,
    VLLM_TTFT_BUCKETS,
    build_1_2_5_buckets,
)
from triage.audit.checklist import ITEMS, SECTIONS
from triage.audit.checks import CHECKS
from triage.audit.engine import audit
from triage.audit.fetch import run_audit
from triage.audit.histograms import bucket_quantile, max_bound, share_above
from triage.audit.model import AuditReport, AuditSettings, Fetched, Sample
from triage.audit.promql import expand, metric_names_in
from triage.audit.queries import instant_queries
from triage.audit.render import render_audit
from triage.audit.rules import Rule, RulesView, analyse_alert, latency_kind
from triage.rules import load_slo
from triage.rules.render import render_rules

START = 1_791_000_000.0
STEP = 15.0
N = 481  # two hours
AT = START + STEP * (N - 1)
SELECTOR = 'namespace="llm"'
OPTIONS = QueryOptions(selector=SELECTOR)
SETTINGS = AuditSettings(lookback=2 * 3600.0, step=60.0)
PODS = [(f"vllm-{i}", f"10.42.0.{i + 1}:8000", f"gpu-node-{i // 2:02d}", str(i % 2)) for i in range(4)]
TOKEN_BUCKETS = build_1_2_5_buckets(32768)

Series = tuple[str, dict[str, str], np.ndarray, float, float]


# --- the fleets -------------------------------------------------------------------------------------


def _histogram(
    name: str, labels: dict[str, str], median: float, sigma: float, rate: float, edges: Sequence[float]
) -> list[Series]:
    """Cumulative buckets, _count and _sum of a lognormal with `median`, `rate` observations a second."""
    per_step = rate * STEP
    steps = np.arange(1, N + 1, dtype=float)
    out: list[Series] = []
    for le in edges:
        share = 0.5 * (1 + math.erf((math.log(le) - math.log(median)) / (sigma * math.sqrt(2))))
        counts = np.round(steps * per_step * share)
        out.append((f"{name}_bucket", {**labels, "le": repr(float(le))}, counts, START, STEP))
    out.append((f"{name}_bucket", {**labels, "le": "+Inf"}, steps * per_step, START, STEP))
    out.append((f"{name}_count", labels, steps * per_step, START, STEP))
    mean = median * math.exp(sigma**2 / 2)
    out.append((f"{name}_sum", labels, steps * per_step * mean, START, STEP))
    return out


def fleet(*, gpu_memory_utilization: str, prefix_caching: str, hit_ratio: float, dcgm: bool) -> str:
    """Four vLLM V1 replicas on two GPU nodes at 4 req/s each, KV about half used, inside the SLOs."""
    rng = np.random.default_rng(11)
    series: list[Series] = []
    ones = np.ones(N)
    steps = np.arange(1, N + 1, dtype=float)
    for pod, instance, node, gpu in PODS:
        labels = {
            "instance": instance,
            "pod": pod,
            "namespace": "llm",
            "job": "vllm",
            "model_name": "meta-llama/Llama-3.1-8B-Instruct",
            "engine": "0",
        }
        config = {
            **labels,
            "block_size": "16",
            "cache_dtype": "auto",
            "enable_prefix_caching": prefix_caching,
            "gpu_memory_utilization": gpu_memory_utilization,
            "num_gpu_blocks": "30000",
        }
        series.append(("vllm:cache_config_info", config, ones, START, STEP))
        series.append(("vllm:num_requests_running", labels, 20 + rng.normal(0, 1.5, N), START, STEP))
        series.append(("vllm:num_requests_waiting", labels, np.zeros(N), START, STEP))
        series.append(("vllm:kv_cache_usage_perc", labels, 0.45 + rng.normal(0, 0.02, N), START, STEP))
        series.append(("vllm:num_preemptions_total", labels, np.zeros(N), START, STEP))
        for reason, share in (("stop", 0.97), ("length", 0.03), ("abort", 0.0), ("error", 0.0)):
            done = steps * 4.0 * share * STEP
            series.append(
                ("vllm:request_success_total", {**labels, "finished_reason": reason}, done, START, STEP)
            )
        queried = steps * 4.0 * 900 * STEP
        series.append(("vllm:prefix_cache_queries_total", labels, queried, START, STEP))
        series.append(("vllm:prefix_cache_hits_total", labels, np.floor(queried * hit_ratio), START, STEP))
        series += _histogram("vllm:time_to_first_token_seconds", labels, 0.2, 0.6, 4.0, VLLM_TTFT_BUCKETS)
        series += _histogram("vllm:inter_token_latency_seconds", labels, 0.012, 0.4, 800.0, VLLM_ITL_BUCKETS)
        series += _histogram("vllm:request_prompt_tokens", labels, 900, 0.6, 4.0, TOKEN_BUCKETS)
        series += _histogram("vllm:request_generation_tokens", labels, 200, 0.5, 4.0, TOKEN_BUCKETS)
        for phase, median in (("queue", 0.05), ("prefill", 0.1), ("decode", 4.0)):
            series += _histogram(
                f"vllm:request_{phase}_time_seconds", labels, median, 0.5, 4.0, VLLM_REQUEST_LATENCY_BUCKETS
            )
        kube = {"namespace": "llm", "pod": pod, "container": "vllm", "instance": instance}
        series.append(("kube_pod_container_status_restarts_total", kube, np.zeros(N), START, STEP))
        requests = {**kube, "node": node, "resource": "nvidia_com_gpu", "unit": "integer"}
        series.append(("kube_pod_container_resource_requests", requests, ones, START, STEP))
        if dcgm:
            gpu_labels = {
                "gpu": gpu,
                "UUID": f"GPU-{pod}",
                "Hostname": node,
                "DCGM_FI_DRIVER_VERSION": "550.127.05",
                "modelName": "NVIDIA H100 80GB HBM3",
                "namespace": "llm",
                "pod": pod,
                "instance": instance,
            }
            for name, value in (
                ("DCGM_FI_DEV_GPU_UTIL", 70.0),
                ("DCGM_FI_DEV_GPU_TEMP", 60.0),
                ("DCGM_FI_DEV_FB_USED", 73000.0),
                ("DCGM_FI_DEV_FB_FREE", 8000.0),
                ("DCGM_FI_DEV_XID_ERRORS", 0.0),
                ("DCGM_FI_DEV_ECC_DBE_VOL_TOTAL", 0.0),
            ):
                series.append((name, gpu_labels, np.full(N, value), START, STEP))
    deployment = {"namespace": "llm", "deployment": "llama"}
    series.append(("kube_deployment_spec_replicas", deployment, np.full(N, 4.0), START, STEP))
    series.append(("kube_deployment_status_replicas_ready", deployment, np.full(N, 4.0), START, STEP))
    for node in ("gpu-node-00", "gpu-node-01"):
        capacity = {"node": node, "resource": "nvidia_com_gpu", "unit": "integer"}
        series.append(("kube_node_status_capacity", capacity, np.full(N, 2.0), START, STEP))
    return to_openmetrics(series)


MISCONFIGURED_RULES = """
groups:
  - name: latency
    rules:
      - record: job:ttft_mean_seconds
        expr: >-
          sum(rate(vllm:time_to_first_token_seconds_sum[5m]))
          / sum(rate(vllm:time_to_first_token_seconds_count[5m]))
      - alert: TTFTHigh
        expr: job:ttft_mean_seconds > 1
        for: 5m
  - name: resources
    rules:
      - alert: KVCacheFull
        expr: max(vllm:kv_cache_usage_perc) > 0.95 and sum(rate(vllm:num_preemptions_total[5m])) > 0
      - alert: PrefixHitLow
        expr: >-
          sum(rate(vllm:prefix_cache_hits_total[5m]))
          / sum(rate(vllm:prefix_cache_queries_total[5m])) < 0.02
      - alert: QueueLong
        expr: sum(vllm:num_requests_waiting) > 50
      - alert: GPUXid
        expr: max by (Hostname, gpu) (DCGM_FI_DEV_XID_ERRORS) > 0
      - alert: GPUEcc
        expr: increase(DCGM_FI_DEV_ECC_DBE_VOL_TOTAL[10m]) > 0
"""

KEY_ITEMS_PASS = {
    "capacity.gpu_memory_headroom",
    "capacity.memory_monitoring",
    "scheduling.continuous_batching",
    "scheduling.p99_ttft_tpot_alerts",
    "cache.prefix_monitoring",
    "deployment.scaling_min_replicas",
    "nodes.dcgm_alerts",
    "observability.phase_timing",
    "red_lines.gpu_memory_utilization",
    "red_lines.mean_latency_sla",
    "red_lines.prefix_cache_unstable",
}
MISCONFIGURED_FAILS = {
    "capacity.gpu_memory_headroom",
    "red_lines.gpu_memory_utilization",
    "red_lines.mean_latency_sla",
    "scheduling.p99_ttft_tpot_alerts",
    "red_lines.prefix_cache_unstable",
    "nodes.dcgm_alerts",
}


@pytest.fixture(scope="module")
def healthy(tmp_path_factory: pytest.TempPathFactory) -> Iterator[AuditReport]:
    require_prometheus_binaries()
    rules = tmp_path_factory.mktemp("healthy") / "rules.yaml"
    rules.write_text(render_rules(load_catalog(), load_slo(), OPTIONS), encoding="utf-8")
    series = fleet(gpu_memory_utilization="0.9", prefix_caching="True", hit_ratio=0.6, dcgm=True)
    with (
        TemporaryPrometheus(series, rule_files=[rules]) as prom,
        PrometheusSource(prom.url, timeout=20) as src,
    ):
        yield run_audit(src, load_catalog(), OPTIONS, AT, SETTINGS)


@pytest.fixture(scope="module")
def misconfigured(tmp_path_factory: pytest.TempPathFactory) -> Iterator[AuditReport]:
    require_prometheus_binaries()
    rules = tmp_path_factory.mktemp("misconfigured") / "rules.yaml"
    rules.write_text(MISCONFIGURED_RULES, encoding="utf-8")
    series = fleet(gpu_memory_utilization="0.97", prefix_caching="True", hit_ratio=0.004, dcgm=False)
    with (
        TemporaryPrometheus(series, rule_files=[rules]) as prom,
        PrometheusSource(prom.url, timeout=20) as src,
    ):
        yield run_audit(src, load_catalog(), OPTIONS, AT, SETTINGS)


def _status(report: AuditReport) -> dict[str, str]:
    return {item.id: item.status for item in report.items}


def test_healthy_fleet_passes_the_key_items(healthy: AuditReport) -> None:
    status = _status(healthy)
    assert healthy.problems == {}
    assert {i for i in KEY_ITEMS_PASS if status[i] != "pass"} == set(), [
        (i.id, i.evidence) for i in healthy.items if i.id in KEY_ITEMS_PASS and i.status != "pass"
    ]
    assert [i.id for i in healthy.items if i.status == "fail"] == []
    assert status["scheduling.chunked_prefill"] == "not_applicable"  # long prompts are rare here
    assert status["scheduling.max_num_seqs_kv"] == "unknown"  # vLLM does not export it
    seqs = healthy.by_id("scheduling.max_num_seqs_kv").evidence
    assert "KV capacity 480k tokens" in seqs and "--max-num-seqs" in seqs
    assert "0.9 on 4 replicas" in healthy.by_id("red_lines.gpu_memory_utilization").evidence
    alerts = healthy.by_id("scheduling.p99_ttft_tpot_alerts").evidence
    assert "TTFTP99High" in alerts and "TPOTP99High" in alerts
    assert "DCGM on all 2 GPU nodes" in healthy.by_id("nodes.dcgm_alerts").evidence
    redundancy = healthy.by_id("deployment.scaling_min_replicas").evidence
    assert "the peak needs 3 + 1 = 4; 4 ready" in redundancy, redundancy
    assert "hit ratio of 0.60" in healthy.by_id("red_lines.prefix_cache_unstable").evidence


def test_misconfigured_fleet_fails_exactly_the_broken_items(misconfigured: AuditReport) -> None:
    failed = {i.id: i.evidence for i in misconfigured.items if i.status == "fail"}
    assert set(failed) == MISCONFIGURED_FAILS, failed
    assert "above 0.95 on 4 of 4 replicas" in failed["red_lines.gpu_memory_utilization"]
    assert "0.97" in failed["capacity.gpu_memory_headroom"]
    mean = failed["red_lines.mean_latency_sla"]
    assert (
        "TTFTHigh" in mean
        and "vllm:time_to_first_token_seconds_sum / vllm:time_to_first_token_seconds_count" in mean
    )
    p99 = failed["scheduling.p99_ttft_tpot_alerts"]
    assert "no P99 TTFT alert (TTFTHigh reads its mean)" in p99 and "no TPOT alert at all" in p99
    assert "hit ratio of 0.004" in failed["red_lines.prefix_cache_unstable"]
    dcgm = failed["nodes.dcgm_alerts"]
    assert "2 of 2 GPU nodes" in dcgm and "gpu-node-00, gpu-node-01" in dcgm
    assert "GPUXid" in dcgm  # an XID alert on a metric that does not exist can never fire
    assert misconfigured.by_id("cache.prefix_monitoring").status == "pass"
    assert misconfigured.by_id("capacity.memory_monitoring").status == "pass"


def test_every_item_is_reported_in_checklist_order(healthy: AuditReport, misconfigured: AuditReport) -> None:
    for report in (healthy, misconfigured):
        assert [i.id for i in report.items] == [i.id for i in ITEMS]
        assert all(i.evidence for i in report.items)
        assert sum(report.counts().values()) == len(ITEMS)


def test_renderings(misconfigured: AuditReport) -> None:
    data = json.loads(render_audit(misconfigured, "json"))
    assert isinstance(data, list) and len(data) == len(ITEMS)
    assert all(set(row) == {"id", "section", "title", "status", "evidence", "how_to_fix"} for row in data)
    text = render_audit(misconfigured, "text")
    assert text.startswith("AUDIT  http://127.0.0.1:") and "6 fail" in text
    assert "FAIL     red_lines.gpu_memory_utilization" in text and "fix: Lower gpu_memory_utilization" in text
    markdown = render_audit(misconfigured, "markdown")
    assert "### Red lines (红线)" in markdown and "### Failing" in markdown
    assert "| ❌ fail | Never set gpu_memory_utilization above 0.95" in markdown
    with pytest.raises(ValueError, match="unknown format"):
        render_audit(misconfigured, "html")


# --- the fetch path when Prometheus answers badly -----------------------------------------------------


def test_unreachable_prometheus_makes_every_item_unknown_with_the_reason() -> None:
    with PromStandIn(Reply.success()) as stand_in:
        url = stand_in.url
    with PrometheusSource(url, timeout=1, max_retries=0) as source:
        report = run_audit(source, load_catalog(), OPTIONS, AT, SETTINGS)
    assert report.nothing_readable
    assert {i.status for i in report.items} == {"unknown"}
    assert "connection refused" in report.by_id("red_lines.gpu_memory_utilization").evidence
    assert "connection refused" in report.by_id("scheduling.p99_ttft_tpot_alerts").evidence


def test_a_failing_rules_api_leaves_the_rule_items_unknown(monkeypatch: pytest.MonkeyPatch) -> None:
    names = ["vllm:cache_config_info", "vllm:num_requests_running"]
    config = {
        "metric": {"__name__": "vllm:cache_config_info", "instance": "a", "gpu_memory_utilization": "0.97"},
        "value": [AT, "1"],
    }
    with PromStandIn(by_query={}) as stand_in:
        stand_in.play(Reply.names(names))
        script = {
            "names": Reply.names(names),
            "rules": Reply.error("internal", "ruler broken", 500),
            "targets": Reply(body=json.dumps({"status": "success", "data": {"activeTargets": []}}).encode()),
            "config": Reply.success([config], "vector"),
            "empty": Reply.success([], "matrix"),
        }
        monkeypatch.setattr(stand_in, "_next", _router(stand_in, script))
        with PrometheusSource(stand_in.url, timeout=5, max_retries=0) as source:
            report = run_audit(source, load_catalog(), OPTIONS, AT, SETTINGS)
    assert "HTTP 500" in report.problems["rules"]
    assert report.by_id("red_lines.mean_latency_sla").status == "unknown"
    assert "rules API could not be read" in report.by_id("red_lines.mean_latency_sla").evidence
    gpu = report.by_id("red_lines.gpu_memory_utilization")
    assert gpu.status == "fail"  # what could be read still counts


def _router(stand_in: PromStandIn, script: Mapping[str, Reply]) -> Any:
    """The stand-in answering by path: its scripts key on the `query` parameter, which these paths lack."""

    def answer(seen: Any) -> Reply:
        stand_in.seen.append(seen)
        if seen.path.endswith("/label/__name__/values"):
            return script["names"]
        if seen.path.endswith("/rules"):
            return script["rules"]
        if seen.path.endswith("/targets"):
            return script["targets"]
        query = (seen.params.get("query") or [""])[0]
        if query.startswith("vllm:cache_config_info"):
            return script["config"]
        return script["empty"]

    return answer


# --- PromQL scanning ------------------------------------------------------------------------------


def test_metric_names_in_skips_functions_labels_keywords_and_numbers() -> None:
    expr = (
        "histogram_quantile(0.99, sum by (le, instance) ("
        'rate(vllm:time_to_first_token_seconds_bucket{job="x", le!="1e3"}[5m] offset 1h))) > 1e3 '
        'and on(instance) label_replace(up, "a", "$1", "b", "(.*)") '
        'or {__name__="DCGM_FI_DEV_XID_ERRORS"} unless vector(1) > bool 0'
    )
    assert metric_names_in(expr) == {
        "vllm:time_to_first_token_seconds_bucket",
        "up",
        "DCGM_FI_DEV_XID_ERRORS",
    }


def test_expand_follows_recording_rules_and_stops_on_cycles() -> None:
    recordings = {"a:b": "rate(x_sum[5m]) / rate(x_count[5m])", "c:d": "a:b{job='j'} * 2", "loop": "loop + 1"}
    assert metric_names_in(expand("c:d > 1", recordings)) == {"x_sum", "x_count"}
    assert "loop" in expand("loop", recordings)


@pytest.mark.parametrize(
    ("name", "kind"),
    [
        ("vllm:time_to_first_token_seconds_bucket", "ttft"),
        ("triage:ttft_p99_seconds", "ttft"),
        ("vllm:inter_token_latency_seconds_sum", "tpot"),
        ("vllm:time_per_output_token_seconds_bucket", "tpot"),
        ("vllm:avg_itl", "tpot"),
        ("vllm:e2e_request_latency_seconds_count", "latency"),
        ("litellm_request_total_latency_metric_bucket", "latency"),
        ("vllm:request_prompt_tokens_bucket", None),
        ("vllm:num_requests_waiting", None),
    ],
)
def test_latency_kind(name: str, kind: str | None) -> None:
    assert latency_kind(name) == kind


TTFT_P99 = "histogram_quantile(0.99, sum by (le) (rate(vllm:time_to_first_token_seconds_bucket[5m]))) > 1"
E2E_MEAN = (
    "rate(vllm:e2e_request_latency_seconds_sum[5m]) / rate(vllm:e2e_request_latency_seconds_count[5m]) > 5"
)


def _alert(query: str, recordings: Mapping[str, str] | None = None) -> Any:
    return analyse_alert(Rule("alerting", "A", query, "g", "/etc/rules.yaml"), recordings or {})


def test_quantile_alerts_are_told_from_mean_alerts() -> None:
    p99 = _alert(
        "histogram_quantile(0.99, sum by(le) (rate(vllm:time_to_first_token_seconds_bucket[5m]))) > 1"
    )
    assert p99.quantiles == {"ttft": 0.99} and p99.means == ()
    p95 = _alert(
        "histogram_quantile(0.95, sum by (le) (rate(vllm:inter_token_latency_seconds_bucket[5m]))) > 0.1"
    )
    assert p95.quantiles == {"tpot": 0.95}
    mean = _alert(E2E_MEAN)
    assert mean.means == (
        ("latency", "vllm:e2e_request_latency_seconds_sum / vllm:e2e_request_latency_seconds_count"),
    )
    avg = _alert("avg by (model) (litellm_request_total_latency_metric) > 3")
    assert avg.means == (("latency", "avg(litellm_request_total_latency_metric)"),)
    gauge = _alert("vllm:avg_latency > 2")
    assert [kind for kind, _ in gauge.means] == ["latency"]
    averaged_p99 = _alert(f"avg({TTFT_P99.removesuffix(' > 1')}) > 1")
    assert averaged_p99.means == () and averaged_p99.quantiles == {"ttft": 0.99}
    recorded = _alert("triage:tpot_p99_seconds > 0.05")
    assert recorded.quantiles == {"tpot": 0.99}
    hidden = _alert(
        "slo:ttft:mean > 1", {"slo:ttft:mean": "sum(rate(x:ttft_sum[1m])) / sum(rate(x:ttft_count[1m]))"}
    )
    assert {kind for kind, _ in hidden.means} == {"ttft"}  # the _sum/_count it records, and its name


def test_rules_view_reads_the_api_shape() -> None:
    view = RulesView.of(
        {
            "groups": [
                {
                    "name": "g",
                    "file": "/etc/prometheus/r.yaml",
                    "rules": [
                        {
                            "type": "recording",
                            "name": "r:x",
                            "query": "sum(rate(vllm:num_preemptions_total[5m]))",
                        },
                        {"type": "alerting", "name": "P", "query": "r:x > 0", "health": "err"},
                        {"type": "weird", "name": "W", "query": "1"},
                        "not a rule",
                    ],
                },
                "not a group",
            ]
        }
    )
    assert [a.rule.name for a in view.alerts] == ["P"]
    assert "vllm:num_preemptions_total" in view.alerts[0].names
    assert view.broken == ("P (r.yaml:g)",)


# --- histograms ------------------------------------------------------------------------------------


def test_bucket_helpers_follow_histogram_quantile() -> None:
    buckets = [(1.0, 10.0), (2.0, 30.0), (5.0, 40.0), (math.inf, 40.0)]
    assert bucket_quantile(0.5, buckets) == pytest.approx(1.5)
    assert bucket_quantile(0.1, buckets) == pytest.approx(0.4)
    assert share_above(2.0, buckets) == pytest.approx(0.25)
    assert share_above(3.5, buckets) == pytest.approx(0.125)
    assert max_bound(buckets) == (5.0, True)
    assert max_bound([(1.0, 1.0), (math.inf, 3.0)]) == (1.0, False)
    assert bucket_quantile(0.99, [(1.0, 1.0), (math.inf, 3.0)]) == 1.0
    assert bucket_quantile(0.5, []) is None and share_above(1, [(1.0, 0.0), (math.inf, 0.0)]) is None


# --- every check on synthetic inputs ---------------------------------------------------------------

CATALOG = load_catalog()
NAMES_VLLM = frozenset(
    {
        "vllm:cache_config_info",
        "vllm:num_requests_running",
        "vllm:kv_cache_usage_perc",
        "vllm:num_preemptions_total",
        "vllm:prefix_cache_queries_total",
        "vllm:prefix_cache_hits_total",
        "vllm:request_queue_time_seconds_bucket",
        "vllm:request_prefill_time_seconds_bucket",
        "vllm:request_decode_time_seconds_bucket",
        "kube_pod_container_status_restarts_total",
        "kube_deployment_status_replicas_ready",
    }
)


def _config(**labels: str) -> Sample:
    return Sample({"__name__": "vllm:cache_config_info", "instance": "a", **labels}, 1.0)


def _rules(*alerts: str, recordings: Mapping[str, str] | None = None) -> dict[str, Any]:
    rules: list[dict[str, Any]] = [
        {"type": "recording", "name": name, "query": query} for name, query in (recordings or {}).items()
    ]
    rules += [{"type": "alerting", "name": f"A{i}", "query": q} for i, q in enumerate(alerts)]
    return {"groups": [{"name": "g", "file": "r.yaml", "rules": rules}]}


def _prompt_buckets(edges: Sequence[tuple[float, float]]) -> list[Sample]:
    return [Sample({"le": "+Inf" if math.isinf(le) else str(le)}, count) for le, count in edges]


def run(
    *,
    names: frozenset[str] | None = NAMES_VLLM,
    rules: Mapping[str, Any] | None = None,
    targets: Mapping[str, Any] | None = None,
    frame: SignalFrame | None = None,
    instant: Mapping[str, Sequence[Sample]] | None = None,
    problems: Mapping[str, str] | None = None,
    settings: AuditSettings = SETTINGS,
) -> AuditReport:
    fetched = Fetched(
        "http://prom:9090",
        AT,
        names,
        rules if rules is not None else _rules(),
        targets if targets is not None else {"activeTargets": []},
        frame,
        instant or {},
        problems or {},
        settings.lookback,
    )
    return audit(fetched, CATALOG, QueryOptions(), settings)


def test_the_item_list_is_the_checklist() -> None:
    per_section = [sum(1 for i in ITEMS if i.section == s.id) for s in SECTIONS]
    assert per_section == [7, 7, 7, 6, 8, 8, 5, 5, 5]
    assert len({i.id for i in ITEMS}) == len(ITEMS) == 58
    assert all(i.id.startswith(f"{i.section}.") and i.original and i.settle and i.fix for i in ITEMS)
    assert set(CHECKS) <= {i.id for i in ITEMS}


def test_items_without_a_check_are_unknown_and_say_what_settles_them() -> None:
    report = run()
    probe = report.by_id("deployment.startup_probe")
    assert probe.status == "unknown" and "settles it: the pod spec's startupProbe" in probe.evidence


@pytest.mark.parametrize(
    ("value", "status"), [("0.9", "pass"), ("0.95", "pass"), ("0.97", "fail"), (None, "unknown")]
)
def test_gpu_memory_utilization_red_line(value: str | None, status: str) -> None:
    instant = {"cache_config": [_config(gpu_memory_utilization=value)]} if value else {}
    report = run(instant=instant)
    assert report.by_id("red_lines.gpu_memory_utilization").status == status
    assert report.by_id("capacity.gpu_memory_headroom").status == status


def test_gpu_memory_utilization_from_a_signal_level_config_info() -> None:
    frame = frame_of({'config_info{instance="a",gpu_memory_utilization="0.98"}': 1.0}, 10)
    assert run(frame=frame).by_id("red_lines.gpu_memory_utilization").status == "fail"


def _kv_frame(running: float = 20.0, preemptions: float = 0.0) -> SignalFrame:
    return frame_of(
        {'requests_running{instance="a"}': running, 'preemption_rate{instance="a"}': preemptions}, 10
    )


LENGTHS = {
    "prompt_buckets": _prompt_buckets([(1000.0, 50.0), (2000.0, 100.0), (math.inf, 100.0)]),
    "output_buckets": _prompt_buckets([(500.0, 100.0), (math.inf, 100.0)]),
}


@pytest.mark.parametrize(
    ("seqs", "running", "preemptions", "status"),
    [
        ("128", 20.0, 0.0, "pass"),  # 128 x (1900 + 475) = 304k <= 480k
        ("512", 20.0, 0.0, "fail"),  # 512 x 2375 = 1.2M > 480k
        (None, 20.0, 0.0, "unknown"),
        (None, 300.0, 1.0, "fail"),  # a batch of 300 at ~2.4k tokens cannot fit, and it preempts
        (None, 300.0, 0.0, "unknown"),
    ],
)
def test_max_num_seqs_against_kv_capacity(
    seqs: str | None, running: float, preemptions: float, status: str
) -> None:
    labels = {"num_gpu_blocks": "30000", "block_size": "16"}
    if seqs:
        labels["max_num_seqs"] = seqs
    report = run(
        instant={"cache_config": [_config(**labels)], **LENGTHS}, frame=_kv_frame(running, preemptions)
    )
    item = report.by_id("scheduling.max_num_seqs_kv")
    assert item.status == status, item.evidence
    assert "480k" in item.evidence
    if status == "unknown" and seqs is None:
        assert "--max-num-seqs" in item.evidence and "at most 202" in item.evidence
    knob = report.by_id("red_lines.max_num_seqs_knob").status
    assert knob == ("unknown" if seqs is None else status)


def test_max_num_seqs_unknown_without_kv_capacity_or_lengths() -> None:
    assert "KV capacity unknown" in run().by_id("scheduling.max_num_seqs_kv").evidence
    no_lengths = run(instant={"cache_config": [_config(num_gpu_blocks="100", block_size="16")]})
    assert "request lengths unknown" in no_lengths.by_id("scheduling.max_num_seqs_kv").evidence


def test_kv_capacity_from_sglang() -> None:
    names = frozenset({"sglang:max_total_num_tokens", "sglang:num_running_reqs"})
    instant = {"sglang_max_tokens": [Sample({"instance": "a"}, 200_000.0)], **LENGTHS}
    item = run(names=names, instant=instant).by_id("capacity.concurrency_estimate")
    assert item.status == "unknown" and "about 84 concurrent requests" in item.evidence


LONG = _prompt_buckets([(1000.0, 50.0), (10000.0, 80.0), (20000.0, 100.0), (math.inf, 100.0)])
SHORT = _prompt_buckets([(1000.0, 90.0), (5000.0, 100.0), (math.inf, 100.0)])


@pytest.mark.parametrize(
    ("buckets", "chunked", "status"),
    [
        (LONG, "true", "pass"),
        (LONG, "false", "fail"),
        (LONG, None, "unknown"),
        (SHORT, "false", "not_applicable"),
        (None, "true", "unknown"),
    ],
)
def test_chunked_prefill_where_long_prompts_are_common(
    buckets: list[Sample] | None, chunked: str | None, status: str
) -> None:
    selectors: dict[str, object] = {'requests_running{instance="a"}': 1.0}
    if chunked:
        selectors[f'config_info{{instance="a",enable_chunked_prefill="{chunked}"}}'] = 1.0
    instant = {"prompt_buckets": buckets} if buckets else {}
    item = run(instant=instant, frame=frame_of(selectors, 10)).by_id("scheduling.chunked_prefill")
    assert item.status == status, item.evidence


@pytest.mark.parametrize(
    ("limit", "buckets", "status", "text"),
    [
        ("32768", SHORT, "pass", "max_model_len 32,768 caps a request; the longest prompt"),
        ("4096", _prompt_buckets([(1000.0, 90.0), (5000.0, 95.0), (math.inf, 100.0)]), "fail", "beyond"),
        (None, SHORT, "unknown", "at most 5,000 tokens"),
    ],
)
def test_request_length_limit(limit: str | None, buckets: list[Sample], status: str, text: str) -> None:
    frame = frame_of({f'config_info{{instance="a",max_model_len="{limit}"}}': 1.0}, 10) if limit else None
    item = run(instant={"prompt_buckets": buckets}, frame=frame).by_id("scheduling.request_length_limit")
    assert item.status == status and text in item.evidence, item.evidence


def test_request_length_limit_from_sglang_context_len() -> None:
    instant = {"sglang_context_len": [Sample({"instance": "a"}, 8192.0)], "prompt_buckets": SHORT}
    assert run(instant=instant).by_id("scheduling.request_length_limit").status == "pass"


TPOT_P99 = "histogram_quantile(0.99, sum by (le) (rate(vllm:inter_token_latency_seconds_bucket[5m]))) > 0.05"
NAMES_LATENCY = NAMES_VLLM | {
    "vllm:time_to_first_token_seconds_bucket",
    "vllm:inter_token_latency_seconds_bucket",
}


@pytest.mark.parametrize(
    ("alerts", "status", "text"),
    [
        ((TTFT_P99, TPOT_P99), "pass", "P99 TTFT: A0 (r.yaml:g)"),
        ((TTFT_P99,), "fail", "no TPOT alert at all"),
        ((f"({TTFT_P99}) or ({TPOT_P99})",), "fail", "share one alert"),
        ((TTFT_P99, TPOT_P99.replace("0.99", "0.9")), "fail", "no P99 TPOT alert (A1 reads P90)"),
        (
            (TTFT_P99, TPOT_P99.replace("inter_token", "time_per_output_token")),
            "fail",
            "the P99 TPOT alert A1 (r.yaml:g) reads series this server lacks",  # a renamed metric
        ),
        ((), "fail", "no alerting rules are loaded here"),
    ],
)
def test_separate_p99_ttft_and_tpot_alerts(alerts: tuple[str, ...], status: str, text: str) -> None:
    item = run(names=NAMES_LATENCY, rules=_rules(*alerts)).by_id("scheduling.p99_ttft_tpot_alerts")
    assert item.status == status and text in item.evidence, item.evidence


def test_p99_alerts_through_triage_recording_rules() -> None:
    recordings = {
        "triage:ttft_p99_seconds": TTFT_P99.removesuffix(" > 1"),
        "triage:tpot_p99_seconds": TPOT_P99.removesuffix(" > 0.05"),
    }
    rules = _rules("triage:ttft_p99_seconds > 1", "triage:tpot_p99_seconds > 0.05", recordings=recordings)
    assert run(names=NAMES_LATENCY, rules=rules).by_id("scheduling.p99_ttft_tpot_alerts").status == "pass"
    unresolved = _rules("triage:ttft_p99_seconds > 1", "triage:tpot_p99_seconds > 0.05")
    names = NAMES_LATENCY | {"triage:ttft_p99_seconds", "triage:tpot_p99_seconds"}
    assert run(names=names, rules=unresolved).by_id("scheduling.p99_ttft_tpot_alerts").status == "pass"
    dead = run(names=NAMES_LATENCY, rules=unresolved).by_id("scheduling.p99_ttft_tpot_alerts")
    assert (
        dead.status == "fail"
        and "the P99 TTFT alert A0 (r.yaml:g) reads series this server lacks" in dead.evidence
    )


def test_mean_latency_red_line() -> None:
    failed = run(rules=_rules(TTFT_P99, E2E_MEAN)).by_id("red_lines.mean_latency_sla")
    assert failed.status == "fail" and "A1 (r.yaml:g) alerts on a mean latency" in failed.evidence
    assert run(rules=_rules(TTFT_P99)).by_id("red_lines.mean_latency_sla").status == "pass"
    assert run(rules=_rules()).by_id("red_lines.mean_latency_sla").status == "unknown"


def test_rule_items_are_unknown_when_the_rules_cannot_be_read() -> None:
    fetched = Fetched(
        "http://p", AT, NAMES_VLLM, None, None, None, {}, {"rules": "HTTP 404 from /api/v1/rules"}
    )
    report = audit(fetched, CATALOG, QueryOptions(), SETTINGS)
    for item_id in ("red_lines.mean_latency_sla", "scheduling.p99_ttft_tpot_alerts"):
        item = report.by_id(item_id)
        assert item.status == "unknown" and "HTTP 404" in item.evidence


def test_memory_monitoring_needs_metrics_kube_state_metrics_and_alerts() -> None:
    kv_alert = "max(vllm:kv_cache_usage_perc) > 0.95 and sum(rate(vllm:num_preemptions_total[5m])) > 0"
    assert run(rules=_rules(kv_alert)).by_id("capacity.memory_monitoring").status == "pass"
    no_alert = run().by_id("capacity.memory_monitoring")
    assert no_alert.status == "fail" and "no alerting rule reads KV use" in no_alert.evidence
    no_kube_names = NAMES_VLLM - {
        "kube_pod_container_status_restarts_total",
        "kube_deployment_status_replicas_ready",
    }
    no_kube = run(names=no_kube_names, rules=_rules(kv_alert)).by_id("capacity.memory_monitoring")
    assert no_kube.status == "fail" and "kube-state-metrics is not scraped" in no_kube.evidence
    ksm = {"labels": {"job": "kube-state-metrics", "instance": "ksm:8080"}, "health": "down"}
    down = {"activeTargets": [{**ksm, "lastError": "connection refused"}]}
    item = run(rules=_rules(kv_alert), targets=down).by_id("capacity.memory_monitoring")
    assert item.status == "fail" and "ksm:8080 (connection refused)" in item.evidence


def test_an_alert_on_a_metric_the_server_lacks_covers_nothing() -> None:
    xid = _rules("max(DCGM_FI_DEV_XID_ERRORS) > 0", "increase(DCGM_FI_DEV_ECC_DBE_VOL_TOTAL[5m]) > 0")
    names = NAMES_VLLM | {"DCGM_FI_DEV_GPU_UTIL", "DCGM_FI_DEV_XID_ERRORS"}
    gpus = {
        "dcgm_gpus": [Sample({"Hostname": "n1", "instance": "a"}, 1.0)],
        "gpu_nodes": [Sample({"node": "n1"}, 8)],
    }
    item = run(names=names, rules=xid, instant=gpus).by_id("nodes.dcgm_alerts")
    assert item.status == "fail"
    assert "XID errors alerted by A0" in item.evidence
    assert (
        "ECC errors: the only alerts on it (A1 (r.yaml:g)) read metrics this server does not have"
        in item.evidence
    )
    assert "DCGM exports no ECC counter" in item.evidence


NODES = {"gpu_nodes": [Sample({"node": "n1"}, 8)]}
DCGM_N1 = {"dcgm_gpus": [Sample({"Hostname": "n1"}, 1)]}
DCGM_NAMES = frozenset({"DCGM_FI_DEV_GPU_UTIL", "DCGM_FI_DEV_XID_ERRORS", "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL"})
DCGM_UP_ON_N2 = {
    "labels": {"job": "dcgm-exporter"},
    "health": "up",
    "discoveredLabels": {"__meta_kubernetes_pod_node_name": "n2"},
}
DCGM_DOWN_ON_N1 = {"labels": {"job": "dcgm-exporter", "node": "n1"}, "health": "down", "lastError": "timeout"}
TWO_NODES = {"gpu_nodes": [Sample({"node": "n1"}, 8), Sample({"node": "n2"}, 8)]}


@pytest.mark.parametrize(
    ("instant", "targets", "status", "text"),
    [
        (
            {**TWO_NODES, **DCGM_N1},
            [],
            "fail",
            "1 of 2 GPU nodes (kube node GPU capacity) have no DCGM series: n2",
        ),
        ({**NODES, **DCGM_N1}, [], "pass", "DCGM on all 1 GPU nodes (n1)"),
        # dcgm-exporter's HEAD names the node `hostname`
        ({**NODES, "dcgm_gpus": [Sample({"hostname": "n1"}, 1)]}, [], "pass", "DCGM on all 1 GPU nodes (n1)"),
        (
            {"gpu_pod_nodes": [Sample({"node": "n2"}, 1)]},
            [DCGM_UP_ON_N2],
            "pass",
            "DCGM on all 1 GPU nodes (n2)",
        ),
        ({**NODES, **DCGM_N1}, [DCGM_DOWN_ON_N1], "fail", "DCGM exporter targets down: n1 (timeout)"),
        (
            {"dcgm_gpus": [Sample({"Hostname": "n1", "instance": "a"}, 1)]},
            [],
            "pass",
            "all 1 engine replicas",
        ),
        (
            {"dcgm_gpus": [Sample({"Hostname": "n1", "instance": "b"}, 1)]},
            [],
            "fail",
            "without DCGM series: a",
        ),
        (DCGM_N1, [], "unknown", "cannot be matched to GPU nodes"),
    ],
)
def test_dcgm_on_every_gpu_node(
    instant: Mapping[str, Sequence[Sample]], targets: list[dict[str, Any]], status: str, text: str
) -> None:
    rules = _rules("max(DCGM_FI_DEV_XID_ERRORS) > 0", "increase(DCGM_FI_DEV_ECC_DBE_VOL_TOTAL[5m]) > 0")
    frame = frame_of({'requests_running{instance="a"}': 3.0}, 10)
    report = run(
        names=NAMES_VLLM | DCGM_NAMES,
        rules=rules,
        instant=instant,
        targets={"activeTargets": targets},
        frame=frame,
    )
    item = report.by_id("nodes.dcgm_alerts")
    assert item.status == status and text in item.evidence, item.evidence
    assert "XID errors alerted by A0" in item.evidence and "ECC errors alerted by A1" in item.evidence


def test_gpus_joined_by_node_count_for_their_replicas() -> None:
    """Scoped to a fleet whose GPUs are joined by node, DCGM's rows carry the GPU's UUID where the
    engine's replica label is expected: the scope's renames turn it into the replica."""
    rules = _rules("max(DCGM_FI_DEV_XID_ERRORS) > 0", "increase(DCGM_FI_DEV_ECC_DBE_VOL_TOTAL[5m]) > 0")
    gpu = Scope('UUID=~"GPU-1"', "UUID", {"GPU-1": "vllm-a"})
    options = QueryOptions(replica_label="pod", scopes={"gpu": gpu})
    dcgm = {"dcgm_gpus": [Sample({"hostname": "n1", "UUID": "GPU-1", "pod": "GPU-1"}, 1)]}
    fetched = Fetched(
        "http://prom:9090",
        AT,
        NAMES_VLLM | DCGM_NAMES,
        rules,
        {"activeTargets": []},
        frame_of({'requests_running{instance="vllm-a"}': 3.0}, 10),
        dcgm,
        {},
        SETTINGS.lookback,
    )
    item = audit(fetched, CATALOG, options, SETTINGS).by_id("nodes.dcgm_alerts")
    assert "DCGM series for all 1 engine replicas" in item.evidence, item.evidence


def test_no_dcgm_at_all() -> None:
    rules = _rules("max(DCGM_FI_DEV_XID_ERRORS) > 0")
    item = run(rules=rules, frame=frame_of({'requests_running{instance="a"}': 3.0}, 10)).by_id(
        "nodes.dcgm_alerts"
    )
    assert (
        item.status == "fail" and "no DCGM series at all while 1 engine replicas run on GPUs" in item.evidence
    )
    assert (
        "XID errors: the only alerts on it (A0 (r.yaml:g)) read metrics this server does not have"
        in item.evidence
    )


def test_driver_versions_must_agree() -> None:
    gpus = [
        Sample({"Hostname": "n1", "DCGM_FI_DRIVER_VERSION": "550.1"}, 1),
        Sample({"Hostname": "n2", "DCGM_FI_DRIVER_VERSION": "535.2"}, 1),
    ]
    item = run(instant={"dcgm_gpus": gpus}).by_id("nodes.driver_matrix")
    assert item.status == "fail" and "2 driver versions" in item.evidence
    assert run(instant={"dcgm_gpus": gpus[:1]}).by_id("nodes.driver_matrix").status == "unknown"


@pytest.mark.parametrize(
    ("caching", "hit", "status"),
    [("True", 0.01, "fail"), ("True", 0.5, "pass"), ("False", 0.0, "not_applicable"), (None, 0.5, "unknown")],
)
def test_prefix_caching_red_line(caching: str | None, hit: float, status: str) -> None:
    instant = {"cache_config": [_config(enable_prefix_caching=caching)]} if caching else {}
    frame = frame_of({'prefix_hit_ratio{instance="a"}': hit}, 10)
    item = run(instant=instant, frame=frame).by_id("red_lines.prefix_cache_unstable")
    assert item.status == status, item.evidence
    monitoring = run(instant=instant, frame=frame).by_id("cache.prefix_monitoring").status
    assert monitoring == ("not_applicable" if caching == "False" else "fail")  # no alert on the hit ratio


def test_prefix_caching_on_but_hit_ratio_unreadable() -> None:
    item = run(instant={"cache_config": [_config(enable_prefix_caching="True")]}).by_id(
        "red_lines.prefix_cache_unstable"
    )
    assert item.status == "unknown" and "cannot be read" in item.evidence


def _load_frame(rate: float, kv: float | None, ttft: float, ready: float | None) -> SignalFrame:
    series: dict[str, object] = {}
    for i in range(4):
        series[f'request_rate{{instance="r{i}"}}'] = rate
        if kv is not None:
            series[f'kv_usage_ratio{{instance="r{i}"}}'] = kv
        series[f'ttft_p99_seconds{{instance="r{i}"}}'] = ttft
        series[f'tpot_p99_seconds{{instance="r{i}"}}'] = 0.03
    if ready is not None:
        series["replicas_ready"] = ready
    return frame_of(series, 20)


@pytest.mark.parametrize(
    ("rate", "kv", "ttft", "ready", "status", "text"),
    [
        (4.0, 0.45, 0.5, 4.0, "pass", "the peak needs 3 + 1 = 4; 4 ready"),  # KV headroom: 4 -> 8 req/s each
        (4.0, 0.45, 0.5, 3.0, "fail", "the peak needs 3 + 1 = 4; 3 ready"),
        (4.0, 0.85, 0.5, 4.0, "fail", "the peak needs 4 + 1 = 5"),  # little KV headroom left
        (4.0, None, 0.5, 4.0, "unknown", "a lower bound"),  # never pushed to the SLO, KV unknown
        (4.0, 0.45, 5.0, 4.0, "unknown", "the SLO never held"),
        (4.0, 0.45, 0.5, None, "pass", "reporting at the end of the window"),
    ],
)
def test_replica_redundancy(
    rate: float, kv: float | None, ttft: float, ready: float | None, status: str, text: str
) -> None:
    item = run(frame=_load_frame(rate, kv, ttft, ready)).by_id("deployment.scaling_min_replicas")
    assert item.status == status and text in item.evidence, item.evidence


def test_replica_redundancy_uses_the_breach_as_the_limit() -> None:
    ttft = np.where(np.arange(20) < 10, 0.5, 2.0)
    rate = np.where(np.arange(20) < 10, 3.0, 6.0)
    series: dict[str, object] = {}
    for i in range(3):
        series[f'request_rate{{instance="r{i}"}}'] = rate
        series[f'ttft_p99_seconds{{instance="r{i}"}}'] = ttft
        series[f'kv_usage_ratio{{instance="r{i}"}}'] = 0.3
    series["replicas_ready"] = 3.0
    item = run(frame=frame_of(series, 20)).by_id("deployment.scaling_min_replicas")
    # 18 req/s at peak; 3 req/s per replica was the most within SLO (no extrapolation after a breach)
    assert item.status == "fail" and "the peak needs 6 + 1 = 7; 3 ready" in item.evidence, item.evidence


def test_phase_timing_and_queue_alert() -> None:
    queue = _rules("sum(vllm:num_requests_waiting) > 10")
    names = NAMES_VLLM | {"vllm:num_requests_waiting"}
    assert run(names=names, rules=queue).by_id("observability.phase_timing").status == "pass"
    item = run(names=NAMES_VLLM - {"vllm:request_decode_time_seconds_bucket"}, rules=queue).by_id(
        "observability.phase_timing"
    )
    assert item.status == "fail" and "not timed apart: decode" in item.evidence


def test_everything_unknown_when_nothing_was_read() -> None:
    fetched = Fetched(
        "http://p",
        AT,
        None,
        None,
        None,
        None,
        {},
        {"metric_names": "unreachable", "rules": "unreachable", "targets": "unreachable"},
    )
    report = audit(fetched, CATALOG, QueryOptions(), SETTINGS)
    assert report.nothing_readable and {i.status for i in report.items} == {"unknown"}


def test_instant_queries_ask_only_for_what_exists_and_apply_the_selector() -> None:
    names = frozenset(
        {
            "vllm:cache_config_info",
            "vllm:request_prompt_tokens_bucket",
            "kube_node_status_capacity",
            "DCGM_FI_DEV_GPU_UTIL",
        }
    )
    queries = instant_queries(names, QueryOptions(replica_label="pod", selector=SELECTOR), 7200)
    # engine series, a router's re-exports (`server`) left out
    assert queries["cache_config"] == 'vllm:cache_config_info{namespace="llm",server=""}'
    assert queries["prompt_buckets"] == (
        'sum by (le) (increase(vllm:request_prompt_tokens_bucket{namespace="llm",server=""}[7200s]))'
    )
    assert "namespace" not in queries["gpu_nodes"] and "pod" in queries["dcgm_gpus"]
    assert "output_buckets" not in queries and "gpu_pod_nodes" not in queries


def test_settings_from_the_slo_file() -> None:
    settings = AuditSettings.from_slo(load_slo(), lookback=3600.0)
    assert (settings.ttft_p99_slo, settings.tpot_p99_slo, settings.lookback) == (1.0, 0.05, 3600.0)
    assert replace(settings, redundancy=2).redundancy == 2


def test_render_json_is_the_stable_list() -> None:
    report = run()
    rows = json.loads(render_audit(report, "json"))
    assert [r["id"] for r in rows] == [i.id for i in ITEMS]
    assert rows[0] == {
        "id": "capacity.memory_budget",
        "section": "capacity",
        "title": "GPU memory budgeted in four parts: weights, KV cache, activations, fixed overhead",
        "status": "unknown",
        "evidence": rows[0]["evidence"],
        "how_to_fix": ITEMS[0].fix,
    }


def test_a_failed_instant_query_is_the_reason_not_absence() -> None:
    report = run(problems={"instant:cache_config": "timeout after 5.0s"})
    item = report.by_id("red_lines.gpu_memory_utilization")
    assert item.status == "unknown"
    assert "vllm:cache_config_info could not be read (timeout after 5.0s)" in item.evidence
