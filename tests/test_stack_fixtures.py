"""The serving-stack fixtures (`fixtures/stack-*`) hold what each stack really exports.

Written by tools/incidents_stacks.py over tools/rawstacks.py and tools/rawstacks_native.py:
a signal-level fixture `stack-X` and its raw twin `stack-X-raw` per stack. Checked here
without a server: the generator's invariants (monotone integer counters, cumulative buckets,
+Inf equal to `_count`), the Prometheus Operator scrape labels and the kube-state-metrics
joins every raw fixture carries, and per stack its real metric names, label spellings and
bucket edges, and NOT the plain vLLM names where the stack renames them. The files are read
as YAML and promtool notation only, so a stack the product cannot read yet still gets its
data checked; the replay through a real Prometheus is tests/test_raw_fixtures.py's.
"""

from __future__ import annotations

import math
import re
from collections import defaultdict
from collections.abc import Iterator
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path

import numpy as np
import pytest
import yaml

from signals.notation import parse_values
from signals.timeparse import parse_duration

ROOT = Path(__file__).resolve().parent.parent
STACKS = ("ray-serve", "dynamo", "kserve", "tgi", "trtllm", "triton", "vllm-033", "sglang", "dcgm")
FLEETS = {
    "ray-serve": "ray/meta-llama/Llama-3.1-8B-Instruct@RayServe/raycluster-llm/llm-app",
    "dynamo": "dynamo/Qwen/Qwen3-32B@Dynamo/llm_prod",
    "kserve": "serving/llama-chat@InferenceService/llama-chat",
    "tgi": "llm@Deployment/tgi-mistral-7b",
    "trtllm": "llm/meta-llama/Llama-3.1-70B-Instruct@Deployment/trtllm-llama",
    "triton": "llm/tensorrt_llm@Deployment/triton-llama",
    "vllm-033": "llm/Qwen/Qwen3-8B@Deployment/vllm-qwen",
    "sglang": "llm/meta-llama/Llama-3.1-8B-Instruct@Deployment/sglang-llama",
    "dcgm": "llm/meta-llama/Llama-3.1-8B-Instruct@Deployment/vllm-llama",
}
CAUSES = {
    "ray-serve": "kv_pressure",
    "dynamo": "traffic_burst",
    "kserve": "prefix_cache_miss",
    "tgi": "traffic_burst",
    "trtllm": "prefix_cache_miss",
    "triton": "traffic_burst",
    "vllm-033": "traffic_burst",
    "sglang": "traffic_burst",
    "dcgm": "gpu_throttling",
}
VLLM_TTFT = "0.001 0.005 0.01 0.02 0.04 0.06 0.08 0.1 0.25 0.5 0.75 1.0 2.5 5.0 7.5 10.0 20.0 40.0 80.0 160.0"
VLLM_TTFT += " 640.0 2560.0"
# Counters whose names do not say so (TGI, Triton and DCGM write them without `_total`).
COUNTERS = re.compile(
    r"(_total|_bucket|_count)$|^tgi_request_(count|success|failure)$|^tgi_batch_inference_(count|success)$"
    r"|^nv_inference_(request_success|request_failure|count|exec_count|request_duration_us|queue_duration_us)$"
    r"|^DCGM_FI_DEV_(TOTAL_ENERGY_CONSUMPTION|PCIE_REPLAY_COUNTER|(UN)?CORRECTABLE_REMAPPED_ROWS)$"
)
_SERIES = re.compile(r"^([A-Za-z_:][A-Za-z0-9_:]*)(?:\{(.*)\})?$")
_LABEL = re.compile(r'([A-Za-z_][A-Za-z0-9_]*)="((?:[^"\\]|\\.)*)"')


@dataclass(frozen=True)
class Row:
    metric: str
    labels: dict[str, str]
    values: np.ndarray


