"""The backfilled history is queryable over the incident window, under the scraped label sets.

Each fleet's incident must be visible where the truth record says it happened: before
the onset the fleet looks healthy, at `at` it does not, and the other fleets' incidents
stay in their own series.
"""

from __future__ import annotations

from tools.cluster.harness import SYNTHETIC
from tools.cluster.scenarios import FleetTruth, Scenario

from .clusterkit import instant, series, value


def truth(scenario: Scenario, name: str) -> FleetTruth:
    assert scenario.truth is not None
    return scenario.truth.fleet(name)


def test_backfilled_label_sets_are_exactly_the_scraped_ones(scenario: Scenario) -> None:
    assert scenario.truth is not None and scenario.scraped is not None
    found = series(scenario.url, '{__name__=~".+"}', scenario.truth.start, scenario.truth.end)
    backfilled = {frozenset(s.items()) for s in found}
    scraped = {
        frozenset(s.items()) for s in scenario.scraped.series if s["__name__"] not in SYNTHETIC - {"up"}
    }
    assert backfilled == scraped
    assert len(backfilled) > 3000


def test_families_count_what_answers_at_the_diagnosis_time(scenario: Scenario) -> None:
    assert scenario.truth is not None and scenario.cluster is not None
    at = truth(scenario, "vllm").at
    families = "vllm:kv_cache_usage_perc|sglang:token_usage|DCGM_FI_DEV_GPU_TEMP|kube_pod_info|up"
    promql = f'count by (__name__) ({{__name__=~"{families}"}})'
    counts = {r["metric"]["__name__"]: float(r["value"][1]) for r in instant(scenario.url, promql, at)}
    crashed = {name for f in scenario.truth.fleets for name in f.crash_looping}
    answering = {
        f.engine: sum(
            1 for f2 in scenario.truth.fleets if f2.engine == f.engine for p in f2.pods if p.address
        )
        for f in scenario.truth.fleets
    }
    assert counts == {
        "vllm:kv_cache_usage_perc": answering["vllm"] - len(crashed),
        "sglang:token_usage": answering["sglang"],
        "DCGM_FI_DEV_GPU_TEMP": len(scenario.cluster.gpus),
        "kube_pod_info": len(scenario.cluster.pods),
        "up": len(scenario.cluster.targets),
    }


def test_kv_pressure_fills_one_replicas_cache_after_the_onset(scenario: Scenario) -> None:
    fleet = truth(scenario, "vllm")
    pod = fleet.pods[0].name
    promql = f'vllm:kv_cache_usage_perc{{namespace="llm",pod="{pod}"}}'
    assert value(scenario.url, promql, fleet.onset - 300) < 0.7
    assert value(scenario.url, promql, fleet.at) > 0.9
    preemptions = f'sum(rate(vllm:num_preemptions_total{{job="{fleet.job}"}}[5m]))'
    assert value(scenario.url, preemptions, fleet.onset - 300) == 0
    assert value(scenario.url, preemptions, fleet.at) > 1


def test_gpu_fault_shows_in_dcgm_kube_state_metrics_and_up(scenario: Scenario) -> None:
    fleet = truth(scenario, "vllm-70b")
    (gpu,) = fleet.faulty_gpus
    (crashed,) = fleet.crash_looping
    address = next(p.address for p in fleet.pods if p.name == crashed)
    before, at, url = fleet.onset - 300, fleet.at, scenario.url
    xid = f'DCGM_FI_DEV_XID_ERRORS{{UUID="{gpu.uuid}"}}'
    assert value(url, xid, before) == 0 and value(url, xid, at) == 79
    assert instant(url, xid, at)[0]["metric"]["exported_pod"] == crashed
    restarts = f'kube_pod_container_status_restarts_total{{pod="{crashed}",container="vllm"}}'
    assert value(url, restarts, before) == 0 and value(url, restarts, at) >= 3
    ready = 'kube_statefulset_status_replicas_ready{namespace="llm",statefulset="vllm-70b"}'
    assert value(url, ready, before) == 4 and value(url, ready, at) == 3
    assert value(url, 'kube_statefulset_replicas{namespace="llm",statefulset="vllm-70b"}', at) == 4
    assert value(url, f'kube_pod_status_ready{{pod="{crashed}",condition="true"}}', at) == 0
    assert value(url, f'kube_pod_container_status_waiting_reason{{pod="{crashed}"}}', at) == 1
    assert value(url, f'up{{instance="{address}"}}', before) == 1
    assert value(url, f'up{{instance="{address}"}}', at) == 0
    assert instant(url, f'vllm:num_requests_running{{pod="{crashed}"}}', at) == []


def test_traffic_burst_doubles_the_request_rate(scenario: Scenario) -> None:
    fleet = truth(scenario, "sglang-qwen")
    rate = f'sum(rate(sglang:num_requests_total{{job="{fleet.job}"}}[5m]))'
    ratio = value(scenario.url, rate, fleet.at) / value(scenario.url, rate, fleet.onset - 300)
    assert ratio > 1.7


def test_the_control_fleet_stays_as_it_was(scenario: Scenario) -> None:
    fleet = truth(scenario, "model-qwen2-5-7b-instruct")
    assert fleet.cause is None and fleet.symptom is None
    rate = 'sum(rate(vllm:request_success_total{namespace="kubeai"}[5m]))'
    ratio = value(scenario.url, rate, fleet.at) / value(scenario.url, rate, fleet.at - 1800)
    assert 0.75 < ratio < 1.33
    kv = 'max(vllm:kv_cache_usage_perc{namespace="kubeai"})'
    assert value(scenario.url, kv, fleet.at) < 0.7
