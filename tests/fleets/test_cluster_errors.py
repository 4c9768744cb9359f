"""The harness refuses bad input loudly and names what was wrong, never dropping it quietly."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from tools.cluster.exposition import family_of
from tools.cluster.harness import match, predict
from tools.cluster.history import Exposed, Rows
from tools.cluster.layout import layout
from tools.cluster.model import ClusterError, FleetSpec
from tools.cluster.scenarios import Scenario, specs


def test_a_synthesised_series_matching_no_scraped_label_set_is_named(scenario: Scenario) -> None:
    assert scenario.history is not None and scenario.scraped is not None and scenario.cluster is not None
    history = scenario.history
    target = scenario.cluster.workloads[0].engine_pods[0].address
    stray = Exposed(
        target,
        "vllm:num_requests_running",
        (("engine", "0"), ("model_name", "never-served")),
        np.ones(history.n),
        "a series the test made up",
    )
    with pytest.raises(ClusterError) as caught:
        match(replace(history, series=(*history.series, stray)), scenario.scraped)
    message = str(caught.value)
    assert 'vllm:num_requests_running{engine="0",model_name="never-served"}' in message
    assert "a series the test made up" in message and "1 synthesised series" in message


def test_a_synthesised_series_of_a_target_nobody_scraped_is_named(scenario: Scenario) -> None:
    assert scenario.history is not None and scenario.scraped is not None
    history = scenario.history
    stray = Exposed(
        "127.0.0.99:8000", "vllm:num_requests_waiting", (), np.ones(history.n), "an unscraped pod"
    )
    with pytest.raises(
        ClusterError, match=r"vllm:num_requests_waiting\{\}.*127\.0\.0\.99:8000 was not scraped"
    ):
        match(replace(history, series=(*history.series, stray)), scenario.scraped)


def test_a_scraped_series_without_history_is_named(scenario: Scenario) -> None:
    assert scenario.history is not None and scenario.scraped is not None
    history = scenario.history
    dropped = next(s for s in history.series if s.name == "DCGM_FI_DEV_XID_ERRORS")
    kept = tuple(s for s in history.series if s is not dropped)
    with pytest.raises(
        ClusterError, match=r"1 scraped series have no synthesised history: DCGM_FI_DEV_XID_ERRORS"
    ):
        match(replace(history, series=kept), scenario.scraped)


def test_two_series_on_one_label_set_are_refused_unless_merged_without_overlap() -> None:
    rows = Rows(4)
    nan = np.nan
    rows.add("t:1", "DCGM_FI_DEV_XID_ERRORS", (("gpu", "0"),), np.array([0.0, 0.0, nan, nan]), "code 0")
    rows.add(
        "t:1",
        "DCGM_FI_DEV_XID_ERRORS",
        (("gpu", "0"),),
        np.array([nan, nan, 79.0, 79.0]),
        "code 79",
        merge=True,
    )
    assert rows.of("t:1")[0].values.tolist() == [0.0, 0.0, 79.0, 79.0]
    with pytest.raises(
        ClusterError, match=r"code 13 and code 79 both become DCGM_FI_DEV_XID_ERRORS\{gpu=\"0\"\}"
    ):
        rows.add("t:1", "DCGM_FI_DEV_XID_ERRORS", (("gpu", "0"),), np.full(4, 13.0), "code 13", merge=True)
    rows.add("t:1", "DCGM_FI_DEV_GPU_TEMP", (("gpu", "0"),), np.full(4, 60.0), "first")
    with pytest.raises(ClusterError, match="second and first both become"):
        rows.add("t:1", "DCGM_FI_DEV_GPU_TEMP", (("gpu", "0"),), np.full(4, 61.0), "second")


def test_a_family_nobody_typed_is_refused() -> None:
    with pytest.raises(ValueError, match="no HELP/TYPE known for vllm:made_up_metric"):
        family_of("vllm:made_up_metric")
    assert family_of("vllm:time_to_first_token_seconds_bucket")[:2] == (
        "vllm:time_to_first_token_seconds",
        "histogram",
    )
    assert family_of("vllm:prompt_tokens_created")[1] == "gauge"


def test_predict_follows_prometheus_honor_labels_rules() -> None:
    target = {"pod": "dcgm-x", "namespace": "gpu-operator", "job": "dcgm", "instance": "1.2.3.4:9400"}
    busy = (("gpu", "0"), ("pod", "vllm-0"), ("namespace", "llm"))
    idle = (("gpu", "1"), ("pod", ""), ("namespace", ""))
    assert predict(busy, target, honor=False) == {
        "gpu": "0",
        "exported_pod": "vllm-0",
        "exported_namespace": "llm",
        **target,
    }
    assert predict(idle, target, honor=False) == {"gpu": "1", **target}
    assert predict(busy, target, honor=True) == {**target, "gpu": "0", "pod": "vllm-0", "namespace": "llm"}
    assert predict(idle, target, honor=True) == {"gpu": "1", "job": "dcgm", "instance": "1.2.3.4:9400"}
    twice = (("pod", "a"), ("exported_pod", "b"))
    assert predict(twice, {"pod": "t"}, honor=False) == {
        "pod": "t",
        "exported_pod": "b",
        "exported_exported_pod": "a",
    }


def test_layout_refuses_what_it_cannot_place() -> None:
    with pytest.raises(ValueError, match="unknown kind 'DaemonSet'"):
        FleetSpec("x", "llm", "DaemonSet", "vllm", "m", 1, "kubeai")
    with pytest.raises(ValueError, match="only a LeaderWorkerSet has groups"):
        FleetSpec("x", "llm", "Deployment", "vllm", "m", 1, "kubeai", group_size=2)
    with pytest.raises(ValueError, match="needs 16 GPUs, more than a node has"):
        layout([FleetSpec("x", "llm", "Deployment", "vllm", "m", 1, "kubeai", gpus_per_pod=16)], subnet=42)
    with pytest.raises(ValueError, match="distinct namespace/name"):
        layout([*specs(1), *specs(1)], subnet=42)


def test_layout_names_pods_as_their_controllers_do() -> None:
    cluster = layout(specs(8, replicas=2), subnet=42)
    ips = [p.ip for p in cluster.pods]
    assert len(set(ips)) == len(ips) and all(ip.startswith("127.42.") for ip in ips)
    lws = cluster.workload("llm/vllm-70b")
    assert [p.name for p in lws.engine_pods] == ["vllm-70b-0", "vllm-70b-1"]
    assert [(p.name, p.owner.name) for p in lws.worker_pods] == [
        ("vllm-70b-0-1", "vllm-70b-0"),
        ("vllm-70b-1-1", "vllm-70b-1"),
    ]
    deployment = cluster.workload("llm-2/vllm")
    for pod in deployment.engine_pods:
        name, hash_, suffix = pod.name.rsplit("-", 2)
        assert name == "vllm" and pod.owner.name == f"vllm-{hash_}" and len(suffix) == 5
        assert not set(hash_ + suffix) & set("aeiou013")
    assert any(cluster.holder(g) is None for g in cluster.gpus)
