"""`triage audit` at the edge: quotas at the gateway, overload kept off the GPUs, metering per tenant.

One real Prometheus, backfilled with raw exporter series, holds four fleets in four
namespaces, each audited alone through its selector (as a Prometheus holding several
fleets and their gateways is):

- `edge-good`: LiteLLM with rate limits on keys and a team, refusing with 429 at the load
  peak while the engines' queue stays bounded, metering tokens and spend per team and key;
- `edge-bad`: LiteLLM with no limit, refusing nothing, while the engines' waiting queue
  grows far past their running batch; its tokens and spend carry no tenant;
- `edge-epp`: the EPP (llm-d) with flow control, answering InferencePoolResourceExhausted
  at the peak, metering input tokens per model name (two adapters);
- `edge-none`: engines with no gateway metrics at all.

So each of the three checklist items (deployment.gateway_functions,
deployment.quota_at_gateway, observability.tenant_cost) passes, fails and is unknown on
real data, with its evidence. Unit tests drive the corners with synthetic inputs.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence

import numpy as np
import pytest
from conftest import frame_of
from promserver import require_prometheus_binaries

from signals.catalog import QueryOptions, load_catalog
from signals.prometheus import PrometheusSource
from signals.tempprom import TemporaryPrometheus, to_openmetrics
from triage.audit.engine import audit
from triage.audit.fetch import run_audit
from triage.audit.model import AuditItem, AuditReport, AuditSettings, Fetched, Sample
from triage.audit.queries import instant_queries

START = 1_791_000_000.0
STEP = 15.0
N = 481  # two hours
AT = START + STEP * (N - 1)
SETTINGS = AuditSettings(lookback=2 * 3600.0, step=60.0)
ITEMS = ("deployment.gateway_functions", "deployment.quota_at_gateway", "observability.tenant_cost")
MINUTE = int(60 / STEP)
PEAK = slice(60 * MINUTE, 80 * MINUTE)  # the load peak: minutes 60 to 80

Series = tuple[str, dict[str, str], np.ndarray, float, float]


def _counter(rate: np.ndarray) -> np.ndarray:
    """A counter growing by `rate` per second at each step."""
    return np.cumsum(rate * STEP)


def _engines(namespace: str, waiting: np.ndarray) -> list[Series]:
    """Two vLLM replicas serving 4 req/s each with 40 running, and `waiting` split between them."""
    out: list[Series] = []
    for i in range(2):
        labels = {
            "namespace": namespace,
            "pod": f"vllm-{i}",
            "instance": f"10.{len(namespace)}.0.{i}:8000",
            "job": "vllm",
            "model_name": "llama",
        }
        out.append(("vllm:num_requests_running", labels, np.full(N, 40.0), START, STEP))
        out.append(("vllm:num_requests_waiting", labels, waiting / 2, START, STEP))
        done = {**labels, "finished_reason": "stop"}
        out.append(("vllm:request_success_total", done, _counter(np.full(N, 4.0)), START, STEP))
    return out


def _litellm(namespace: str, **labels: str) -> dict[str, str]:
    return {
        "namespace": namespace,
        "pod": "litellm-0",
        "instance": "10.9.0.1:4000",
        "job": "litellm",
        **labels,
    }


def _one(name: str, labels: dict[str, str], values: np.ndarray) -> Series:
    return (name, labels, values, START, STEP)


def good() -> list[Series]:
    """LiteLLM limits three keys and a team; at the peak it refuses a quarter of 12 req/s."""
    ns = "edge-good"
    waiting = np.zeros(N)
    waiting[PEAK] = 4.0
    out = _engines(ns, waiting)
    offered = np.full(N, 8.0)
    offered[PEAK] = 12.0
    refused = np.where(offered > 8.0, 3.0, 0.0)
    tenants = [("search", "k1"), ("search", "k2"), ("chat", "k3")]
    share = 1 / len(tenants)
    route = {"route": "/chat/completions"}
    for team, key in tenants:
        who = {"team": team, "hashed_api_key": key, "requested_model": "llama"}
        served, rejected = _counter((offered - refused) * share), _counter(refused * share)
        out += [
            _one(
                "litellm_proxy_total_requests_metric_total",
                _litellm(ns, status_code="200", **route, **who),
                served,
            ),
            _one(
                "litellm_proxy_total_requests_metric_total",
                _litellm(ns, status_code="429", **route, **who),
                rejected,
            ),
            _one(
                "litellm_proxy_failed_requests_metric_total",
                _litellm(ns, exception_status="429", exception_class="RateLimitError", **who),
                rejected,
            ),
            _one(
                "litellm_api_key_rate_limit_allowed_metric",
                _litellm(ns, hashed_api_key=key, rate_limit_type="requests"),
                np.full(N, 300.0),
            ),
            _one("litellm_total_tokens_metric_total", _litellm(ns, **who), _counter(np.full(N, 900.0))),
            _one("litellm_spend_metric_total", _litellm(ns, **who), _counter(np.full(N, 0.002))),
        ]
    team_limit = _litellm(ns, team="search", rate_limit_type="requests")
    out.append(_one("litellm_team_rate_limit_allowed_metric", team_limit, np.full(N, 600.0)))
    return out


def bad() -> list[Series]:
    """LiteLLM with no limit passes everything on; from minute 60 the engines' queue climbs to 300."""
    ns = "edge-bad"
    waiting = np.clip((np.arange(N) - 60 * MINUTE) * (300 / (40 * MINUTE)), 0, 300)
    who = {"requested_model": "llama"}  # no key, no team: a proxy run without virtual keys
    server_error = {"exception_status": "500", "exception_class": "InternalServerError"}
    return [
        *_engines(ns, waiting),
        _one(
            "litellm_proxy_total_requests_metric_total",
            _litellm(ns, status_code="200", route="/chat/completions", **who),
            _counter(np.full(N, 8.0)),
        ),
        _one(
            "litellm_proxy_failed_requests_metric_total",
            _litellm(ns, **server_error, **who),
            _counter(np.full(N, 0.01)),
        ),
        _one("litellm_total_tokens_metric_total", _litellm(ns, **who), _counter(np.full(N, 2700.0))),
        _one("litellm_spend_metric_total", _litellm(ns, **who), _counter(np.full(N, 0.006))),
    ]