@dataclass(frozen=True)
class Raw:
    doc: dict[str, object]
    rows: list[Row]
    lines: int
    by_metric: dict[str, list[Row]] = field(default_factory=dict)

    def of(self, metric: str, **match: str) -> list[Row]:
        return [
            r for r in self.index().get(metric, []) if all(r.labels.get(k) == v for k, v in match.items())
        ]

    def index(self) -> dict[str, list[Row]]:
        if not self.by_metric:
            for row in self.rows:
                self.by_metric.setdefault(row.metric, []).append(row)
        return self.by_metric

    def exact(self, metric: str, labels: dict[str, str]) -> Row:
        """The one series of `metric` with exactly these labels."""
        [row] = [r for r in self.index().get(metric, []) if r.labels == labels]
        return row

    def names(self) -> set[str]:
        return {r.metric for r in self.rows}

    def one(self, metric: str, **match: str) -> Row:
        found = self.of(metric, **match)
        assert len(found) == 1, (metric, match, len(found))
        return found[0]


def _parse(path: Path) -> Raw:
    text = path.read_text(encoding="utf-8")
    doc = yaml.safe_load(text)
    rows = []
    for item in doc["input_series"]:
        m = _SERIES.match(item["series"])
        assert m, item["series"]
        labels = {k: v.replace('\\"', '"').replace("\\\\", "\\") for k, v in _LABEL.findall(m.group(2) or "")}
        rows.append(Row(m.group(1), labels, parse_values(str(item["values"]))))
    width = max(len(r.values) for r in rows)
    padded = [
        Row(r.metric, r.labels, np.pad(r.values, (0, width - len(r.values)), constant_values=np.nan))
        for r in rows
    ]
    return Raw(doc, padded, text.count("\n"))


@cache
def raw(stack: str) -> Raw:
    return _parse(ROOT / "fixtures" / f"stack-{stack}-raw.yaml")


def engine_pods(r: Raw, prefix: tuple[str, ...]) -> set[str]:
    return {row.labels["pod"] for row in r.rows if row.metric.startswith(prefix)}


def increase(values: np.ndarray, i0: int, i1: int) -> float:
    """A counter's increase between two steps (its samples there, gaps filled from before)."""
    finite = np.where(np.isfinite(values))[0]
    at = [values[finite[finite <= i].max()] for i in (i0, i1)]
    return float(at[1] - at[0])


# ------------------------------------------------------------------ every stack, generator invariants


@pytest.mark.parametrize("stack", STACKS)
def test_counters_are_monotone_integers_and_histograms_cumulative(stack: str) -> None:
    r = raw(stack)
    for row in r.rows:
        if not COUNTERS.search(row.metric):
            continue
        finite = row.values[np.isfinite(row.values)]
        assert finite.size, row
        assert np.all(finite == np.round(finite)), f"{row.metric}{row.labels}: a counter is an integer"
        for d in np.flatnonzero(np.diff(finite) < 0):
            assert finite[d + 1] <= 0.05 * max(finite[d], 1.0), f"{row.metric}{row.labels} goes down at {d}"
    groups: dict[tuple[str, tuple[tuple[str, str], ...]], list[tuple[float, np.ndarray]]] = defaultdict(list)
    for row in r.rows:
        if row.metric.endswith("_bucket"):
            rest = tuple(sorted((k, v) for k, v in row.labels.items() if k != "le"))
            groups[row.metric.removesuffix("_bucket"), rest].append((float(row.labels["le"]), row.values))
    assert groups
    for (base, rest), buckets in groups.items():
        buckets.sort(key=lambda b: b[0])
        assert buckets[-1][0] == math.inf, f"{base}{dict(rest)} has no +Inf bucket"
        stack_ = np.vstack([b[1] for b in buckets])
        ok = np.all(np.isfinite(stack_), axis=0)
        assert np.all(np.diff(stack_[:, ok], axis=0) >= 0), f"{base}{dict(rest)}: buckets not cumulative"
        count = r.exact(f"{base}_count", dict(rest))
        np.testing.assert_array_equal(stack_[-1][ok], count.values[ok])
        r.exact(f"{base}_sum", dict(rest))


