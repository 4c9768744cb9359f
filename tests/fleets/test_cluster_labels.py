"""The scraped label sets are what the Prometheus Operator's relabeling makes of each exporter.

Nothing here is computed by the harness: the label sets are those a real Prometheus
returned from `/api/v1/series` after scraping the cluster through the generated jobs. The
expectations come from the shapes in shared/real (the Operator's golden configs and the
charts' monitors), per exporter and per `honor_labels`.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from pathlib import Path

import pytest
import yaml
from promserver import require_prometheus_binaries

from tools.cluster.harness import match, scrape
from tools.cluster.history import build_history
from tools.cluster.model import Monitor
from tools.cluster.scenarios import FleetTruth, Scenario, free_cluster, specs, tell_all
from tools.cluster.scrape import job

TARGET_LABELS = {"namespace", "pod", "container", "endpoint", "job", "instance"}


def scraped(scenario: Scenario) -> tuple[Mapping[str, str], ...]:
    assert scenario.scraped is not None
    return scenario.scraped.series


def engine_series(scenario: Scenario, fleet: FleetTruth) -> Iterator[tuple[Mapping[str, str], str]]:
    """(labels, pod name) of every engine series of the fleet, found by its pods' addresses."""
    by_address = {p.address: p.name for p in fleet.pods if p.address}
    prefix = f"{fleet.engine}:"
    for s in scraped(scenario):
        if s["__name__"].startswith(prefix) and s["instance"] in by_address:
            yield s, by_address[s["instance"]]


def truth(scenario: Scenario, name: str) -> FleetTruth:
    assert scenario.truth is not None
    return scenario.truth.fleet(name)


def test_engines_by_servicemonitor_carry_the_operators_target_labels(scenario: Scenario) -> None:
    fleet = truth(scenario, "vllm")
    seen = set()
    for labels, pod in engine_series(scenario, fleet):
        assert set(labels) >= TARGET_LABELS | {"service", "engine"}, labels
        assert labels["pod"] == pod and labels["namespace"] == "llm"
        assert labels["container"] == "vllm" and labels["endpoint"] == "service-port"
        assert labels["service"] == labels["job"] == "vllm-engine-service"
        assert labels["engine"] == "0"
        if labels["__name__"] != "vllm:cache_config_info":  # V1's config info has no model_name
            assert labels["model_name"] == fleet.model_name
        assert not any(k.startswith("exported_") for k in labels) and "node" not in labels
        seen.add(pod)
    assert seen == {p.name for p in fleet.pods}
    assert fleet.job == "vllm-engine-service"
    assert fleet.scrape_pool == "serviceMonitor/llm/vllm-engine-servicemonitor/0"


@pytest.mark.parametrize(
    ("name", "job", "container", "endpoint"),
    [
        ("vllm-70b", "llm/vllm-70b-decode-podmonitor", "vllm", "metrics"),
        ("model-qwen2-5-7b-instruct", "kubeai/kubeai-vllm", "server", "http"),
    ],
)
def test_engines_by_podmonitor_have_no_service_label(
    scenario: Scenario, name: str, job: str, container: str, endpoint: str
) -> None:
    fleet = truth(scenario, name)
    leaders = {p.name for p in fleet.pods if p.role == "engine"}
    seen = set()
    for labels, pod in engine_series(scenario, fleet):
        assert set(labels) >= TARGET_LABELS and "service" not in labels, labels
        assert (labels["job"], labels["container"], labels["endpoint"]) == (job, container, endpoint)
        assert labels["pod"] == pod and labels["namespace"] == fleet.namespace
        seen.add(pod)
    assert seen == leaders


