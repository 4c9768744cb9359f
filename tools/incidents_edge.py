"""Bundled incidents at the edge: the gateway or router as the cause, and the confounders
that look like it (a true capacity shortage, a replica down, an OOM, a rollout, a burst)."""

from __future__ import annotations

import numpy as np

from tools.incidents_core import demand_outgrows_fleet
from tools.registry import incident, path
from tools.synth import Fleet, _key

EDGE_FORBIDDEN = ["scale_out", "tune_sampling"]


def replace_pod(f: Fleet, gone: str, new: str, at: str) -> None:
    """`gone` is deleted at `at` and a pod named `new` takes its place with `gone`'s series."""
    i = f.idx(at)
    for key in [k for k in f.series if dict(k[1]).get("instance") == gone]:
        labels = dict(key[1])
        labels["instance"] = new
        fresh = f.series[key].copy()
        fresh[:i] = np.nan
        f.series[_key(key[0], labels)] = fresh
    f.vanish(gone, at)


@incident
def gateway_bottleneck_single_router() -> None:
    f = Fleet(
        "gateway-bottleneck-single-router",
        "One router in front of every engine became the stall point for streaming "
        "requests: its queue and latency climbed and clients timed out, while the engines "
        "behind it sat nearly idle (short queues, low KV, no preemption).",
        replicas=8,
        duration="90m",
        seed=131,
    )
    f.add_edge()
    at = "50m"
    f.step("gateway_queue", at, to=240, ramp="4m")
    f.step("gateway_latency_p99_seconds", at, factor=9.0, ramp="4m")
    f.step("timeout_ratio", "51m", to=0.06, ramp="3m")
    f.step("request_rate", at, factor=0.8, ramp="3m")
    f.step("requests_running", at, factor=0.75, ramp="3m")
    f.step("queue_waiting", at, to=0.3, ramp="3m")
    f.step("kv_usage_ratio", at, factor=0.8, ramp="3m")
    f.step("prompt_tokens_rate", at, factor=0.8, ramp="3m")
    f.step("generation_tokens_rate", at, factor=0.8, ramp="3m")
    f.write(
        path(f.name),
        "ttft_slow",
        at="80m",
        expect={"cause": "gateway_bottleneck", "forbidden": EDGE_FORBIDDEN},
    )


@incident
def capacity_shortage_behind_gateway() -> None:
    f = Fleet(
        "capacity-shortage-behind-gateway",
        "Demand grew steadily for two hours across every tenant; the engines saturated "
        "evenly and the gateway's latency rose with theirs, but the gateway itself queues "
        "nothing: the engines, not the edge, are short.",
        replicas=6,
        duration="180m",
        seed=132,
    )
    f.add_edge()
    demand_outgrows_fleet(f)
    f.ramp("gateway_inflight", "30m", "150m", 1.4)
    f.step("gateway_inflight", "120m", factor=1.35, ramp="30m")
    f.step("gateway_latency_p99_seconds", "120m", factor=2.8, ramp="30m")
    f.write(
        path(f.name),
        "ttft_slow",
        at="175m",
        expect={"cause": "capacity_shortage", "not_forbidden": ["scale_out"], "forbidden": ["tune_sampling"]},
    )


@incident
def stale_backend_deleted_pod_routed() -> None:
    f = Fleet(
        "stale-backend-deleted-pod-routed",
        "A pod was deleted and replaced, but the router kept the deleted pod's address as "
        "a healthy backend: one backend more than ready replicas, upstream errors on that "
        "backend alone, every engine that reports healthy.",
        replicas=6,
        duration="90m",
        seed=133,
    )
    f.add_edge()
    gone = "vllm-2"
    replace_pod(f, gone, "vllm-6", "50m")
    f.series[_key("upstream_error_ratio", {"instance": gone})][f.idx("50m") :] = 0.0
    f.step("upstream_error_ratio", "50m", to=0.85, replicas=[gone], ramp="1m")
    f.set("backends_routed", "50m", 7.0)
    f.write(
        path(f.name),
        "errors",
        at="80m",
        expect={"cause": "stale_backend", "forbidden": EDGE_FORBIDDEN},
    )