def epp() -> list[Series]:
    """The EPP with flow control, shedding at the peak, two adapters metered by model name."""
    ns = "edge-epp"
    out = _engines(ns, np.ones(N))
    pod = {"namespace": ns, "pod": "epp-0", "instance": "10.8.0.1:9090", "job": "epp"}
    shed = np.zeros(N)
    shed[PEAK] = 0.5
    for model in ("chat-a", "chat-b"):
        labels = {**pod, "model_name": model, "target_model_name": model}
        queue = {**pod, "fairness_id": model, "priority": "0", "inference_pool": "pool", "model_name": model}
        error = {**labels, "error_code": "InferencePoolResourceExhausted"}
        out += [
            _one("inference_objective_request_total", labels, _counter(np.full(N, 4.0))),
            _one("inference_objective_request_error_total", error, _counter(shed)),
            _one("inference_objective_input_tokens_sum", labels, _counter(np.full(N, 3600.0))),
            _one("inference_objective_input_tokens_count", labels, _counter(np.full(N, 4.0))),
            _one("inference_extension_flow_control_queue_size", queue, np.zeros(N)),
        ]
    return out


def none() -> list[Series]:
    return _engines("edge-none", np.zeros(N))


@pytest.fixture(scope="module")
def reports() -> Iterator[dict[str, AuditReport]]:
    require_prometheus_binaries()
    series = to_openmetrics([*good(), *bad(), *epp(), *none()])
    catalog = load_catalog()
    with TemporaryPrometheus(series) as prom, PrometheusSource(prom.url, timeout=20) as source:
        yield {
            name: run_audit(source, catalog, QueryOptions(selector=f'namespace="edge-{name}"'), AT, SETTINGS)
            for name in ("good", "bad", "epp", "none")
        }


