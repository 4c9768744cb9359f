"""The signal catalog: complete, valid PromQL for every flavour, resolved per server, user-extendable."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from signals.catalog import QueryOptions, load_catalog, normalise_selector, render, resolve
from signals.errors import InputErrors
from signals.vocabulary import SIGNALS

PROMTOOL = shutil.which("promtool")


def needs_promtool() -> None:
    if PROMTOOL is None:
        if os.environ.get("CI") == "true":
            pytest.fail("promtool is required in CI (Debian package prometheus)")
        pytest.skip("promtool not installed (Debian package prometheus): PromQL validation NOT run")


def test_every_signal_has_a_source_but_the_ones_no_exporter_publishes() -> None:
    catalog = load_catalog()
    assert set(catalog.sources) == set(SIGNALS)
    without = sorted(name for name, sources in catalog.sources.items() if not sources)
    assert without == ["list_price_per_1k_tokens"]


def test_every_query_is_valid_promql(tmp_path: Path) -> None:
    needs_promtool()
    catalog = load_catalog()
    rules = []
    for options in (
        QueryOptions(),
        QueryOptions(replica_label="pod", selector='namespace="llm",job=~"vllm.*"'),
    ):
        for name, sources in catalog.sources.items():
            for i, source in enumerate(sources):
                for view in ("replica", "fleet"):
                    template = getattr(source, view)
                    if template is not None:
                        record = f"check:{name}:{source.source}:{view}:{i}:{options.replica_label}"
                        rules.append({"record": record, "expr": render(template, options)})
    path = tmp_path / "catalog-rules.yml"
    path.write_text(yaml.safe_dump({"groups": [{"name": "catalog", "rules": rules}]}))
    result = subprocess.run(
        [PROMTOOL, "check", "rules", str(path)], capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert f"SUCCESS: {len(rules)} rules found" in result.stdout


def test_histograms_are_quantiles_of_rated_buckets_summed_by_le() -> None:
    """A tail signal is a quantile of rated buckets; a stack that has no histogram (Triton's
    cumulative microseconds) may only stand in for it by saying what it reads instead."""
    catalog = load_catalog()
    for name in ("ttft_p99_seconds", "tpot_p99_seconds", "queue_time_p99_seconds", "prompt_tokens_p95"):
        for source in catalog.sources[name]:
            if source.stands_in and "histogram_quantile(" not in (source.replica or source.fleet or ""):
                assert "mean" in source.stands_in, source.source
                continue
            for query in (source.replica, source.fleet):
                if query is None:
                    continue
                assert query.startswith("histogram_quantile(")
                assert "sum by (le" in query and "_bucket{" in query and "rate(" in query
                assert 'le="' not in query  # never hard-coded bucket edges


def test_renamed_metrics_are_or_ed_never_summed() -> None:
    catalog = load_catalog()
    kv = catalog.sources["kv_usage_ratio"][0]
    assert kv.replica is not None
    assert "vllm:kv_cache_usage_perc{$sel} or vllm:gpu_cache_usage_perc{$sel}" in kv.replica
    assert "+" not in kv.replica


def test_ratios_guard_against_division_by_zero() -> None:
    catalog = load_catalog()
    for name, sources in catalog.sources.items():
        for source in sources:
            for query in (source.replica, source.fleet):
                if query and " / (" in query and SIGNALS[name].unit == "ratio":
                    assert "> 0)" in query, (name, query)


@pytest.mark.parametrize(
    ("names", "signal", "expected", "deprecated"),
    [
        ({"vllm:kv_cache_usage_perc"}, "kv_usage_ratio", "vllm", ()),
        (
            {"vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc"},
            "kv_usage_ratio",
            "vllm",
            ("vllm:gpu_cache_usage_perc",),
        ),
        ({"vllm:gpu_cache_usage_perc"}, "kv_usage_ratio", "vllm", ("vllm:gpu_cache_usage_perc",)),
        ({"sglang:token_usage"}, "kv_usage_ratio", "sglang", ()),
        (
            {"vllm:gpu_prefix_cache_hit_rate"},
            "prefix_hit_ratio",
            "vllm_v0",
            ("vllm:gpu_prefix_cache_hit_rate",),
        ),
        ({"sglang:cache_hit_rate"}, "prefix_hit_ratio", "sglang", ()),
        ({"DCGM_FI_DEV_XID_ERRORS"}, "gpu_xid", "dcgm", ()),
        ({"DCGM_FI_DEV_CLOCKS_EVENT_REASONS"}, "gpu_throttle", "dcgm_clock_events", ()),
        ({"kube_deployment_spec_replicas"}, "replicas_desired", "kube", ()),
        ({"kube_endpoint_address"}, "replicas_ready", "kube_endpoints", ()),
        (
            {"kube_deployment_status_replicas_ready", "kube_endpoint_address"},
            "replicas_ready",
            "kube",
            (),
        ),
        ({"prober_probe_total"}, "probe_failures", "kubelet", ()),
        ({"kube_pod_container_status_restarts_total"}, "terminated_error", "kube", ()),
        ({"kube_pod_container_status_last_terminated_exitcode"}, "exit_code", "kube", ()),
        ({"inference_objective_request_duration_seconds_bucket"}, "gateway_latency_p99_seconds", "epp", ()),
        (
            {"inference_model_request_duration_seconds_bucket"},
            "gateway_latency_p99_seconds",
            "epp",
            ("inference_model_request_duration_seconds_bucket",),
        ),
        (
            {"inference_model_running_requests"},
            "gateway_inflight",
            "epp",
            ("inference_model_running_requests",),
        ),
        ({"inference_objective_request_total"}, "upstream_error_ratio", "epp", ()),
        ({"inference_objective_request_total"}, "rejected_ratio", "epp", ()),
        ({"inference_extension_flow_control_queue_size"}, "gateway_queue", "epp", ()),
        ({"inference_pool_ready_pods"}, "backends_routed", "epp", ()),
        (
            {"inference_pool_average_queue_size", "inference_pool_ready_pods"},
            "queue_waiting",
            "epp_pool",
            (),
        ),
        (
            {"inference_pool_average_queue_size", "inference_pool_ready_pods", "vllm:num_requests_waiting"},
            "queue_waiting",
            "vllm",
            (),
        ),
        ({"vllm:healthy_pods_total"}, "backends_routed", "production_stack", ()),
        ({"vllm:request_latency_seconds_bucket"}, "gateway_latency_p99_seconds", "production_stack", ()),
        (
            {"vllm:request_latency_seconds_count", "vllm:num_incoming_requests_total"},
            "upstream_error_ratio",
            "production_stack",
            (),
        ),
        ({"litellm_request_total_latency_metric_bucket"}, "gateway_latency_p99_seconds", "litellm", ()),
        ({"litellm_in_flight_requests"}, "gateway_inflight", "litellm", ()),
        ({"litellm_deployment_total_requests_total"}, "upstream_error_ratio", "litellm", ()),
        ({"litellm_deployment_state"}, "backends_routed", "litellm", ()),
        ({"envoy_cluster_upstream_rq_time_bucket"}, "gateway_latency_p99_seconds", "envoy", ()),
        ({"envoy_cluster_upstream_rq_pending_active"}, "gateway_queue", "envoy", ()),
        ({"envoy_cluster_upstream_rq_active"}, "gateway_inflight", "envoy", ()),
        (
            {"envoy_cluster_upstream_rq_xx", "envoy_cluster_upstream_cx_connect_fail"},
            "upstream_error_ratio",
            "envoy",
            (),
        ),
        ({"envoy_cluster_membership_healthy"}, "backends_routed", "envoy", ()),
    ],
)
def test_resolution_per_flavour(
    names: set[str], signal: str, expected: str, deprecated: tuple[str, ...]
) -> None:
    res = resolve(load_catalog(), names)[signal]
    chosen = res.replica or res.fleet
    assert chosen is not None and chosen.source == expected
    assert res.deprecated_in_use == deprecated


def test_blind_without_metrics_and_views_resolve_separately() -> None:
    res = resolve(load_catalog(), {"litellm_input_tokens_metric_total", "vllm:prompt_tokens_total"})
    tokens = res["prompt_tokens_rate"]
    assert tokens.fleet is not None and tokens.fleet.source == "litellm"  # per tenant, from the gateway
    assert tokens.replica is not None and tokens.replica.source == "vllm"  # per replica, from the engines
    assert res["gpu_xid"].blind


def test_render_fills_labels_and_selector() -> None:
    catalog = load_catalog()
    template = catalog.sources["truncated_ratio"][0].replica
    assert template is not None
    plain = render(template, QueryOptions())
    assert '{finished_reason="length",server=""}' in plain and "sum by (instance)" in plain
    assert '{server=""}' in plain
    scoped = render(
        template, QueryOptions(replica_label="pod", selector=normalise_selector('{namespace="llm"}'))
    )
    assert '{finished_reason="length",namespace="llm",server=""}' in scoped and "sum by (pod)" in scoped


_SELECTORS = re.compile(r"([a-zA-Z_:][a-zA-Z0-9_:]*)\{([^}]*)\}")


@pytest.mark.parametrize(
    "options",
    [QueryOptions(), QueryOptions(replica_label="pod", selector='namespace="llm"')],
    ids=["unscoped", "selector"],
)
def test_engine_queries_never_read_a_routers_reexport(options: QueryOptions) -> None:
    """The production-stack router re-exports `vllm:num_requests_waiting` (and running, and the
    prefix-cache gauges) under the engines' names with a `server` label: an engine query that
    summed both would count every waiting request twice, scoped to a fleet or not."""
    catalog = load_catalog()
    for name, sources in catalog.sources.items():
        for source in sources:
            for template in (source.replica, source.fleet):
                if template is None:
                    continue
                query = render(template, options, source.exporter)
                for metric, matchers in _SELECTORS.findall(query):
                    if source.exporter == "engine":
                        assert 'server=""' in matchers.split(","), (name, source.source, metric, query)
                    else:
                        assert 'server=""' not in matchers, (name, source.source, query)
    waiting = next(s for s in catalog.sources["queue_waiting"] if s.source == "vllm")
    assert waiting.fleet is not None
    assert render(waiting.fleet, options) == f"sum(vllm:num_requests_waiting{{{_join(options.selector)}}})"
    # a selector that already speaks of `server` is the user's to keep
    own = QueryOptions(selector='server=~".+"')
    assert render(waiting.fleet, own) == 'sum(vllm:num_requests_waiting{server=~".+"})'


def _join(selector: str) -> str:
    return ",".join(m for m in (selector, 'server=""') if m)


def test_selector_normalisation() -> None:
    assert normalise_selector('{namespace="llm"}') == 'namespace="llm"'
    assert normalise_selector(' namespace="llm", ') == 'namespace="llm"'
    for bad in ('{namespace="llm"', 'namespace="llm', "{a{b}}"):
        with pytest.raises(ValueError):
            normalise_selector(bad)


def test_user_catalog_goes_first_and_is_validated(tmp_path: Path) -> None:
    user = tmp_path / "mine.yaml"
    user.write_text(
        "schema_version: 1\nsignals:\n  long_prompt_ratio:\n    - source: mine\n"
        "      requires: [my_long_prompts_total, my_prompts_total]\n"
        "      fleet: sum(rate(my_long_prompts_total{$sel}[$window]))"
        " / (sum(rate(my_prompts_total{$sel}[$window])) > 0)\n"
        "  kv_usage_ratio:\n    - source: mine\n      requires: [vllm:kv_cache_usage_perc]\n"
        "      replica: max by ($replica) (vllm:kv_cache_usage_perc{$sel})\n"
    )
    catalog = load_catalog([str(user)])
    assert catalog.sources["long_prompt_ratio"][0].source == "mine"
    assert (
        catalog.sources["kv_usage_ratio"][0].source == "mine" and len(catalog.sources["kv_usage_ratio"]) > 1
    )
    bad = tmp_path / "bad.yaml"
    bad.write_text(
        "schema_version: 1\nsignals:\n  kv_usage_rato:\n    - source: x\n      requires: [a]\n"
        "      fleet: max(a{$sel})\n  request_rate:\n    - source: y\n      requires: [b]\n"
        "      replica: sum(b{$selector})\n"
    )
    with pytest.raises(InputErrors) as err:
        load_catalog([str(bad)])
    text = str(err.value)
    assert f"{bad}:8: signals.request_rate[0]: unknown placeholder $selector" in text
    assert "unknown signal 'kv_usage_rato' (did you mean kv_usage_ratio?)" in text