@incident
def replica_down_router_follows() -> None:
    f = Fleet(
        "replica-down-router-follows",
        "Two of eight replicas stopped and were not rescheduled; the router dropped them "
        "from its backends at once, so the survivors took their traffic and their queues "
        "rose. The router is right; the replicas are missing.",
        replicas=8,
        duration="100m",
        seed=134,
    )
    f.add_edge()
    gone = f.who(3, 6)
    survivors = [n for n in f.names if n not in gone]
    f.set("replicas_ready", "55m", 6)
    f.set("backends_routed", "55m", 6)
    f.step("request_rate", "55m", factor=8 / 6, replicas=survivors)
    f.step("queue_waiting", "56m", to=9, replicas=survivors, ramp="4m")
    f.step("requests_running", "56m", factor=1.3, replicas=survivors)
    f.step("ttft_p99_seconds", "56m", factor=3.0, replicas=survivors, ramp="4m")
    f.step("queue_time_p99_seconds", "56m", factor=6.0, replicas=survivors, ramp="4m")
    f.step("gateway_latency_p99_seconds", "56m", factor=2.6, ramp="4m")
    for name in gone:
        f.vanish(name, "55m")
    f.write(
        path(f.name),
        "ttft_slow",
        at="90m",
        expect={"cause": "replica_down", "forbidden": EDGE_FORBIDDEN},
    )


@incident
def probe_restart_loop_slow_load() -> None:
    f = Fleet(
        "probe-restart-loop-slow-load",
        "Engines stalled compiling after a node pool change; their liveness probes "
        "failed and the kubelet restarted them, and each restart began the slow load "
        "again. No OOM kill, no new version; replicas stayed below desired.",
        replicas=6,
        duration="90m",
        seed=135,
    )
    f.add_edge()
    looping = f.who(1, 3, 4)
    survivors = [n for n in f.names if n not in looping]
    for k, name in enumerate(looping):
        start = 50 + 2 * k
        for cycle in range(4):
            t = start + cycle * 7
            f.pulse("probe_failures", f"{t}m", 3, width="3m", replicas=[name])
            f.pulse("restarts", f"{t + 2}m", 1, width="5m", replicas=[name])
        f.set("terminated_error", f"{start + 2}m", 1, replicas=[name])
        f.set("exit_code", f"{start + 2}m", 137, replicas=[name])
        for signal in (
            "request_rate",
            "requests_running",
            "queue_waiting",
            "kv_usage_ratio",
            "ttft_p99_seconds",
        ):
            f.set(signal, f"{start + 2}m", np.nan, replicas=[name])
    f.set("replicas_ready", "52m", 3)
    f.set("backends_routed", "52m", 3)
    f.step("request_rate", "52m", factor=2.0, replicas=survivors)
    f.step("queue_waiting", "53m", to=8, replicas=survivors, ramp="3m")
    f.step("ttft_p99_seconds", "53m", factor=2.5, replicas=survivors, ramp="3m")
    f.step("error_ratio", "52m", to=0.03, replicas=survivors, ramp="2m")
    f.step("upstream_error_ratio", "52m", to=0.2, replicas=looping, ramp="1m")
    f.write(
        path(f.name),
        "errors",
        at="85m",
        expect={"cause": "probe_restart_loop", "forbidden": [*EDGE_FORBIDDEN, "blind_retry_streaming"]},
    )


@incident
def engine_oom_with_probe_failures() -> None:
    f = Fleet(
        "engine-oom-with-probe-failures",
        "Longer contexts pushed two engines out of memory; each was OOM-killed and "
        "restarted, and its probes failed while it reloaded. The probes only follow the "
        "kills.",
        replicas=6,
        duration="90m",
        seed=136,
    )
    f.add_edge()
    victims = f.who(0, 4)
    f.step("kv_usage_ratio", "45m", to=0.97, ramp="4m")
    f.step("gpu_memory_used_ratio", "46m", to=0.995, ramp="2m")
    for k, name in enumerate(victims):
        t = 50 + 3 * k
        f.set("oom_killed", f"{t}m", 1, replicas=[name])
        f.set("exit_code", f"{t}m", 137, replicas=[name])
        f.restart(name, f"{t}m", down="4m")
        f.pulse("probe_failures", f"{t + 1}m", 2, width="3m", replicas=[name])
    f.step("error_ratio", "50m", to=0.04, ramp="2m")
    f.set("replicas_ready", "50m", 4, until="58m")
    f.write(
        path(f.name),
        "errors",
        at="70m",
        expect={"cause": "engine_oom", "forbidden": ["scale_out", "raise_gpu_memory_utilization"]},
    )