def _items(report: AuditReport) -> dict[str, AuditItem]:
    return {item_id: report.by_id(item_id) for item_id in ITEMS}


def _statuses(report: AuditReport) -> dict[str, str]:
    return {item_id: item.status for item_id, item in _items(report).items()}


# --- real data --------------------------------------------------------------------------------------


def test_a_gateway_that_limits_refuses_at_the_peak_and_meters_per_tenant_passes(
    reports: Mapping[str, AuditReport],
) -> None:
    items = _items(reports["good"])
    assert _statuses(reports["good"]) == dict.fromkeys(ITEMS, "pass"), {
        i: x.evidence for i, x in items.items()
    }
    quota = items["deployment.quota_at_gateway"].evidence
    assert "rate limits on 3 API keys and 1 team (LiteLLM)" in quota
    assert "3,600 requests refused with 429 over the last 2h00m" in quota
    assert "the engines' waiting queue stayed bounded (peak 4 waiting against 80 running)" in quota
    assert "while the gateway refused requests (up to 0.25 of its requests over 5 minutes)" in quota
    functions = items["deployment.gateway_functions"].evidence
    assert "metering at the gateway: LiteLLM meters tokens and spend" in functions
    assert "auth, routing and fallback are the gateway's configuration" in functions
    tenants = items["observability.tenant_cost"].evidence
    assert "tokens per tenant: 2 teams, 3 API keys (LiteLLM)" in tenants
    assert "; spend per tenant: 2 teams, 3 API keys" in tenants


def test_a_gateway_without_quota_in_front_of_a_growing_queue_fails(
    reports: Mapping[str, AuditReport],
) -> None:
    items = _items(reports["bad"])
    assert _statuses(reports["bad"]) == dict.fromkeys(ITEMS, "fail"), {
        i: x.evidence for i, x in items.items()
    }
    quota = items["deployment.quota_at_gateway"].evidence
    assert "LiteLLM served 57,600 requests over the last 2h00m with no quota in sight" in quota
    assert (
        "overload reached the engines: their waiting queue held at 10 or more and above the running" in quota
    )
    assert "(peak 300 waiting against 80 running)" in quota and "while LiteLLM refused none" in quota
    functions = items["deployment.gateway_functions"].evidence
    assert (
        "no quota in sight" in functions
        and "metering at the gateway: LiteLLM meters tokens and spend" in functions
    )
    tenants = items["observability.tenant_cost"].evidence
    assert "attributes it to no tenant: team, hashed_api_key, user, end_user are empty" in tenants


def test_the_epp_sheds_at_the_peak_with_flow_control_and_meters_per_model(
    reports: Mapping[str, AuditReport],
) -> None:
    items = _items(reports["epp"])
    assert _statuses(reports["epp"]) == dict.fromkeys(ITEMS, "pass"), {
        i: x.evidence for i, x in items.items()
    }
    quota = items["deployment.quota_at_gateway"].evidence
    assert "flow control holds requests at the EPP" in quota and "1,200 requests refused with 429" in quota
    assert (
        "metering at the gateway: the EPP meters input tokens per model"
        in items["deployment.gateway_functions"].evidence
    )
    assert "per model name (2: chat-a, chat-b)" in items["observability.tenant_cost"].evidence


def test_a_fleet_whose_edge_exports_nothing_is_unknown_naming_the_metrics(
    reports: Mapping[str, AuditReport],
) -> None:
    """The server holds LiteLLM's and the EPP's series, other fleets': none is this fleet's gateway."""
    items = _items(reports["none"])
    assert _statuses(reports["none"]) == dict.fromkeys(ITEMS, "unknown"), {
        i: x.evidence for i, x in items.items()
    }
    quota = items["deployment.quota_at_gateway"].evidence
    assert (
        "no gateway metrics for this fleet" in quota and "litellm_api_key_rate_limit_allowed_metric" in quota
    )
    assert 'inference_objective_request_error_total{error_code="InferencePoolResourceExhausted"}' in quota
    assert "the engines' waiting queue stayed bounded" in quota
    assert "litellm_proxy_total_requests_metric_total" in items["deployment.gateway_functions"].evidence
    tenants = items["observability.tenant_cost"].evidence
    assert (
        "litellm_spend_metric_total" in tenants
        and "inference_objective_input_tokens by model_name" in tenants
    )


