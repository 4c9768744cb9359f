"""Every serving stack, read in its own names and keyed by its own orchestrator (no server).

The mechanisms, each beside what it must not do: a catalog variant renames metric names and
nothing else; a fleet reads its own engine's and its own orchestrator's sources and no
other's, and nothing of an exporter that sees nothing of it; KServe's services are told
apart though they share `/mnt/models`, Dynamo's pools are one fleet, Ray's engines find
their application through the Serve replica that runs them; a stand-in says what it reads.
"""

from __future__ import annotations

from collections.abc import Mapping

import pytest

from signals.catalog import QueryOptions, Scope, load_catalog, render, resolve
from signals.fleets import DEFAULT_FLEET_LABELS, Inventory, discover
from signals.fleets.naming import name_fleet
from signals.fleets.scope import scoped_options
from signals.fleets.stacks import identify, orchestrator_selector
from triage.core.model import CauseFinding, Diagnosis, Evidence
from triage.core.standins import with_stand_ins

Row = dict[str, str]


def engine(metric: str, **labels: str) -> Row:
    return {"__name__": metric, **labels}


def pod(namespace: str, name: str, ip: str, node: str = "n1") -> Row:
    return {"namespace": namespace, "pod": name, "pod_ip": ip, "node": node}


def owned(namespace: str, name: str, replicaset: str) -> Row:
    return {"namespace": namespace, "pod": name, "owner_kind": "ReplicaSet", "owner_name": replicaset}


def rs(namespace: str, replicaset: str, deployment: str) -> Row:
    return {
        "namespace": namespace,
        "replicaset": replicaset,
        "owner_kind": "Deployment",
        "owner_name": deployment,
    }


# --- the catalog ------------------------------------------------------------------------


def test_a_variant_renames_metric_names_and_nothing_else() -> None:
    catalog = load_catalog()
    for signal, sources in catalog.sources.items():
        plain = {s.source: s for s in sources if s.source == "vllm" or s.source.startswith("vllm_")}
        for name, spec in plain.items():
            twin = next((s for s in sources if s.source == "ray_" + name), None)
            assert twin is not None, f"{signal}: no Ray variant of {name}"
            assert all(
                n.startswith("ray_vllm_") or "vllm" not in n for n in (*twin.requires, *twin.requires_any)
            )
            for query in (twin.replica, twin.fleet):
                assert query is None or "vllm:" not in query
            # labels, functions and every other metric stay as they were
            assert (spec.replica or "").replace("vllm:", "ray_vllm_") == (twin.replica or "")
            assert twin.exporter == spec.exporter and twin.stands_in == spec.stands_in


def test_a_fleet_reads_its_own_engine_and_orchestrator_and_no_other() -> None:
    catalog = load_catalog()
    names = {
        "vllm:num_requests_waiting",
        "tgi_queue_size",
        "tgi_request_count",
        "dynamo_frontend_time_to_first_token_seconds_bucket",
        "vllm:time_to_first_token_seconds_bucket",
        "ray_serve_deployment_queued_queries",
    }
    tgi = resolve(catalog, names, "tgi", None)
    assert tgi["queue_waiting"].replica is not None and tgi["queue_waiting"].replica.source == "tgi"
    assert tgi["ttft_p99_seconds"].blind  # TGI exports no TTFT; vLLM's beside it is not TGI's
    vllm = resolve(catalog, names, "vllm", None)
    fleet = vllm["ttft_p99_seconds"].fleet
    assert fleet is not None and fleet.source == "vllm"  # a plain fleet never reads Dynamo's frontend
    dynamo = resolve(catalog, names, "vllm", "dynamo")
    fleet = dynamo["ttft_p99_seconds"].fleet
    replica = dynamo["ttft_p99_seconds"].replica
    assert fleet is not None and fleet.source == "dynamo_frontend"
    assert replica is not None and replica.source == "vllm"
    assert resolve(catalog, names, "vllm", "dynamo")["gateway_queue"].blind  # Ray's queue is not Dynamo's
    unscoped = resolve(catalog, names)
    fleet = unscoped["ttft_p99_seconds"].fleet
    assert fleet is not None and fleet.source == "dynamo_frontend"