@incident
def rollout_with_probe_failures() -> None:
    f = Fleet(
        "rollout-with-probe-failures",
        "A new engine version rolled out pod by pod; each new pod failed its readiness "
        "probe while it loaded, and in-flight requests were cut off as old pods stopped. "
        "The probes are part of the rollout, not its cause.",
        replicas=6,
        duration="100m",
        seed=137,
    )
    f.add_edge()
    for k, name in enumerate(f.names):
        t = 50 + 4 * k
        f.pulse("restarts", f"{t}m", 1, width="5m", replicas=[name])
        f.pulse("probe_failures", f"{t}m", 2, width="3m", replicas=[name])
        f.relabel("build_info", f"{t}m", {"engine_version": "0.11.1"}, replicas=[name])
    f.step("error_ratio", "50m", to=0.02, ramp="2m")
    f.step("truncated_ratio", "50m", to=0.05, ramp="2m")
    f.set("replicas_ready", "50m", 5, until="76m")
    f.write(
        path(f.name),
        "errors",
        at="80m",
        expect={"cause": "rollout_disruption", "forbidden": ["scale_out", "blind_retry_streaming"]},
    )


@incident
def rate_limit_double_count() -> None:
    f = Fleet(
        "rate-limit-double-count",
        "After a gateway upgrade the rate limiter counted every request twice, so teams "
        "got 429s at half their quota; demand was unchanged and the engines, given less "
        "to do, had plenty of headroom.",
        replicas=6,
        duration="90m",
        seed=138,
    )
    f.add_edge()
    at = "50m"
    f.step("rejected_ratio", at, to=0.42, ramp="2m")
    for signal in (
        "request_rate",
        "requests_running",
        "prompt_tokens_rate",
        "generation_tokens_rate",
        "gateway_inflight",
    ):
        f.step(signal, at, factor=0.58, ramp="2m")
    f.step("queue_waiting", at, to=0.2, ramp="2m")
    f.step("kv_usage_ratio", at, factor=0.7, ramp="2m")
    f.write(
        path(f.name),
        "rejected",
        at="80m",
        expect={"cause": "rate_limit_misconfigured", "forbidden": EDGE_FORBIDDEN},
    )


@incident
def rate_limit_inflight_drift() -> None:
    f = Fleet(
        "rate-limit-inflight-drift",
        "The gateway's flow control lost track of requests in flight: the engines' "
        "running and waiting grew many-fold while the gateway believed half of that and "
        "kept admitting past its limit. Demand itself barely moved.",
        replicas=6,
        duration="100m",
        seed=139,
    )
    f.add_edge()
    at = "50m"
    f.step("queue_waiting", at, to=60, ramp="20m")
    f.step("requests_running", at, factor=1.5, ramp="10m")
    f.step("gateway_inflight", at, factor=1.6, ramp="20m")
    f.step("queue_time_p99_seconds", at, factor=30, ramp="20m")
    f.step("ttft_p99_seconds", at, factor=12, ramp="20m")
    f.step("gateway_latency_p99_seconds", at, factor=12, ramp="20m")
    f.step("kv_usage_ratio", at, to=0.8, ramp="10m")
    f.step("request_rate", at, factor=1.08, ramp="5m")
    f.write(
        path(f.name),
        "ttft_slow",
        at="90m",
        expect={"cause": "rate_limit_misconfigured", "forbidden": EDGE_FORBIDDEN},
    )


@incident
def traffic_burst_behind_gateway() -> None:
    f = Fleet(
        "traffic-burst-behind-gateway",
        "A batch client doubled the request rate within two minutes; the gateway's limiter "
        "refused part of it as configured, and the engines' queues grew with what passed. "
        "The limiter is working; the burst is the cause.",
        replicas=5,
        duration="80m",
        seed=140,
    )
    f.add_edge()
    at = "50m"
    f.step("request_rate", at, factor=2.1, ramp="2m")
    f.step("prompt_tokens_rate", at, factor=2.1, ramp="2m")
    f.step("generation_tokens_rate", at, factor=2.0, ramp="2m")
    f.step("queue_waiting", "51m", to=15, ramp="2m")
    f.step("requests_running", "51m", factor=1.6, ramp="2m")
    f.step("gateway_inflight", "51m", factor=2.2, ramp="2m")
    f.step("queue_time_p99_seconds", "51m", factor=10, ramp="2m")
    f.step("ttft_p99_seconds", "51m", factor=4, ramp="2m")
    f.step("gateway_latency_p99_seconds", "51m", factor=3.5, ramp="2m")
    f.step("kv_usage_ratio", "51m", to=0.8, ramp="3m")
    f.step("rejected_ratio", "52m", to=0.08, ramp="2m")
    f.write(
        path(f.name),
        "rejected",
        at="70m",
        expect={"cause": "traffic_burst", "forbidden": EDGE_FORBIDDEN},
    )