# --- the corners, on synthetic inputs -------------------------------------------------------------------

ENGINE_NAMES = frozenset(
    {"vllm:num_requests_running", "vllm:num_requests_waiting", "vllm:request_success_total"}
)
STEPS = 120


def _run(
    names: frozenset[str],
    instant: Mapping[str, Sequence[Sample]],
    frame_series: Mapping[str, object] | None = None,
    problems: Mapping[str, str] | None = None,
) -> dict[str, AuditItem]:
    frame = frame_of(dict(frame_series), STEPS, 60.0) if frame_series is not None else None
    fetched = Fetched(
        "http://prom:9090",
        AT,
        names,
        {"groups": []},
        {"activeTargets": []},
        frame,
        instant,
        problems or {},
        SETTINGS.lookback,
    )
    return _items(audit(fetched, load_catalog(), QueryOptions(), SETTINGS))


def _sample(value: float, **labels: str) -> list[Sample]:
    return [Sample(labels, value)]


def test_only_the_asked_gateway_queries_are_made_and_they_are_scoped() -> None:
    names = ENGINE_NAMES | {"litellm_proxy_total_requests_metric_total", "litellm_spend_metric_total"}
    queries = instant_queries(names, QueryOptions(selector='namespace="llm"'), 7200)
    assert queries["gateway_requests:litellm"] == (
        'sum(increase(litellm_proxy_total_requests_metric_total{namespace="llm"}[7200s]))'
    )
    assert queries["gateway_spend"].startswith("sum by (team, hashed_api_key, user, end_user) (increase(")
    assert not any(k.startswith(("gateway_refused", "gateway_limits", "gateway_tokens")) for k in queries)


def test_a_gateway_query_that_failed_is_the_reason_not_absence() -> None:
    names = ENGINE_NAMES | {"litellm_proxy_total_requests_metric_total"}
    items = _run(names, {}, problems={"instant:gateway_requests:litellm": "HTTP 503 from /api/v1/query"})
    for item in items.values():
        assert item.status == "unknown" and "gateway_requests:litellm (HTTP 503" in item.evidence


def test_overload_on_the_engines_fails_even_with_nothing_in_front_of_them() -> None:
    waiting = np.concatenate([np.zeros(60), np.linspace(0, 200, 60)])
    frame = {'queue_waiting{instance="a"}': waiting, 'requests_running{instance="a"}': 40.0}
    item = _run(ENGINE_NAMES, {}, frame)["deployment.quota_at_gateway"]
    assert item.status == "fail"
    assert "overload reached the engines" in item.evidence
    assert "no gateway metrics show a refusal in front of them" in item.evidence


def test_a_brief_queue_spike_is_not_overload() -> None:
    waiting = np.zeros(STEPS)
    waiting[50:53] = 150.0  # three minutes, shorter than overload_for
    frame = {'queue_waiting{instance="a"}': waiting, 'requests_running{instance="a"}': 40.0}
    instant = {
        "gateway_requests:litellm": _sample(1000.0),
        "gateway_limits:key": _sample(2.0, rate_limit_type="requests"),
    }
    item = _run(ENGINE_NAMES | {"litellm_proxy_total_requests_metric_total"}, instant, frame)[
        "deployment.quota_at_gateway"
    ]
    assert item.status == "pass", item.evidence
    assert "no overload in the window, so whether the limits sit below" in item.evidence


