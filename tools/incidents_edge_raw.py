"""Bundled raw incidents at the edge: the gateway or router in front of healthy engines.

Each is told as a `Fleet` of vLLM replicas and written only as raw series (`level: raw`,
see `tools/rawedge.py`): the engines, kube-state-metrics, the kubelet's prober and the
edge, with the label sets a Prometheus Operator scrape gives them. Each names its fleet,
so its replay is scoped to it as a live `--fleet` diagnosis is.
"""

from __future__ import annotations

import numpy as np

from tools.rawedge import EDGE_WAIT, EdgeSpec, write_edge
from tools.registry import incident, path
from tools.synth import Fleet

MODEL = "meta-llama/Llama-3.1-8B-Instruct"


def _scale(f: Fleet, signals: tuple[str, ...], factor: float) -> None:
    for signal in signals:
        for key in f.keys(signal):
            f.series[key] = f.series[key] * factor


def _absent_until(f: Fleet, replica: str, engine_from: str, pod_from: str) -> None:
    """A replica created inside the recording: its pod from `pod_from`, its engine's series
    (which start once the model is loaded and it serves) from `engine_from`."""
    pod_i, engine_i = f.idx(pod_from), f.idx(engine_from)
    for key in list(f.series):
        if dict(key[1]).get("instance") != replica:
            continue
        cut = pod_i if key[0] in ("restarts", "oom_killed") else engine_i
        f.series[key][:cut] = np.nan


@incident
def gateway_bottleneck_epp_vllm_raw() -> None:
    name = "gateway-bottleneck-epp-vllm-raw"
    f = Fleet(
        name,
        "An endpoint picker (Gateway API Inference Extension, flow control on) in front of six "
        "nearly idle vLLM replicas. From minute 40 the picker holds every request longer before "
        "an engine gets it (its dispatch stalls): its flow-control queue grows from ~0 to a few "
        "hundred and its request-duration P99 rises about fivefold, while the engines' request "
        "rate, waiting queue, KV use and TTFT stay at their baseline. Users see the first token "
        "late; the engines are not busier than before.",
        replicas=6,
        duration="70m",
        seed=211,
        gpu_signals=False,
        fleet_signals=False,
    )
    _scale(f, ("request_rate", "prompt_tokens_rate", "generation_tokens_rate"), 0.375)
    _scale(f, ("requests_running",), 0.35)
    _scale(f, ("kv_usage_ratio",), 0.2)
    _scale(f, ("queue_waiting",), 0.4)
    f.add_fleet(EDGE_WAIT, 0.02)
    f.step(EDGE_WAIT, "40m", to=25.0, ramp="8m")
    write_edge(
        f,
        path(name),
        name,
        "ttft_slow",
        at="62m",
        expect={
            "fleet": f"llm/{MODEL}@Deployment/vllm-llama3-8b-instruct",
            "cause": "gateway_bottleneck",
            "forbidden": ["scale_out", "tune_sampling"],
        },
        edge=EdgeSpec(edge="epp", crashed={"vllm-2": 1}),
        description=f.description,
    )


@incident
def stale_backend_router_vllm_raw() -> None:
    name = "stale-backend-router-vllm-raw"
    f = Fleet(
        name,
        "A vLLM production-stack router in front of six vLLM replicas. At minute 40 one pod "
        "is replaced (its node is drained: the new pod, with a new name and address, starts "
        "first and the old one is deleted once the new one is ready), so ready replicas equal "
        "desired throughout. The router picks up the new pod but never drops the deleted one's "
        "URL: healthy_pods_total stays one above the ready replicas, and the router keeps "
        "sending that backend its share of the requests, every one failing to connect "
        "(request_errors_total rises on that server only). The engines that report stay at "
        "their baseline: queue, KV, TTFT. The router's per-backend re-exports of the engines' "
        "running and waiting counts are present, under the engines' own metric names.",
        replicas=7,
        duration="70m",
        seed=221,
        gpu_signals=False,
        fleet_signals=False,
    )
    gone, new = "vllm-3", "vllm-6"
    for key in f.keys("queue_waiting"):
        f.series[key] = np.full(f.n, 3.0 * (1 + 0.1 * f.rng.normal()))
    _absent_until(f, new, engine_from="40m", pod_from="37m30s")
    f.vanish(gone, "40m")
    for key in (("replicas_ready", ()), ("replicas_desired", ())):
        f.series[key] = np.full(f.n, 6.0)
    write_edge(
        f,
        path(name),
        name,
        "errors",
        at="55m",
        expect={
            "fleet": f"llm/{MODEL}@Deployment/vllm-llama3-deployment-vllm",
            "cause": "stale_backend",
            "forbidden": ["scale_out"],
        },
        edge=EdgeSpec(
            edge="router",
            deployment="vllm-llama3-deployment-vllm",
            engine_service="vllm-engine-service",
            engine_endpoint="service-port",
            endpoints="vllm-engine-service",
            crashed={"vllm-1": 1},
            stale=(gone,),
        ),
        description=f.description,
    )
