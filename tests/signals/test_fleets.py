"""Fleet discovery on label sets in the shapes real exporters and the Prometheus Operator produce.

Three fleets in one namespace: a vLLM Deployment (GPUs named by the GPU Operator's
`exported_pod`), a 70B LeaderWorkerSet (engine series on the leaders, GPUs on leaders
and workers), and an SGLang Deployment whose DCGM exporter maps no pods (joined by node).
"""

from __future__ import annotations

import pytest

from signals.catalog import QueryOptions, load_catalog, render
from signals.fleets import FleetMap, Inventory, discover
from signals.fleets.scope import scoped_options

NS = "llm"
M8 = "meta-llama/Llama-3.1-8B-Instruct"
M70 = "meta-llama/Llama-3.1-70B-Instruct"
QWEN = "Qwen/Qwen2.5-7B-Instruct"
P8 = ["vllm-7d9f8b6c5-k2x8q", "vllm-7d9f8b6c5-p4m2z", "vllm-7d9f8b6c5-w9c1d"]
LEADERS = ["vllm-70b-0", "vllm-70b-1"]
WORKERS = {"vllm-70b-0-1": "vllm-70b-0", "vllm-70b-1-1": "vllm-70b-1"}
PQ = ["sglang-qwen-5c7d9-abcde", "sglang-qwen-5c7d9-fghij"]


def _engine(name: str, model: str, pod: str, ip: str, port: str = "8000") -> dict[str, str]:
    return {"__name__": name, "namespace": NS, "model_name": model, "pod": pod, "instance": f"{ip}:{port}"}


def _pod(pod: str, node: str, ip: str, namespace: str = NS) -> dict[str, str]:
    return {"namespace": namespace, "pod": pod, "node": node, "pod_ip": ip}


def _owner(pod: str, kind: str, name: str) -> dict[str, str]:
    return {"namespace": NS, "pod": pod, "owner_kind": kind, "owner_name": name}


def _gpu(host: str, gpu: str, **labels: str) -> dict[str, str]:
    return {"Hostname": host, "gpu": gpu, "UUID": f"GPU-{host}-{gpu}", **labels}


DCGM_POD = {"namespace": "gpu-operator", "pod": "nvidia-dcgm-exporter-x1"}


def inventory(**changes: object) -> Inventory:
    ips = {
        **{p: f"10.0.1.{i}" for i, p in enumerate(P8)},
        **{p: f"10.0.2.{i}" for i, p in enumerate(LEADERS)},
    }
    ips.update({p: f"10.0.3.{i}" for i, p in enumerate(PQ)})
    engines = [
        *(_engine("vllm:num_requests_running", M8, p, ips[p]) for p in P8),
        *(_engine("vllm:num_requests_running", M70, p, ips[p]) for p in LEADERS),
        *(_engine("sglang:num_running_reqs", QWEN, p, ips[p], "30000") for p in PQ),
        # The production-stack router's re-export of the engines' gauges: one `server` label.
        {"__name__": "vllm:num_requests_running", "server": f"http://{ips[P8[0]]}:8000", "model_name": M8},
    ]
    pods = [
        *(_pod(p, "node-a", ips[p]) for p in P8),
        _pod("vllm-70b-0", "node-b", ips["vllm-70b-0"]),
        _pod("vllm-70b-0-1", "node-b", "10.0.2.10"),
        _pod("vllm-70b-1", "node-b", ips["vllm-70b-1"]),
        _pod("vllm-70b-1-1", "node-b", "10.0.2.11"),
        *(_pod(p, "node-c", ips[p]) for p in PQ),
        _pod("nvidia-dcgm-exporter-x1", "node-a", "10.0.9.1", "gpu-operator"),
    ]
    owners = [
        *(_owner(p, "ReplicaSet", "vllm-7d9f8b6c5") for p in P8),
        *(_owner(p, "StatefulSet", "vllm-70b") for p in LEADERS),
        *(_owner(w, "StatefulSet", leader) for w, leader in WORKERS.items()),
        *(_owner(p, "ReplicaSet", "sglang-qwen-5c7d9") for p in PQ),
    ]
    rs_owners = [
        {"namespace": NS, "replicaset": "vllm-7d9f8b6c5", "owner_kind": "Deployment", "owner_name": "vllm"},
        {
            "namespace": NS,
            "replicaset": "sglang-qwen-5c7d9",
            "owner_kind": "Deployment",
            "owner_name": "sglang-qwen",
        },
    ]
    gpus = [
        # The GPU Operator's ServiceMonitor (honor_labels false): the workload as exported_*.
        *(
            _gpu("node-a", str(i), exported_pod=p, exported_namespace=NS, **DCGM_POD)
            for i, p in enumerate(P8)
        ),
        _gpu("node-a", "3", **DCGM_POD),  # idle: the exporter maps pods, this GPU has none
        *(
            _gpu("node-b", str(i), exported_pod=p, exported_namespace=NS, **DCGM_POD)
            for i, p in enumerate(["vllm-70b-0", "vllm-70b-0-1", "vllm-70b-1", "vllm-70b-1-1"])
        ),
        # An exporter that maps no pod at all: joined through Hostname -> node -> pods.
        _gpu("node-c", "0"),
    ]
    base = {
        "engines": engines,
        "pods": pods,
        "pod_owners": owners,
        "replicaset_owners": rs_owners,
        "gpus": gpus,
    }
    base.update(changes)  # type: ignore[arg-type]
    return Inventory(**base)  # type: ignore[arg-type]