def test_an_exporter_that_sees_nothing_of_the_fleet_is_blind_not_the_whole_server() -> None:
    catalog = load_catalog()
    names = {"vllm:num_requests_running", "kube_pod_container_status_restarts_total"}
    scoped = QueryOptions(scopes={"engine": Scope('model_name="m"', "pod")}, engine="vllm")
    assert resolve(catalog, names, "vllm", None, scoped)["restarts"].blind
    with_pods = QueryOptions(
        scopes={"engine": Scope("", "pod"), "kube_pod": Scope('pod=~"a"', "pod")}, engine="vllm"
    )
    assert not resolve(catalog, names, "vllm", None, with_pods)["restarts"].blind
    assert not resolve(catalog, names)["restarts"].blind  # unscoped, every exporter is read


def test_sglang_reads_its_queue_once_per_replica() -> None:
    spec = next(s for s in load_catalog().sources["queue_waiting"] if s.source == "sglang")
    query = render(spec.replica or "", QueryOptions(replica_label="pod"))
    assert 'priority=""' in query and "max without (tp_rank, pp_rank, moe_ep_rank)" in query


def test_vllm_033_queue_is_the_capacity_share_and_hits_count_every_tier() -> None:
    catalog = load_catalog()
    names = {
        "vllm:num_requests_waiting",
        "vllm:num_requests_waiting_by_reason",
        "vllm:prefix_cache_queries_total",
        "vllm:prompt_tokens_by_source_total",
    }
    got = resolve(catalog, names, "vllm")
    queue, hits = got["queue_waiting"].replica, got["prefix_hit_ratio"].replica
    assert queue is not None and 'reason="capacity"' in (queue.replica or "")
    assert hits is not None and "external_kv_transfer" in (hits.replica or "")
    older = resolve(catalog, {"vllm:num_requests_waiting", "vllm:prefix_cache_queries_total"}, "vllm")
    assert older["queue_waiting"].replica is not None and older["queue_waiting"].replica.source == "vllm"
    assert (
        older["prefix_hit_ratio"].replica is not None and older["prefix_hit_ratio"].replica.source == "vllm"
    )


# --- the fleets -------------------------------------------------------------------------


def kserve() -> Inventory:
    ns = "serving"
    rows, pods, owners, sets = [], [], [], []
    for isvc, revisions in (("llama-chat", ("00001", "00002", "00002")), ("llama-batch", ("00001", "00001"))):
        for i, rev in enumerate(revisions):
            name = f"{isvc}-predictor-{rev}-deployment-abc-{i}"
            rows.append(
                engine(
                    "vllm:num_requests_running",
                    namespace=ns,
                    pod=name,
                    instance=f"10.0.{len(rows)}.1:8080",
                    model_name="/mnt/models",
                    service_name=f"{isvc}-predictor",
                    revision_name=f"{isvc}-predictor-{rev}",
                )
            )
            pods.append(pod(ns, name, f"10.0.{len(pods)}.1"))
            owners.append(owned(ns, name, f"{isvc}-predictor-{rev}-deployment-abc"))
            sets.append(
                rs(ns, f"{isvc}-predictor-{rev}-deployment-abc", f"{isvc}-predictor-{rev}-deployment")
            )
    rows.append(
        engine("vllm:num_requests_running", namespace=ns, pod="qwen-llmd-0", model_name="Qwen/Qwen3-8B")
    )
    labels = [
        {
            "namespace": ns,
            "pod": "qwen-llmd-0",
            "label_app_kubernetes_io_name": "qwen-llmd",
            "label_kserve_io_component": "workload",
            "label_llm_d_ai_role": "decode",
        }
    ]
    return Inventory(engines=rows, pods=pods, pod_owners=owners, replicaset_owners=sets, pod_labels=labels)