def test_lws_workers_are_discovered_but_dropped_by_the_port_keep(scenario: Scenario) -> None:
    fleet = truth(scenario, "vllm-70b")
    workers = {p.name: p for p in fleet.pods if p.role == "worker"}
    assert len(workers) == 4 and all(w.address is None for w in workers.values())
    assert scenario.scraped is not None
    dropped = {d.get("__meta_kubernetes_pod_name") for d in scenario.scraped.dropped}
    assert set(workers) <= dropped
    worker_ips = {w.ip for w in workers.values()}
    assert not [s for s in scraped(scenario) if s["instance"].split(":")[0] in worker_ips]


def test_honor_labels_servicemonitor_adds_the_node_and_keeps_the_exporters_labels(scenario: Scenario) -> None:
    fleet = truth(scenario, "sglang-qwen")
    nodes = {p.name: p.node for p in fleet.pods}
    for labels, pod in engine_series(scenario, fleet):
        assert TARGET_LABELS | {"service", "node", "model_name"} <= set(labels), labels
        assert labels["node"] == nodes[pod] and labels["service"] == "sglang-qwen"
        if labels["__name__"] == "sglang:num_running_reqs":
            assert labels["tp_rank"] == "0"


def test_dcgm_by_gpu_operator_renames_the_workload_labels_exported(scenario: Scenario) -> None:
    assert scenario.truth is not None
    temps = {s["UUID"]: s for s in scraped(scenario) if s["__name__"] == "DCGM_FI_DEV_GPU_TEMP"}
    for fleet in scenario.truth.fleets:
        for pod in fleet.pods:
            for gpu in pod.gpus:
                labels = temps[gpu.uuid]
                assert labels["Hostname"] == gpu.node and labels["gpu"] == str(gpu.index)
                assert labels["exported_pod"] == pod.name and labels["exported_namespace"] == fleet.namespace
                assert (
                    labels["pod"].startswith("nvidia-dcgm-exporter-")
                    and labels["namespace"] == "gpu-operator"
                )
                assert labels["job"] == "nvidia-dcgm-exporter" and "node" not in labels
    assert scenario.truth.idle_gpus
    for gpu in scenario.truth.idle_gpus:
        labels = temps[gpu.uuid]
        assert "exported_pod" not in labels and "exported_namespace" not in labels
        assert labels["pod"].startswith("nvidia-dcgm-exporter-") and labels["Hostname"] == gpu.node


def test_kube_prometheus_stack_puts_its_own_pod_on_deployment_series(scenario: Scenario) -> None:
    series = scraped(scenario)
    spec = [
        s for s in series if s["__name__"] == "kube_deployment_spec_replicas" and s["deployment"] == "vllm"
    ]
    assert len(spec) == 1
    assert spec[0]["pod"].startswith("kube-prometheus-stack-kube-state-metrics-")
    assert spec[0]["namespace"] == "llm" and spec[0]["job"] == "kube-state-metrics"
    assert spec[0]["container"] == "kube-state-metrics"


def test_kube_pod_info_joins_engine_instances_to_pods_and_owners(scenario: Scenario) -> None:
    assert scenario.truth is not None
    series = scraped(scenario)
    info = {s["pod"]: s for s in series if s["__name__"] == "kube_pod_info"}
    owners = {s["pod"]: s for s in series if s["__name__"] == "kube_pod_owner"}
    replicasets = {s["replicaset"]: s for s in series if s["__name__"] == "kube_replicaset_owner"}
    for fleet in scenario.truth.fleets:
        for pod in fleet.pods:
            assert info[pod.name]["pod_ip"] == pod.ip and info[pod.name]["node"] == pod.node
            if pod.address:
                engine = next(labels for labels, name in engine_series(scenario, fleet) if name == pod.name)
                assert engine["instance"].split(":")[0] == info[pod.name]["pod_ip"]
            owner = owners[pod.name]
            if fleet.kind == "Deployment":
                assert (owner["owner_kind"], owner["owner_name"]) == ("ReplicaSet", fleet.replicaset)
                assert replicasets[owner["owner_name"]]["owner_name"] == fleet.name
            else:
                set_name = fleet.name if pod.role == "engine" else f"{fleet.name}-{pod.replica}"
                assert (owner["owner_kind"], owner["owner_name"]) == ("StatefulSet", set_name)