@pytest.mark.parametrize("stack", STACKS)
def test_every_series_carries_its_scrape_and_every_engine_pod_joins_kube_state_metrics(stack: str) -> None:
    r = raw(stack)
    info = {(row.labels["namespace"], row.labels["pod"]): row.labels for row in r.of("kube_pod_info")}
    owners = {(row.labels["namespace"], row.labels["pod"]): row.labels for row in r.of("kube_pod_owner")}
    rs_owner = {
        (row.labels["namespace"], row.labels["replicaset"]): row.labels
        for row in r.of("kube_replicaset_owner")
    }
    for row in r.rows:
        labels = row.labels
        assert {"namespace", "job", "instance"} <= labels.keys(), (row.metric, labels)
        assert re.fullmatch(r"\d+\.\d+\.\d+\.\d+:\d+", labels["instance"]), labels["instance"]
        if labels["job"] == "kubernetes-pods":
            assert "container" not in labels and "service" not in labels  # an annotation scrape
        else:
            assert {"container", "endpoint"} <= labels.keys(), (row.metric, labels)
        if row.metric.startswith(("kube_", "DCGM_")) or "pod" not in labels:
            continue
        key = (labels["namespace"], labels["pod"])
        assert key in info, f"{row.metric}: pod {key} has no kube_pod_info"
        assert info[key]["pod_ip"] == labels["instance"].split(":")[0], (row.metric, key)
        owner = owners[key]
        if owner["owner_kind"] == "ReplicaSet":
            assert rs_owner[labels["namespace"], owner["owner_name"]]["owner_kind"] == "Deployment"
    for row in r.of("kube_pod_info"):
        assert row.labels["job"] == "kube-state-metrics" and row.labels["node"] and row.labels["pod_ip"]
    deployments = {row.labels["owner_name"] for row in r.of("kube_replicaset_owner")}
    for metric in (
        "kube_deployment_spec_replicas",
        "kube_deployment_status_replicas_ready",
        "kube_deployment_status_replicas_updated",
    ):
        assert {row.labels["deployment"] for row in r.of(metric)} == deployments


@pytest.mark.parametrize("stack", STACKS)
def test_the_pair_names_its_fleet_cause_and_verdict(stack: str) -> None:
    r = raw(stack)
    doc = r.doc
    assert doc["level"] == "raw" and doc["name"] == f"stack-{stack}-raw"
    assert doc["interval"] in ("15s", "30s")
    assert r.lines < 3500, f"{r.lines} lines"
    width = max(len(row.values) for row in r.rows)
    assert (width - 1) * parse_duration(str(doc["interval"])) >= 70 * 60
    expect = doc["expect"]
    assert isinstance(expect, dict)
    assert expect["fleet"] == FLEETS[stack]
    assert expect["cause"] == CAUSES[stack] and expect["verdict"] == "cause"
    assert "scale_out" in expect["forbidden"] and "evidence" not in expect
    twin = yaml.safe_load((ROOT / "fixtures" / f"stack-{stack}.yaml").read_text(encoding="utf-8"))
    assert "level" not in twin and twin["symptom"] == doc["symptom"] and twin["at"] == doc["at"]
    assert twin["expect"] == {k: v for k, v in expect.items() if k != "fleet"}