def test_kserve_services_sharing_mnt_models_are_fleets_named_by_their_service() -> None:
    found = discover(kserve())
    names = {f.name for f in found.fleets}
    assert names == {
        "serving/llama-chat@InferenceService/llama-chat",
        "serving/llama-batch@InferenceService/llama-batch",
        "serving/Qwen/Qwen3-8B@LLMInferenceService/qwen-llmd",
    }
    chat = next(f for f in found.fleets if f.name.startswith("serving/llama-chat"))
    assert sorted(set(chat.revisions.values())) == [
        "llama-chat-predictor-00001",
        "llama-chat-predictor-00002",
    ]
    assert len(chat.replicas) == 3 and chat.orchestrator == "kserve"
    assert [str(w) for w in chat.kube_workloads] == [
        "Deployment/llama-chat-predictor-00001-deployment",
        "Deployment/llama-chat-predictor-00002-deployment",
    ]
    scope = scoped_options(chat, QueryOptions()).scope("kube_workload")
    assert "deployment=~" in scope.selector and "00001" in scope.selector and "00002" in scope.selector
    assert "batch" not in scope.selector
    llmd = next(
        f for f in found.fleets if f.workload is not None and f.workload.kind == "LLMInferenceService"
    )
    assert llmd.pools == {"qwen-llmd-0": "decode"}


def test_an_alert_keyed_by_the_service_names_its_inferenceservice_and_not_without_it() -> None:
    """`triage rules` records and pages KServe fleets by Knative's `service_name` too: an alert
    carrying it names its InferenceService; the fleet labels alone name two fleets."""
    found = discover(kserve())
    shared = {"namespace": "serving", "model_name": "/mnt/models"}
    for isvc in ("llama-chat", "llama-batch"):
        named = name_fleet(found, [{**shared, "service_name": f"{isvc}-predictor"}], DEFAULT_FLEET_LABELS)
        assert named.fleet is not None and named.fleet.name == f"serving/{isvc}@InferenceService/{isvc}"
    assert name_fleet(found, [shared], DEFAULT_FLEET_LABELS).fleet is None
    # a service_name that is no InferenceService's (no -predictor suffix) picks none either
    odd = name_fleet(found, [{**shared, "service_name": "llama-chat"}], DEFAULT_FLEET_LABELS)
    assert odd.fleet is None


def test_without_the_service_labels_two_services_on_mnt_models_stay_apart_by_workload() -> None:
    inv = kserve()
    bare = [{k: v for k, v in r.items() if k not in ("service_name", "revision_name")} for r in inv.engines]
    found = discover(
        Inventory(
            engines=bare, pods=inv.pods, pod_owners=inv.pod_owners, replicaset_owners=inv.replicaset_owners
        )
    )
    mnt = [f for f in found.fleets if dict(f.labels)["model_name"] == "/mnt/models"]
    assert len(mnt) >= 2 and len({f.workload for f in mnt}) == len(mnt)


def dynamo() -> Inventory:
    rows = []
    for i, component in enumerate(("prefill", "prefill", "backend", "backend", "backend")):
        rows.append(
            engine(
                "vllm:num_requests_running",
                namespace="dynamo",
                pod=f"worker-{i}",
                model_name="Qwen/Qwen3-32B",
                dynamo_namespace="llm_prod",
                dynamo_component=component,
                model="Qwen/Qwen3-32B",
            )
        )
    return Inventory(engines=rows)