def test_refusals_that_do_not_keep_the_queue_bounded_still_fail() -> None:
    frame = {'queue_waiting{instance="a"}': 120.0, 'requests_running{instance="a"}': 40.0}
    instant = {"gateway_requests:litellm": _sample(1000.0), "gateway_refused:litellm": _sample(50.0)}
    item = _run(ENGINE_NAMES | {"litellm_proxy_total_requests_metric_total"}, instant, frame)[
        "deployment.quota_at_gateway"
    ]
    assert item.status == "fail"
    assert "despite the gateway's refusals: its limits sit above what the engines serve" in item.evidence


def test_the_router_alone_cannot_show_a_quota() -> None:
    names = ENGINE_NAMES | {"vllm:num_incoming_requests_total", "vllm:input_tokens_total"}
    instant = {"gateway_requests:router": _sample(5000.0), "gateway_tokens:router": _sample(1e6)}
    frame = {'queue_waiting{instance="a"}': 0.0, 'requests_running{instance="a"}': 40.0}
    items = _run(names, instant, frame)
    assert items["deployment.quota_at_gateway"].status == "unknown"
    assert "only the production-stack router is seen" in items["deployment.quota_at_gateway"].evidence
    assert "the router meters tokens per backend" in items["deployment.gateway_functions"].evidence
    assert items["observability.tenant_cost"].status == "unknown"


def test_a_gateway_without_traffic_shows_no_quota_either_way() -> None:
    names = ENGINE_NAMES | {"litellm_proxy_total_requests_metric_total"}
    item = _run(names, {"gateway_requests:litellm": _sample(0.0)})["deployment.quota_at_gateway"]
    assert item.status == "unknown" and "LiteLLM carried no traffic over the last 2h00m" in item.evidence


@pytest.mark.parametrize(
    ("spend", "status", "text"),
    [
        (_sample(3.0, team="search"), "pass", "spend per tenant: 1 team"),
        (
            _sample(0.0, team="search"),
            "pass",
            "spend reads 0 for every tenant: cost per 1k tokens needs a price",
        ),
        ([], "pass", "no spend metered: cost per 1k tokens comes from the billing pipeline"),
    ],
)
def test_tokens_per_tenant_with_and_without_a_price(spend: list[Sample], status: str, text: str) -> None:
    names = ENGINE_NAMES | {"litellm_proxy_total_requests_metric_total", "litellm_total_tokens_metric_total"}
    instant = {
        "gateway_requests:litellm": _sample(100.0),
        "gateway_tokens": _sample(5e5, team="search"),
        "gateway_spend": spend,
    }
    item = _run(names, instant)["observability.tenant_cost"]
    assert item.status == status and text in item.evidence, item.evidence


def test_one_model_name_at_the_epp_is_not_per_tenant() -> None:
    names = ENGINE_NAMES | {"inference_objective_request_total", "inference_objective_input_tokens_sum"}
    instant = {"gateway_requests:epp": _sample(100.0), "gateway_tokens:epp": _sample(9e5, model_name="llama")}
    item = _run(names, instant)["observability.tenant_cost"]
    assert (
        item.status == "unknown"
        and "for one model name only (llama): per model, not per tenant" in item.evidence
    )


def test_spend_per_tenant_without_tokens_per_tenant_is_not_enough() -> None:
    names = ENGINE_NAMES | {"litellm_proxy_total_requests_metric_total", "litellm_spend_metric_total"}
    instant = {"gateway_requests:litellm": _sample(100.0), "gateway_spend": _sample(2.0, team="search")}
    item = _run(names, instant)["observability.tenant_cost"]
    assert item.status == "unknown" and "exports no token counter" in item.evidence
    instant["gateway_tokens"] = _sample(5e5)
    item = _run(names, instant)["observability.tenant_cost"]
    assert item.status == "fail" and "its token counters carry no tenant" in item.evidence


def test_overload_without_a_running_batch_reads_the_floor_alone() -> None:
    frame = {'queue_waiting{instance="a"}': 50.0}
    item = _run(ENGINE_NAMES, {}, frame)["deployment.quota_at_gateway"]
    assert item.status == "fail" and "held at 10 or more for 2h00m (peak 50 waiting)" in item.evidence