@pytest.fixture
def found() -> FleetMap:
    return discover(inventory())


def test_three_fleets_each_with_its_workload(found: FleetMap) -> None:
    names = [f.name for f in found.fleets]
    assert names == [
        f"{NS}/{QWEN}@Deployment/sglang-qwen",
        f"{NS}/{M70}@LeaderWorkerSet/vllm-70b",
        f"{NS}/{M8}@Deployment/vllm",
    ]
    qwen, big, small = found.fleets
    assert (small.engine, small.replicas, small.replica_label) == ("vllm", tuple(P8), "pod")
    assert qwen.engine == "sglang" and qwen.replicas == tuple(PQ)
    assert big.replicas == tuple(LEADERS)
    assert dict(big.workers) == WORKERS
    assert big.kube_pods == tuple(sorted([*LEADERS, *WORKERS]))


def test_gpus_join_by_exported_pod_by_leader_and_by_node(found: FleetMap) -> None:
    qwen, big, small = found.fleets
    assert {(g.gpu, g.replica, g.joined_by) for g in small.gpus} == {
        (str(i), p, "exported_pod") for i, p in enumerate(P8)
    }
    # A worker's GPUs belong to the replica its group's leader serves.
    assert sorted((g.pod, g.replica) for g in big.gpus) == sorted(
        [("vllm-70b-0", "vllm-70b-0"), ("vllm-70b-1", "vllm-70b-1"), *WORKERS.items()]
    )
    assert {g.joined_by for g in qwen.gpus} == {"node"}
    assert {g.replica for g in qwen.gpus} == set(PQ)
    assert any("node-c run several replicas" in str(p) for p in qwen.problems)
    assert found.idle_gpus == 1


def test_the_router_joins_its_backends_by_pod_ip(found: FleetMap) -> None:
    small = found.fleets[2]
    assert small.routers == (P8[0],)
    assert dict(small.backends) == {"10.0.1.0:8000": P8[0]}
    assert all(r.replica_label == "pod" for r in found.fleets)