def test_dynamo_prefill_and_decode_are_one_fleet_of_two_pools_with_its_frontend() -> None:
    found = discover(dynamo())
    (fleet,) = found.fleets
    assert fleet.name == "dynamo/Qwen/Qwen3-32B@Dynamo/llm_prod"
    assert sorted(fleet.pools.values()) == ["decode"] * 3 + ["prefill"] * 2
    options = scoped_options(fleet, QueryOptions())
    assert options.orchestrator == "dynamo"
    frontend = options.scope("orchestrator").selector
    assert 'dynamo_namespace=~"llm[-_]prod"' in frontend and 'model=~"(?i)(Qwen/Qwen3\\\\-32B)?"' in frontend


def ray(shared_pod: bool = False) -> Inventory:
    rows, serve = [], []
    for i, (app, model) in enumerate((("llm-app", "llama"), ("llm-app", "llama"), ("embed-app", "bge"))):
        worker = f"{i:040x}"
        pod_name = "ray-worker-0" if shared_pod else f"ray-worker-{i}"
        rows.append(
            engine(
                "ray_vllm_num_requests_running",
                namespace="ray",
                pod=pod_name,
                model_name=model,
                ReplicaId=f"{app}#LLMServer#{i}",
                WorkerId=worker,
                ray_io_cluster="rc",
            )
        )
        serve.append({"WorkerId": worker, "application": app, "deployment": "LLMServer", "replica": f"r{i}"})
    pods = [pod("ray", f"ray-worker-{i}", f"10.1.0.{i}") for i in range(3)]
    return Inventory(engines=rows, serve=serve, pods=pods)


def test_ray_engines_find_their_application_through_the_serve_replica_that_runs_them() -> None:
    found = discover(ray())
    names = {f.name for f in found.fleets}
    assert names == {"ray/llama@RayServe/rc/llm-app", "ray/bge@RayServe/rc/embed-app"}
    llm = next(f for f in found.fleets if "llm-app" in f.name)
    assert llm.replica_label == "ReplicaId" and len(llm.replicas) == 2
    assert llm.engine == "ray_vllm" and llm.orchestrator == "ray_serve"
    # each pod hosts one replica: its pod-level series count for that replica
    assert llm.kube_pods == ("ray-worker-0", "ray-worker-1")
    assert llm.workers == {"ray-worker-0": "llm-app#LLMServer#0", "ray-worker-1": "llm-app#LLMServer#1"}
    options = scoped_options(llm, QueryOptions())
    assert (
        options.scope("orchestrator").selector == 'namespace="ray",ray_io_cluster="rc",application="llm-app"'
    )
    assert 'ReplicaId=~"' in options.scope("engine").selector


def test_replicas_sharing_a_pod_do_not_split_its_series_and_say_so() -> None:
    found = discover(ray(shared_pod=True))
    llm = next(f for f in found.fleets if "llm-app" in f.name)
    assert llm.kube_pods == ()
    assert any("several replicas share a pod" in str(p) for p in llm.problems)


def test_an_engine_with_no_model_label_or_its_own_is_keyed_and_scoped_in_its_own_spelling() -> None:
    rows = [
        engine("tgi_queue_size", namespace="llm", pod="tgi-0"),
        engine("nv_trt_llm_request_metrics", namespace="llm", pod="triton-0", model="tensorrt_llm"),
    ]
    found = discover(Inventory(engines=rows))
    by_engine = {f.engine: f for f in found.fleets}
    assert by_engine["tgi"].name == "llm" and not found.problems  # no model label is no problem for TGI
    assert by_engine["triton"].name == "llm/tensorrt_llm"
    triton = scoped_options(by_engine["triton"], QueryOptions()).scope("engine").selector
    assert 'model="tensorrt_llm"' in triton and "model_name" not in triton
    tgi = scoped_options(by_engine["tgi"], QueryOptions()).scope("engine").selector
    assert "model" not in tgi and 'namespace="llm"' in tgi


def test_a_vllm_series_without_its_model_label_is_still_a_problem() -> None:
    found = discover(Inventory(engines=[engine("vllm:num_requests_running", namespace="llm", pod="p")]))
    assert [f.name for f in found.fleets] == ["llm/?"]
    assert any("model_name" in str(p) for p in found.problems)