@pytest.mark.parametrize("stack", ["triton", "trtllm"])
def test_the_generator_writes_the_bundled_files_again(
    stack: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import tools.registry
    from tools.make_fixtures import load_incidents

    load_incidents()
    monkeypatch.setattr(tools.registry, "OUT", tmp_path)
    tools.registry.INCIDENTS[f"stack-{stack}"]()
    for name in (f"stack-{stack}", f"stack-{stack}-raw"):
        written = (tmp_path / f"{name}.yaml").read_bytes()
        assert written == (ROOT / "fixtures" / f"{name}.yaml").read_bytes(), name


# ------------------------------------------------------------------ per stack


def _hexes(values: Iterator[str], length: int) -> bool:
    return all(re.fullmatch(f"[0-9a-f]{{{length}}}", v) for v in values)


def test_ray_serve_renames_vllm_and_tags_every_engine_series_with_ray_s_labels() -> None:
    r = raw("ray-serve")
    names = r.names()
    assert not any(n.startswith("vllm:") for n in names)
    for name in (
        "num_requests_running",
        "num_requests_waiting",
        "kv_cache_usage_perc",
        "time_to_first_token_seconds_bucket",
        "inter_token_latency_seconds_bucket",
        "e2e_request_latency_seconds_bucket",
        "request_queue_time_seconds_bucket",
        "request_success_total",
        "prompt_tokens_total",
        "generation_tokens_total",
        "num_preemptions_total",
        "prefix_cache_queries_total",
        "prefix_cache_hits_total",
        "request_prompt_tokens_bucket",
    ):
        assert f"ray_vllm_{name}" in names, name
    engines = [row for row in r.rows if row.metric.startswith("ray_vllm_")]
    for row in engines:
        labels = row.labels
        assert labels["Component"] == "core_worker" and labels["Version"] == "2.60.0"
        assert (
            labels["SessionName"].startswith("session_2026-") and labels["ray_io_cluster"] == "raycluster-llm"
        )
        assert labels["NodeAddress"] == labels["instance"].split(":")[0]
        assert not {"deployment", "replica", "application"} & labels.keys()
        assert labels["ReplicaId"].split("#")[0] in ("llm-app", "embed-app")
    assert _hexes((row.labels["WorkerId"] for row in engines), 56)  # a Ray WorkerID is 28 bytes
    assert all("model_name" in row.labels for row in engines if row.metric != "ray_vllm_cache_config_info")
    models = {
        row.labels["ReplicaId"].split("#")[0]: row.labels["model_name"]
        for row in engines
        if "model_name" in row.labels
    }
    assert models == {"llm-app": "meta-llama/Llama-3.1-8B-Instruct", "embed-app": "Qwen/Qwen3-Embedding-0.6B"}
    replicas = defaultdict(set)
    for row in r.of("ray_vllm_num_requests_running"):
        replicas[row.labels["ReplicaId"].split("#")[0]].add(row.labels["ReplicaId"])
    assert {k: len(v) for k, v in replicas.items()} == {"llm-app": 4, "embed-app": 2}
    worker_of = {
        row.labels["ReplicaId"].rsplit("#", 1)[1]: row.labels["WorkerId"]
        for row in r.of("ray_vllm_kv_cache_usage_perc")
    }
    for row in r.of("ray_serve_replica_processing_queries"):
        assert row.labels["WorkerId"] == worker_of[row.labels["replica"]]  # the replica actor's own worker
    assert {row.labels["replica"] for row in r.of("ray_serve_deployment_replica_healthy")} == worker_of.keys()
    for metric, keys in (
        ("ray_serve_num_http_requests_total", {"route", "application", "method", "status_code"}),
        ("ray_serve_num_http_error_requests_total", {"route", "application", "error_code", "method"}),
        ("ray_serve_http_request_latency_ms_bucket", {"route", "application", "status_code", "le"}),
        ("ray_serve_deployment_queued_queries", {"application", "deployment"}),
        ("ray_serve_autoscaling_target_replicas", {"application", "deployment"}),
    ):
        rows = r.of(metric)
        assert {row.labels["application"] for row in rows} == {"llm-app", "embed-app"}, metric
        assert all(keys <= row.labels.keys() for row in rows), metric
    assert {row.labels["owner_kind"] for row in r.of("kube_pod_owner")} == {"RayCluster"}


def test_dynamo_frontend_and_workers_spell_the_model_and_namespace_their_own_ways() -> None:
    r = raw("dynamo")
    frontend = [row for row in r.rows if row.metric.startswith("dynamo_frontend_")]
    for name in (
        "time_to_first_token_seconds_bucket",
        "inter_token_latency_seconds_bucket",
        "request_duration_seconds_bucket",
        "queued_requests",
        "inflight_requests",
        "requests_total",
        "model_rejection_total",
        "input_sequence_tokens_bucket",
        "output_sequence_tokens_bucket",
        "output_tokens_total",
    ):
        assert r.of(f"dynamo_frontend_{name}", model="qwen/qwen3-32b"), name
    assert all(row.labels["dynamo_namespace"] == "llm-prod" for row in frontend)
    assert {row.labels["model"] for row in r.of("dynamo_frontend_model_context_length")} == {"Qwen/Qwen3-32B"}
    ttft = sorted(
        float(row.labels["le"]) for row in r.of("dynamo_frontend_time_to_first_token_seconds_bucket")
    )
    assert ttft[:4] == [0.0, 0.0022, 0.0047, 0.01] and ttft[-2:] == [480.0, math.inf]
    assert "1" in {row.labels["le"] for row in r.of("dynamo_frontend_time_to_first_token_seconds_bucket")}
    assert {row.labels["status"] for row in r.of("dynamo_frontend_requests_total")} == {"success", "error"}
    workers = [row for row in r.rows if row.metric.startswith("vllm:")]
    assert workers and all(
        row.labels["dynamo_namespace"] == "llm_prod"
        and row.labels["model"] == "Qwen/Qwen3-32B"
        and row.labels.get("model_name", "Qwen/Qwen3-32B") == "Qwen/Qwen3-32B"  # not on config info
        for row in workers
    )
    pools = defaultdict(set)
    for row in workers:
        pools[row.labels["dynamo_component"]].add(row.labels["pod"])
    assert {k: len(v) for k, v in pools.items()} == {"prefill": 2, "backend": 3}
    assert _hexes((row.labels["worker_id"] for row in workers), 16)
    for row in r.of("dynamo_component_gpu_cache_usage_percent"):
        assert {"model", "dynamo_component", "dp_rank"} <= row.labels.keys()
    assert r.one("dynamo_planner_num_prefill_replicas").values[0] == 2
    assert r.one("dynamo_planner_num_decode_replicas").values[0] == 3
    decode_kv = np.vstack(
        [row.values for row in r.of("vllm:kv_cache_usage_perc", dynamo_component="backend")]
    )
    assert 0.8 < np.nanmean(decode_kv) < 0.92 and np.nanmax(decode_kv) < 0.99  # high by design, never full


def test_kserve_isvcs_share_mnt_models_and_are_told_apart_by_revision_and_pod_labels() -> None:
    r = raw("kserve")
    engines = [row for row in r.rows if row.metric.startswith("vllm:")]
    assert all(row.labels["job"] == "kubernetes-pods" for row in engines)
    by_model = defaultdict(set)
    for row in engines:
        if "model_name" in row.labels:  # vLLM's config info names no model
            by_model[row.labels["model_name"]].add(row.labels.get("service_name", "-"))
    assert by_model == {
        "/mnt/models": {"llama-chat-predictor", "llama-batch-predictor"},
        "Qwen/Qwen3-8B": {"-"},
    }
    revisions = defaultdict(set)
    for row in r.of("vllm:num_requests_running", model_name="/mnt/models"):
        assert row.labels["configuration_name"] == row.labels["service_name"]
        revisions[row.labels["revision_name"]].add(row.labels["pod"])
    assert {k: len(v) for k, v in revisions.items()} == {
        "llama-chat-predictor-00002": 2,
        "llama-chat-predictor-00001": 1,
        "llama-batch-predictor-00002": 2,
    }
    deployments = {row.labels["owner_name"] for row in r.of("kube_replicaset_owner")}
    assert deployments == {
        "llama-chat-predictor-00001-deployment",
        "llama-chat-predictor-00002-deployment",
        "llama-batch-predictor-00002-deployment",
        "qwen-llmd-kserve",
    }
    labels = {row.labels["pod"]: row.labels for row in r.of("kube_pod_labels")}
    isvc: dict[str, int] = defaultdict(int)
    for pod_labels in labels.values():
        isvc[pod_labels.get("label_serving_kserve_io_inferenceservice", "")] += 1
    assert isvc == {"llama-chat": 3, "llama-batch": 2, "": 2}
    llmd = [p for p in labels.values() if p.get("label_app_kubernetes_io_name") == "qwen-llmd"]
    assert len(llmd) == 2 and all(
        p["label_kserve_io_component"] == "workload" and p["label_llm_d_ai_role"] == "decode" for p in llmd
    )


def test_tgi_writes_counters_without_total_no_model_no_ttft_on_its_own_edges() -> None:
    r = raw("tgi")
    names = {n for n in r.names() if n.startswith("tgi_")}
    for name in (
        "tgi_request_count",
        "tgi_request_success",
        "tgi_request_failure",
        "tgi_queue_size",
        "tgi_batch_current_size",
        "tgi_batch_current_max_tokens",
        "tgi_batch_max_total_tokens",
        "tgi_request_duration_bucket",
        "tgi_request_queue_duration_bucket",
        "tgi_request_mean_time_per_token_duration_bucket",
        "tgi_request_input_length_bucket",
        "tgi_request_generated_tokens_bucket",
        "tgi_batch_forward_duration_bucket",
    ):
        assert name in names, name
    assert not any(n.endswith("_total") for n in names)
    assert not any("first_token" in n or "ttft" in n for n in r.names())
    assert not any(n.startswith("vllm:") for n in r.names())
    assert all("model" not in row.labels and "model_name" not in row.labels for row in r.rows)
    assert {row.labels["err"] for row in r.of("tgi_request_failure")} == {"validation", "generation"}
    edges = [row.labels["le"] for row in r.of("tgi_request_duration_bucket") if row.labels["le"] != "+Inf"]
    assert len(set(edges)) == 35 and "0.00015000000000000001" in edges and "1.122274146401882" in edges
    assert {row.labels["method"] for row in r.of("tgi_batch_forward_duration_bucket")} == {
        "prefill",
        "decode",
    }
    pod = r.of("tgi_request_input_length_bucket")[0].labels["pod"]
    assert len(r.of("tgi_request_input_length_bucket", pod=pod)) == 101


def test_trtllm_serve_exports_its_own_names_on_vllm_s_edges() -> None:
    r = raw("trtllm")
    names = r.names()
    for name in (
        "time_to_first_token_seconds_bucket",
        "time_per_output_token_seconds_bucket",
        "e2e_request_latency_seconds_bucket",
        "request_queue_time_seconds_bucket",
        "request_success_total",
        "num_requests_waiting",
        "num_requests_running",
        "kv_cache_utilization",
        "kv_cache_hit_rate",
    ):
        assert f"trtllm_{name}" in names, name
    assert not any(n.startswith("vllm:") for n in names)
    engines = [row for row in r.rows if row.metric.startswith("trtllm_")]
    assert all(row.labels["engine_type"] == "trtllm" for row in engines)
    assert {row.labels["model_name"] for row in engines} == {"meta-llama/Llama-3.1-70B-Instruct"}
    pod = engines[0].labels["pod"]
    edges = [row.labels["le"] for row in r.of("trtllm_time_to_first_token_seconds_bucket", pod=pod)]
    assert sorted((e for e in edges if e != "+Inf"), key=float) == VLLM_TTFT.split() and "+Inf" in edges
    for metric in ("trtllm_kv_cache_utilization", "trtllm_kv_cache_hit_rate"):
        values = np.concatenate([row.values for row in r.of(metric)])
        assert np.nanmin(values) >= 0 and np.nanmax(values) <= 1
    hit = np.vstack([row.values for row in r.of("trtllm_kv_cache_hit_rate")])
    assert np.nanmean(hit[:, :100]) > 0.5 > 0.25 > np.nanmean(hit[:, -40:])  # the cache miss


def test_triton_reports_per_model_of_its_repository_and_the_backend_s_gauges() -> None:
    r = raw("triton")
    models = {"ensemble", "preprocessing", "tensorrt_llm", "postprocessing"}
    for metric in (
        "nv_inference_request_success",
        "nv_inference_request_failure",
        "nv_inference_count",
        "nv_inference_request_duration_us",
        "nv_inference_queue_duration_us",
        "nv_inference_pending_request_count",
    ):
        assert {row.labels["model"] for row in r.of(metric)} == models, metric
        assert {row.labels["version"] for row in r.of(metric)} == {"1"}
    first = r.of("nv_inference_first_response_histogram_ms_bucket")
    assert {row.labels["model"] for row in first} == {"ensemble", "tensorrt_llm"}  # decoupled models only
    assert {row.labels["le"] for row in first} == {"100", "500", "2000", "5000", "+Inf"}
    types = {row.labels["request_type"] for row in r.of("nv_trt_llm_request_metrics")}
    assert types == {"waiting", "context", "scheduled", "max", "active"}
    blocks = {row.labels["kv_cache_block_type"] for row in r.of("nv_trt_llm_kv_cache_block_metrics")}
    assert blocks == {"fraction", "used", "free", "max", "tokens_per"}
    assert all(row.labels["model"] == "tensorrt_llm" for row in r.of("nv_trt_llm_request_metrics"))
    assert not any(n.startswith(("vllm:", "trtllm_")) for n in r.names())


def test_vllm_033_splits_waiting_by_reason_and_serves_prefix_hits_from_the_offload_tier() -> None:
    r = raw("vllm-033")
    names = r.names()
    for name in (
        "vllm:num_requests_waiting_by_reason",
        "vllm:admission_rejections_total",
        "http_requests_total",
        "vllm:external_prefix_cache_queries_total",
        "vllm:external_prefix_cache_hits_total",
        "vllm:prompt_tokens_by_source_total",
        "vllm:spec_decode_num_draft_tokens_total",
        "vllm:spec_decode_num_accepted_tokens_total",
        "vllm:engine_sleep_state",
    ):
        assert name in names, name
    assert "vllm:gpu_cache_usage_perc" not in names
    assert not any(n.startswith("vllm:time_per_output_token_seconds") for n in names)
    n = len(r.rows[0].values)
    pods = engine_pods(r, ("vllm:",))
    for pod in pods:
        waiting = r.one("vllm:num_requests_waiting", pod=pod).values
        by_reason = [
            r.one("vllm:num_requests_waiting_by_reason", pod=pod, reason=x).values
            for x in ("capacity", "deferred")
        ]
        ok = np.isfinite(waiting)
        np.testing.assert_array_equal(by_reason[0][ok] + by_reason[1][ok], waiting[ok])
        states = {row.labels["sleep_state"]: row.values for row in r.of("vllm:engine_sleep_state", pod=pod)}
        assert np.nanmin(states["awake"]) == 1 and np.nanmax(states["weights_offloaded"]) == 0
        assert np.nanmax(states["discard_all"]) == 0
        prompt = increase(r.one("vllm:prompt_tokens_total", pod=pod).values, 0, n - 1)
        sources = sum(
            increase(row.values, 0, n - 1) for row in r.of("vllm:prompt_tokens_by_source_total", pod=pod)
        )
        assert abs(sources - prompt) <= 0.01 * prompt
    assert {row.labels["status"] for row in r.of("http_requests_total")} == {"2xx", "4xx", "5xx"}
    assert {row.labels["source"] for row in r.of("vllm:prompt_tokens_by_source_total")} == {
        "local_compute",
        "local_cache_hit",
        "external_kv_transfer",
    }

    def ratio(metrics: tuple[str, ...], i0: int, i1: int) -> float:
        hits = sum(increase(row.values, i0, i1) for m in metrics for row in r.of(m))
        return hits / sum(increase(row.values, i0, i1) for row in r.of("vllm:prefix_cache_queries_total"))

    before, after = (20, 150), (200, n - 1)  # the burst starts at minute 40 (step 160)
    local = ("vllm:prefix_cache_hits_total",)
    both = (*local, "vllm:external_prefix_cache_hits_total")
    assert ratio(local, *after) < 0.7 * ratio(local, *before)  # the burst evicts the GPU's prefixes
    assert abs(ratio(both, *after) - ratio(both, *before)) < 0.1 * ratio(
        both, *before
    )  # the tier serves them


def test_sglang_writes_every_scheduler_series_per_rank_and_the_queue_beside_its_priorities() -> None:
    r = raw("sglang")
    pods = engine_pods(r, ("sglang:",))
    for row in r.rows:
        if row.metric.startswith("sglang:") and "tp_rank" in row.labels:
            assert row.labels["engine_type"] == "unified" and row.labels["pp_rank"] == "0"
            other = "1" if row.labels["tp_rank"] == "0" else "0"
            twin = r.exact(row.metric, {**row.labels, "tp_rank": other})
            np.testing.assert_array_equal(twin.values, row.values)  # the same value on both ranks
    tokenizer = {row.labels.get("tp_rank") for row in r.of("sglang:prompt_tokens_total")}
    assert tokenizer == {None}  # the tokenizer manager's series are not per rank
    for pod in pods:
        for rank in ("0", "1"):
            queues = {
                row.labels.get("priority"): row.values
                for row in r.of("sglang:num_queue_reqs", pod=pod, tp_rank=rank)
            }
            assert set(queues) == {None, "0", "1"}  # the total has priority="", stored without the label
            ok = np.isfinite(queues[None])
            np.testing.assert_array_equal(queues["0"][ok] + queues["1"][ok], queues[None][ok])
    queue = sum(
        np.nansum(row.values)
        for row in r.of("sglang:num_queue_reqs", tp_rank="0")
        if "priority" not in row.labels
    )
    summed = sum(np.nansum(row.values) for row in r.of("sglang:num_queue_reqs"))
    assert summed == pytest.approx(4 * queue)  # a plain sum reads twice the queue, times two ranks


DCGM_DEFAULTS = {
    "SM_CLOCK",
    "MEM_CLOCK",
    "MEMORY_TEMP",
    "GPU_TEMP",
    "POWER_USAGE",
    "TOTAL_ENERGY_CONSUMPTION",
    "PCIE_REPLAY_COUNTER",
    "GPU_UTIL",
    "MEM_COPY_UTIL",
    "ENC_UTIL",
    "DEC_UTIL",
    "XID_ERRORS",
    "FB_FREE",
    "FB_USED",
    "FB_RESERVED",
    "NVLINK_BANDWIDTH_TOTAL",
    "VGPU_LICENSE_STATUS",
    "UNCORRECTABLE_REMAPPED_ROWS",
    "CORRECTABLE_REMAPPED_ROWS",
    "ROW_REMAP_FAILURE",
}
"""dcgm-exporter's etc/default-counters.csv, its uncommented DCGM_FI_DEV_* fields."""


def test_dcgm_defaults_show_a_power_brake_only_as_an_sm_clock_at_a_normal_temperature() -> None:
    r = raw("dcgm")
    fields = {n.removeprefix("DCGM_FI_DEV_") for n in r.names() if n.startswith("DCGM_FI_DEV_")}
    assert fields <= DCGM_DEFAULTS, fields - DCGM_DEFAULTS
    assert {
        "SM_CLOCK",
        "MEM_CLOCK",
        "GPU_TEMP",
        "POWER_USAGE",
        "GPU_UTIL",
        "FB_USED",
        "FB_FREE",
        "XID_ERRORS",
        "PCIE_REPLAY_COUNTER",
        "UNCORRECTABLE_REMAPPED_ROWS",
        "ROW_REMAP_FAILURE",
    } <= fields
    gpus = r.of("DCGM_FI_DEV_SM_CLOCK")
    assert {row.labels["exported_pod"] for row in gpus} == engine_pods(r, ("vllm:",))
    assert all(
        row.labels["namespace"] == "gpu-operator" and row.labels["exported_namespace"] == "llm"
        for row in gpus
    )
    before, after = slice(0, 150), slice(200, None)
    held = [row for row in gpus if np.nanmedian(row.values[after]) < 1500]
    assert len(held) == 1
    pod = held[0].labels["exported_pod"]
    assert np.nanmedian(held[0].values[before]) > 1900 and 1000 < np.nanmedian(held[0].values[after]) < 1200
    temp = r.one("DCGM_FI_DEV_GPU_TEMP", exported_pod=pod).values
    assert np.nanmax(temp) < 80  # no thermal cause
    power = r.one("DCGM_FI_DEV_POWER_USAGE", exported_pod=pod).values
    assert np.nanmedian(power[after]) < 0.75 * np.nanmedian(power[before])
    for row in gpus:
        if row is not held[0]:
            assert np.nanmin(row.values) >= 1900