def test_the_edge_s_backends_and_endpoints_are_scoped_to_the_fleet_s_pods(found: FleetMap) -> None:
    small = found.fleets[2]
    options = scoped_options(small, QueryOptions(selector='cluster="east"'))
    # a per-backend series is named by the backend's host:port, and renamed to its pod
    gateway = options.scope("gateway")
    assert (gateway.selector, gateway.replica_label) == ('cluster="east"', "pod")
    assert dict(gateway.renames) == {"10.0.1.0:8000": P8[0]}
    endpoints = options.scope("kube_endpoint")
    assert (
        endpoints.selector
        == f'namespace="{NS}",ip=~"10\\\\.0\\\\.1\\\\.0|10\\\\.0\\\\.1\\\\.1|10\\\\.0\\\\.1\\\\.2"'
    )
    ready = next(s for s in load_catalog().sources["replicas_ready"] if s.exporter == "kube_endpoint")
    assert ready.fleet is not None
    assert 'kube_endpoint_address{ready="true",namespace="llm",ip=~' in render(
        ready.fleet, options, "kube_endpoint"
    )
    errors = next(s for s in load_catalog().sources["upstream_error_ratio"] if s.source == "production_stack")
    assert errors.replica is not None
    query = render(errors.replica, options, errors.exporter)
    assert 'sum by (pod) (label_replace(rate(vllm:request_errors_total{server!="",cluster="east"}' in query
    assert '"pod", "$1", "server"' in query


def test_a_fleet_scopes_every_exporter_with_its_own_labels(found: FleetMap) -> None:
    big = found.fleets[1]
    options = scoped_options(big, QueryOptions(replica_label="instance", selector='cluster="east"'))
    engine = options.scope("engine")
    assert engine.replica_label == "pod"
    assert f'model_name="{M70}"' in engine.selector and 'server=""' in engine.selector
    assert 'pod=~"vllm\\\\-70b\\\\-0|vllm\\\\-70b\\\\-1"' in engine.selector
    gpu = options.scope("gpu")
    assert gpu.replica_label == "exported_pod" and dict(gpu.renames) == WORKERS
    assert options.scope("kube_workload").selector == f'namespace="{NS}",statefulset="vllm-70b"'
    assert options.scope("kube_pod").renames == WORKERS
    # The gateway has no fleet scope: the user's selector still applies there.
    assert options.scope("gateway").selector == 'cluster="east"'
    xid = load_catalog().sources["gpu_xid"][0]
    assert xid.replica is not None
    query = render(xid.replica, options, xid.exporter)
    assert "max by (exported_pod, gpu, UUID)" in query and 'exported_namespace="llm"' in query


@pytest.mark.parametrize("label", ["Hostname", "hostname"])
def test_gpus_joined_by_node_are_scoped_by_uuid_whichever_host_label(label: str) -> None:
    """dcgm-exporter's releases write `Hostname`, its HEAD `hostname`: the node join reads
    either, and the scope reads the GPUs by UUID, which an upgrade does not rename."""
    node_c = {label: "node-c", "gpu": "0", "UUID": "GPU-node-c-0"}
    base = inventory()
    qwen = discover(inventory(gpus=[*base.gpus[:-1], node_c])).fleets[0]
    assert {(g.hostname, g.joined_by, g.host_label) for g in qwen.gpus} == {("node-c", "node", label)}
    gpu = scoped_options(qwen, QueryOptions()).scope("gpu")
    assert (gpu.selector, gpu.replica_label) == (r'UUID=~"GPU\\-node\\-c\\-0"', "UUID")
    assert gpu.renames["GPU-node-c-0"] in PQ
    # Without UUIDs, by the node label the series carry.
    bare = {label: "node-c", "gpu": "0"}
    qwen = discover(inventory(gpus=[*base.gpus[:-1], bare])).fleets[0]
    gpu = scoped_options(qwen, QueryOptions()).scope("gpu")
    assert (gpu.selector, gpu.replica_label) == (label + r'=~"node\\-c"', label)


def test_find_takes_a_name_its_start_or_labels(found: FleetMap) -> None:
    assert [f.name for f in found.find(f"{NS}/{M8}")] == [f"{NS}/{M8}@Deployment/vllm"]
    assert len(found.find(f"{NS}/")) == 3
    assert [f.engine for f in found.find(f'{{namespace="{NS}",model_name="{QWEN}"}}')] == ["sglang"]
    assert found.find("workload=vllm-70b")[0].workload is not None
    assert found.find("nope") == []
    with pytest.raises(ValueError, match="is not key=value"):
        found.find("namespace=llm,junk")