@pytest.mark.parametrize(
    ("labels", "kind"),
    [
        ({"serving_kserve_io_inferenceservice": "a"}, "InferenceService"),
        ({"service_name": "a-predictor"}, "InferenceService"),
        ({"service_name": "a-transformer"}, None),  # not a predictor: not a KServe service name
        ({"app_kubernetes_io_name": "a"}, None),  # without kserve.io/component it is any app's label
        ({"app_kubernetes_io_name": "a", "kserve_io_component": "workload"}, "LLMInferenceService"),
    ],
)
def test_orchestrator_rules_need_their_own_labels(labels: Mapping[str, str], kind: str | None) -> None:
    found = identify(labels, {})
    assert (found.kind if found else None) == kind


def test_a_dynamo_namespace_matches_dashed_or_underscored() -> None:
    found = identify({"dynamo_namespace": "llm_prod"}, {})
    assert found is not None
    assert orchestrator_selector(found, "M").startswith('dynamo_namespace=~"llm[-_]prod"')


# --- stand-ins ------------------------------------------------------------------------


def test_evidence_read_from_a_stand_in_says_what_it_reads() -> None:
    evidence = Evidence("e2e_p99_seconds", "rise", True, 2.0, 1.0)
    other = Evidence("queue_waiting", "rise", True, 5.0, 1.0)
    finding = CauseFinding("traffic_burst", "request", "t", "ranked", 0.9, (evidence, other))
    diagnosis = Diagnosis(
        symptom="ttft_slow",
        symptom_source="given",
        at=0.0,
        onset=None,
        baseline_window=None,
        causes=(finding,),
        first_actions=(),
        forbidden=(),
        missing_signals=(),
        walked=(finding,),
    )
    said = with_stand_ins(diagnosis, {"e2e_p99_seconds": "the mean request time", "gpu_throttle": "x"})
    first, second = said.causes[0].evidence
    assert first.note == "read as the mean request time" and second.note == ""
    assert said.to_json()["stand_ins"] == {"e2e_p99_seconds": "the mean request time"}  # only what was read
    assert with_stand_ins(diagnosis, {}) is diagnosis


def test_two_engines_serving_one_model_in_one_namespace_are_two_fleets_each_with_its_engine() -> None:
    rows = [
        engine("vllm:num_requests_running", namespace="llm", pod="v-0", model_name="m"),
        engine("sglang:num_running_reqs", namespace="llm", pod="s-0", model_name="m"),
    ]
    owners = [owned("llm", "v-0", "vllm-abc"), owned("llm", "s-0", "sglang-abc")]
    sets = [rs("llm", "vllm-abc", "vllm"), rs("llm", "sglang-abc", "sglang")]
    found = discover(Inventory(engines=rows, pod_owners=owners, replicaset_owners=sets))
    assert {(f.name, f.engine) for f in found.fleets} == {
        ("llm/m@Deployment/vllm", "vllm"),
        ("llm/m@Deployment/sglang", "sglang"),
    }


def test_a_fleet_gets_only_the_sources_its_own_series_export() -> None:
    """A vLLM 0.33 fleet beside an older one: the server has the new names, the older fleet not."""
    catalog = load_catalog()
    server = {"vllm:num_requests_waiting", "vllm:num_requests_waiting_by_reason", "kube_pod_info"}
    older = {"vllm:num_requests_waiting"}
    scoped = QueryOptions(scopes={"engine": Scope('pod=~"old-.*"', "pod")}, engine="vllm")
    mine = resolve(catalog, server, "vllm", None, scoped, older)["queue_waiting"].replica
    assert mine is not None and mine.source == "vllm"
    newer = resolve(catalog, server, "vllm", None, scoped, server)["queue_waiting"].replica
    assert newer is not None and newer.source == "vllm_by_reason"