def test_the_router_labels_backends_by_server_only(scenario: Scenario) -> None:
    fleet = truth(scenario, "vllm")
    router = [
        s
        for s in scraped(scenario)
        if s["job"] == "vllm-router-service" and s["__name__"].startswith("vllm:")
    ]
    assert {s["server"] for s in router} == {f"http://{p.address}" for p in fleet.pods}
    assert all("model_name" not in s for s in router)


def _golden(real: Path, name: str) -> dict[str, object]:
    config = yaml.safe_load((real / name).read_text(encoding="utf-8"))
    job_config: dict[str, object] = config["scrape_configs"][0]
    rules = yaml.safe_dump(job_config["relabel_configs"]).replace("$(SHARD)", "0")
    job_config["relabel_configs"] = yaml.safe_load(rules)
    return job_config


def test_generated_jobs_follow_the_operators_golden_configs_rule_for_rule(
    scenario: Scenario, real: Path
) -> None:
    """The golden files' monitors, generated here: the relabel chains match exactly (a
    matchExpressions `alpha In (beta, gamma)` compiles to the keep a matchLabels value
    `beta|gamma` gives)."""
    assert scenario.cluster is not None
    cases = [
        (
            "scrape-prometheus-operator-servicemonitor-generated-config.golden.yaml",
            Monitor("ServiceMonitor", "default", "test", (("alpha", "beta|gamma"),), "web", False, "golden"),
        ),
        (
            "scrape-prometheus-operator-podmonitor-generated-config.golden.yaml",
            Monitor(
                "PodMonitor", "default", "defaultPodMonitor", (("group", "group1"),), "web", False, "golden"
            ),
        ),
    ]
    for name, monitor in cases:
        golden = _golden(real, name)
        ours = job(scenario.cluster, monitor, 30.0)
        assert ours["job_name"] == golden["job_name"]
        assert ours["honor_labels"] == golden["honor_labels"]
        assert ours["relabel_configs"] == golden["relabel_configs"], name


def test_the_helm_dcgm_and_kube_prometheus_shapes(scenario: Scenario) -> None:
    """The other variants, scraped only: dcgm-exporter's chart with honorLabels true keeps the
    workload's own `pod`/`namespace`; kube-prometheus drops the target's pod, service,
    endpoint and namespace, so `kube_deployment_*` carry no `pod` at all."""
    require_prometheus_binaries()
    fleet_specs = specs(2, replicas=2)
    cluster = free_cluster(fleet_specs, dcgm="dcgm-exporter-helm", ksm="kube-prometheus", router=False)
    history = build_history(cluster, tell_all(fleet_specs, "75m", "60s"))
    result = scrape(cluster, history)
    match(history, result)
    temps = {s["UUID"]: s for s in result.series if s["__name__"] == "DCGM_FI_DEV_GPU_TEMP"}
    for pod in cluster.pods:
        for gpu in pod.gpus:
            labels = temps[gpu.uuid]
            assert (labels["pod"], labels["namespace"]) == (pod.name, pod.namespace), labels
            assert labels["container"] == pod.container.name and labels["job"] == "dcgm-exporter"
            assert not any(k.startswith("exported_") for k in labels)
    idle = [g for g in cluster.gpus if cluster.holder(g) is None]
    assert idle and all("pod" not in temps[g.uuid] and "namespace" not in temps[g.uuid] for g in idle)
    homes = {"vllm": "llm", "kube-state-metrics": "monitoring"}
    deployments = [s for s in result.series if s["__name__"].startswith("kube_deployment_")]
    assert {s["deployment"] for s in deployments} == set(homes)
    for s in deployments:
        assert not {"pod", "service", "endpoint"} & set(s), s
        assert s["job"] == "kube-state-metrics" and s["container"] == "kube-rbac-proxy-main"
        assert s["namespace"] == homes[s["deployment"]]