def test_two_owners_claiming_one_pod_are_reported_not_joined() -> None:
    base = inventory()
    claims = [*base.pod_owners, _owner(P8[0], "StatefulSet", "intruder")]
    found = discover(inventory(pod_owners=claims))
    assert any(
        f"pod {NS}/{P8[0]} is claimed by ReplicaSet/vllm-7d9f8b6c5, StatefulSet/intruder" in str(p)
        for p in found.problems
    )
    # The pod with two owners stays with the one workload its peers have, and is reported.
    small = next(f for f in found.fleets if f.engine == "vllm" and P8[1] in f.replicas)
    assert str(small.workload) == "Deployment/vllm" and P8[0] in small.replicas
    assert any(f"no owner for pod {P8[0]}" in str(p) for p in small.problems)


def test_a_missing_fleet_label_and_a_model_in_two_namespaces_are_told_apart() -> None:
    base = inventory()
    stray = {"__name__": "vllm:num_requests_running", "namespace": NS, "pod": "stray-pod", "instance": "x:1"}
    other = {**base.engines[0], "namespace": "llm-canary", "pod": "canary-0"}
    found = discover(inventory(engines=[*base.engines, stray, other]))
    assert any(str(p) == "engine: the fleet label 'model_name' is missing (1 series)" for p in found.problems)
    assert {f.name for f in found.fleets if M8 in f.name} == {
        f"{NS}/{M8}@Deployment/vllm",
        f"llm-canary/{M8}",
    }
    stray_fleet = next(f for f in found.fleets if f.name.startswith(f"{NS}/?"))
    assert stray_fleet.replicas == ("stray-pod",)


def test_gpus_with_no_pod_on_a_node_no_fleet_uses_are_reported() -> None:
    base = inventory()
    found = discover(inventory(gpus=[*base.gpus, _gpu("node-z", "0")]))
    assert any(
        str(p).startswith("dcgm: GPUs with no pod label, on nodes no fleet pod runs on")
        for p in found.problems
    )


def test_without_kube_state_metrics_replicas_stand_alone() -> None:
    found = discover(inventory(pods=[], pod_owners=[], replicaset_owners=[]))
    assert all(f.workload is None for f in found.fleets)
    small = next(f for f in found.fleets if M8 in f.name)
    # GPUs still join through exported_pod; the router cannot (no pod IPs).
    assert len(small.gpus) == 3 and small.routers == ()
    assert any(p.exporter == "router" for p in found.problems)


def test_pods_of_a_fleets_workload_with_no_engine_series_are_named() -> None:
    base = inventory()
    silent = _pod("vllm-7d9f8b6c5-zzzzz", "node-a", "10.0.1.99")
    owners = [*base.pod_owners, _owner("vllm-7d9f8b6c5-zzzzz", "ReplicaSet", "vllm-7d9f8b6c5")]
    found = discover(inventory(pods=[*base.pods, silent], pod_owners=owners))
    small = next(f for f in found.fleets if M8 in f.name)
    assert small.replicas == tuple(P8)
    assert "engine: pods of Deployment/vllm with no engine series: vllm-7d9f8b6c5-zzzzz" in map(
        str, small.problems
    )
    # LeaderWorkerSet workers serve no engine series by design: they are not reported.
    big = next(f for f in found.fleets if M70 in f.name)
    assert not any("no engine series" in str(p) for p in big.problems)


def test_a_plain_statefulset_is_its_own_workload_and_scopes_by_statefulset() -> None:
    """Pods owned by a StatefulSet with no worker sets named after them: a StatefulSet fleet."""
    base = inventory()
    owners = [o for o in base.pod_owners if o["pod"] not in WORKERS]
    pods = [p for p in base.pods if p["pod"] not in WORKERS]
    gpus = [g for g in base.gpus if g.get("exported_pod") not in WORKERS]
    found = discover(inventory(pod_owners=owners, pods=pods, gpus=gpus))
    big = next(f for f in found.fleets if M70 in f.name)
    assert str(big.workload) == "StatefulSet/vllm-70b" and big.workers == {}
    scope = scoped_options(big, QueryOptions()).scope("kube_workload")
    assert scope.selector == f'namespace="{NS}",statefulset="vllm-70b"'
