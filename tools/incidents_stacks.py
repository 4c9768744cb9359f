"""Bundled incidents on the serving stacks around vLLM and SGLang, each recorded twice.

One incident per stack, told with a story the other fixtures already prove (KV pressure,
a prefix-cache miss, a traffic burst, a throttled GPU): `stack-X` is the signal-level
fixture of its Fleet, `stack-X-raw` what that stack's exporters would have shown a Prometheus
Operator scrape of the cluster (`tools/rawstacks.py`, `tools/rawstacks_native.py`), with a
confounder fleet beside it where the stack invites one. Both carry the same expectation; the
raw one also names its fleet (`expect.fleet`, as `triage fleets` prints it), which a
signal-level fixture cannot hold, so its replay is scoped to that fleet.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from signals.timeparse import format_duration, parse_duration
from tools.incidents_raw import SGLANG_BUILD, vllm_v1_kv_pressure
from tools.rawstacks import (
    KServeFleet,
    RayApp,
    RayServeFleet,
    SglangRanksFleet,
    Site,
    StackFleet,
    Target,
    Vllm033Fleet,
    write_stacks,
)
from tools.rawstacks_native import DcgmDefaultFleet, DynamoFleet, TgiFleet, TritonFleet, TrtllmFleet
from tools.rawsynth import RawSpec
from tools.registry import incident, path
from tools.synth import Fleet

LLAMA_8B = "meta-llama/Llama-3.1-8B-Instruct"
BURST_FORBIDDEN = ["scale_out", "tune_sampling"]
KV_FORBIDDEN = ["scale_out", "raise_gpu_memory_utilization", "raise_max_num_seqs", "tune_sampling"]
PREFIX_FORBIDDEN = ["scale_out", "force_prefix_cache"]


def _twins(
    f: Fleet, symptom: str, at: str, expect: dict[str, Any], raw: list[StackFleet], stack: str
) -> None:
    """`stack-X` (signals, the expectation without the fleet) and `stack-X-raw` (exporters)."""
    f.write(path(f.name), symptom, at=at, expect={k: v for k, v in expect.items() if k != "fleet"})
    raw_name = f"{f.name}-raw"
    description = f"Raw exporter series of the incident '{f.name}' on {stack}: {f.description}"
    write_stacks(path(raw_name), raw_name, symptom, at, expect, raw, description)


def _expect(fleet: str, cause: str, forbidden: list[str]) -> dict[str, Any]:
    return {"fleet": fleet, "cause": cause, "verdict": "cause", "forbidden": forbidden}


def _after(onset: str, minutes: float) -> str:
    return format_duration(parse_duration(onset) + 60 * minutes)


def _scale(f: Fleet, factors: dict[str, float], replicas: list[str] | None = None) -> None:
    """A different baseline (a bigger model, an embedding model): signals times a factor."""
    for signal, factor in factors.items():
        for key in f.keys(signal, replicas):
            f.series[key] = f.series[key] * factor


def _ramp_to(f: Fleet, start: str, end: str, before: float, after: float) -> np.ndarray:
    """A stack-only input of the story: `before` until `start`, `after` from `end`, linear between."""
    i0, i1 = f.idx(start), f.idx(end)
    return np.asarray(before + (after - before) * np.clip((np.arange(f.n) - i0) / max(1, i1 - i0), 0, 1))


def traffic_burst(f: Fleet, onset: str, queue: float = 15.0, ttft: float = 4.0) -> None:
    """The SGLang burst story (traffic-burst-sglang): arrivals double within two minutes, every
    replica's queue and TTFT rise at once, KV and GPUs were healthy before."""
    then = _after(onset, 1)
    f.step("request_rate", onset, factor=2.1, ramp="2m")
    f.step("prompt_tokens_rate", onset, factor=2.1, ramp="2m")
    f.step("generation_tokens_rate", onset, factor=2.0, ramp="2m")
    f.step("queue_waiting", then, to=queue, ramp="2m")
    f.step("requests_running", then, factor=1.6, ramp="2m")
    f.step("queue_time_p99_seconds", then, factor=10, ramp="2m")
    f.step("ttft_p99_seconds", then, factor=ttft, ramp="2m")
    f.step("ttft_p50_seconds", then, factor=2, ramp="2m")
    f.step("kv_usage_ratio", then, to=0.8, ramp="3m")
    if ("rejected_ratio", ()) in f.series:
        f.step("rejected_ratio", _after(onset, 2), to=0.04, ramp="2m")


def prefix_cache_miss(f: Fleet, onset: str) -> None:
    """The prefix-cache-miss story (prefix-cache-miss-vllm-mixed): a template change puts a request
    id first, the hit ratio falls to ~0.15 on every replica, prefills run in full."""
    f.step("prefix_hit_ratio", onset, to=0.15, ramp="1m")
    f.step("prefill_time_p99_seconds", onset, factor=2.6, ramp="2m")
    f.step("queue_time_p99_seconds", onset, factor=3.0, ramp="3m")
    f.step("queue_waiting", onset, to=2.0, ramp="3m")
    f.step("ttft_p99_seconds", onset, factor=2.4, ramp="2m")
    f.step("ttft_p50_seconds", onset, factor=2.0, ramp="2m")
    f.step("e2e_p99_seconds", onset, factor=1.1, ramp="2m")
    f.step("tpot_p99_seconds", onset, factor=1.1, ramp="2m")


@incident
def stack_ray_serve() -> None:
    f = Fleet(
        "stack-ray-serve",
        "Ray Serve LLM (KubeRay cluster raycluster-llm, Ray 2.60, vLLM 0.29): application llm-app "
        "serves Llama-3.1-8B on four replicas. A long-document batch job grew the contexts; KV filled "
        "on every replica within minutes and the engines began preempting; TPOT and TTFT tails rose "
        "together. Beside it in the same Ray cluster, application embed-app (an embedding model, two "
        "replicas) is healthy while its traffic grows through the hour.",
        replicas=4,
        duration="70m",
        seed=401,
        prefix="llm-app",
        gpu_signals=False,
    )
    vllm_v1_kv_pressure(f, "40m")
    embed = Fleet(
        "stack-ray-serve-embed",
        "embed-app",
        replicas=2,
        duration="70m",
        seed=402,
        prefix="embed-app",
        gpu_signals=False,
    )
    _scale(
        embed,
        {
            "e2e_p99_seconds": 0.009,
            "prompt_tokens_p95": 0.28,
            "prompt_tokens_rate": 0.25,
            "generation_tokens_rate": 0.0,
            "output_tokens_p95": 0.0,
            "requests_running": 0.15,
            "kv_usage_ratio": 0.2,
            "queue_waiting": 0.3,
        },
    )
    for signal in ("request_rate", "prompt_tokens_rate"):
        embed.ramp(signal, "5m", "65m", 1.7)

    def site(subnet: int) -> Site:
        return Site("ray", "raycluster-llm", "RayCluster", subnet, "rayproject/ray-llm:2.60.0-py311-cu128")

    llm = RayServeFleet(
        f,
        RawSpec(model=LLAMA_8B, namespace="ray", created=False),
        site(11),
        RayApp("llm-app", "/llm"),
    )
    embedder = RayServeFleet(
        embed,
        RawSpec(model="Qwen/Qwen3-Embedding-0.6B", namespace="ray", created=False),
        site(12),
        RayApp("embed-app", "/embed", head=False, pooling=True),
    )
    _twins(
        f,
        "tpot_slow",
        "62m",
        _expect(f"ray/{LLAMA_8B}@RayServe/raycluster-llm/llm-app", "kv_pressure", KV_FORBIDDEN),
        [llm, embedder],
        "Ray Serve LLM",
    )


@incident
def stack_dynamo() -> None:
    f = Fleet(
        "stack-dynamo",
        "NVIDIA Dynamo 1.6 serving Qwen3-32B disaggregated (graph llm-prod): two vLLM prefill workers "
        "and three decode workers behind the Dynamo frontend. A client began replaying a backlog: the "
        "request rate doubled within two minutes, the frontend's queue and TTFT rose, and the prefill "
        "pool's queue grew. The decode pool runs its KV cache at ~0.85 before and after, as "
        "disaggregated decode workers are sized to.",
        replicas=5,
        duration="70m",
        seed=411,
        prefix="worker",
        gpu_signals=False,
    )
    prefill, decode = f.names[:2], f.names[2:]
    _scale(
        f,
        {"output_tokens_p95": 1 / 420, "generation_tokens_rate": 4 / 1250, "requests_running": 0.15},
        prefill,
    )
    _scale(f, {"requests_running": 1.6}, decode)
    f.set("kv_usage_ratio", "0m", 0.3, replicas=prefill)
    f.set("kv_usage_ratio", "0m", 0.85, replicas=decode)
    onset = "40m"
    for signal, factor in (
        ("request_rate", 2.0),
        ("prompt_tokens_rate", 2.0),
        ("generation_tokens_rate", 1.9),
    ):
        f.step(signal, onset, factor=factor, ramp="2m")
    f.step("queue_waiting", "41m", to=18, replicas=prefill, ramp="2m")
    f.step("queue_time_p99_seconds", "41m", factor=10, replicas=prefill, ramp="2m")
    f.step("ttft_p99_seconds", "41m", factor=4, replicas=prefill, ramp="2m")
    f.step("ttft_p50_seconds", "41m", factor=2.2, replicas=prefill, ramp="2m")
    f.step("prefill_time_p99_seconds", "41m", factor=1.5, replicas=prefill, ramp="2m")
    f.step("requests_running", "41m", factor=1.5, ramp="2m")
    f.step("queue_waiting", "41m", to=3, replicas=decode, ramp="2m")
    f.step("queue_time_p99_seconds", "41m", factor=3, replicas=decode, ramp="2m")
    f.step("ttft_p99_seconds", "41m", factor=2.5, replicas=decode, ramp="2m")
    f.step("ttft_p50_seconds", "41m", factor=1.8, replicas=decode, ramp="2m")
    f.step("tpot_p99_seconds", "41m", factor=1.15, replicas=decode, ramp="2m")
    f.step("kv_usage_ratio", "41m", to=0.87, replicas=decode, ramp="3m")
    f.step("rejected_ratio", "42m", to=0.02, ramp="2m")
    # every request prefills on one worker and decodes on another: the fleet's own arrivals and
    # tokens are the frontend's, which the decode pool's sum equals
    for signal in ("request_rate", "prompt_tokens_rate", "generation_tokens_rate"):
        f.series[signal, ()] = np.sum([f.series[k] for k in f.keys(signal, decode)], axis=0)
    site = Site(
        "dynamo",
        "llm-prod-vllmdecodeworker",
        subnet=21,
        image="nvcr.io/nvidia/ai-dynamo/vllm-runtime:1.6.1",
        workloads={x: "llm-prod-vllmprefillworker" for x in prefill},
    )
    raw = DynamoFleet(
        f,
        RawSpec(model="Qwen/Qwen3-32B", namespace="dynamo", created=False, max_model_len=40960),
        site,
        prefill=2,
    )
    _twins(
        f,
        "ttft_slow",
        "58m",
        _expect("dynamo/Qwen/Qwen3-32B@Dynamo/llm_prod", "traffic_burst", BURST_FORBIDDEN),
        [raw],
        "NVIDIA Dynamo",
    )


@incident
def stack_kserve() -> None:
    f = Fleet(
        "stack-kserve",
        "KServe 0.21 in namespace serving: InferenceService llama-chat (huggingfaceserver runtime, "
        "vLLM 0.24, Knative; three replicas mid-rollout, one still on revision 00001) serves "
        "Llama-3.1-8B as /mnt/models. A chat template change put a request id on the first line of "
        "the system prompt: the prefix hit ratio fell from ~0.62 to ~0.15 on every replica at once "
        "and TTFT rose at unchanged prompt length and request rate. Beside it InferenceService "
        "llama-batch (two replicas, also /mnt/models) is busy and healthy, and LLMInferenceService "
        "qwen-llmd (Qwen/Qwen3-8B, two replicas) is healthy.",
        replicas=3,
        duration="70m",
        seed=421,
        prefix="llama-chat",
        gpu_signals=False,
    )
    prefix_cache_miss(f, "42m")
    batch = Fleet(
        "stack-kserve-batch",
        "llama-batch",
        replicas=2,
        duration="70m",
        seed=422,
        prefix="llama-batch",
        gpu_signals=False,
    )
    _scale(
        batch,
        {
            "request_rate": 1.4,
            "prompt_tokens_rate": 1.6,
            "generation_tokens_rate": 1.5,
            "requests_running": 1.6,
            "kv_usage_ratio": 1.35,
        },
    )
    qwen = Fleet(
        "stack-kserve-qwen",
        "qwen-llmd",
        replicas=2,
        duration="70m",
        seed=423,
        prefix="qwen-llmd",
        gpu_signals=False,
    )
    image = "kserve/huggingfaceserver:v0.21.0-gpu"
    chat_site = Site(
        "serving",
        "llama-chat-predictor-00002-deployment",
        subnet=31,
        image=image,
        workloads={f.names[2]: "llama-chat-predictor-00001-deployment"},
    )
    batch_site = Site("serving", "llama-batch-predictor-00002-deployment", subnet=32, image=image)
    qwen_site = Site(
        "serving",
        "qwen-llmd-kserve",
        subnet=33,
        image="ghcr.io/llm-d/llm-d-cuda:v0.4.0",
        pod_labels={
            "label_app_kubernetes_io_name": "qwen-llmd",
            "label_kserve_io_component": "workload",
            "label_llm_d_ai_role": "decode",
            "label_app_kubernetes_io_part_of": "llminferenceservice",
        },
    )
    mnt = RawSpec(model="/mnt/models", namespace="serving", created=False)
    parts: list[StackFleet] = [
        KServeFleet(f, mnt, chat_site, "llama-chat"),
        KServeFleet(batch, mnt, batch_site, "llama-batch"),
        KServeFleet(
            qwen,
            RawSpec(model="Qwen/Qwen3-8B", namespace="serving", created=False),
            qwen_site,
            "qwen-llmd",
            knative=False,
        ),
    ]
    _twins(
        f,
        "ttft_slow",
        "62m",
        _expect("serving/llama-chat@InferenceService/llama-chat", "prefix_cache_miss", PREFIX_FORBIDDEN),
        parts,
        "KServe",
    )


@incident
def stack_tgi() -> None:
    f = Fleet(
        "stack-tgi",
        "Text Generation Inference 3.3 (Deployment tgi-mistral-7b, three replicas, no model label on "
        "any series). A load test was pointed at production: arrivals doubled within two minutes, the "
        "batch grew, queues grew at once on every replica, and TPOT rose with the batch.",
        replicas=3,
        duration="70m",
        seed=431,
        prefix="tgi",
        gpu_signals=False,
    )
    at = "40m"
    f.step("request_rate", at, factor=2.1, ramp="2m")
    f.step("prompt_tokens_rate", at, factor=2.1, ramp="2m")
    f.step("generation_tokens_rate", at, factor=2.0, ramp="2m")
    f.step("queue_waiting", "41m", to=14, ramp="2m")
    f.step("requests_running", "41m", factor=1.6, ramp="2m")
    f.step("tpot_p99_seconds", "41m", factor=2.2, ramp="2m")
    f.step("tpot_p50_seconds", "41m", factor=1.8, ramp="2m")
    f.step("prefill_time_p99_seconds", "41m", factor=1.6, ramp="2m")
    f.step("queue_time_p99_seconds", "41m", factor=8, ramp="2m")
    f.step("e2e_p99_seconds", "41m", factor=1.9, ramp="2m")
    f.step("kv_usage_ratio", "41m", to=0.78, ramp="3m")
    site = Site(
        "llm", "tgi-mistral-7b", subnet=41, image="ghcr.io/huggingface/text-generation-inference:3.3.7"
    )
    target = Target("tgi-mistral-7b", "http", 80, "tgi", service="tgi-mistral-7b")
    raw = TgiFleet(
        f, RawSpec(model="mistralai/Mistral-7B-Instruct-v0.3", namespace="llm", created=False), site, target
    )
    _twins(
        f,
        "tpot_slow",
        "62m",
        _expect("llm@Deployment/tgi-mistral-7b", "traffic_burst", BURST_FORBIDDEN),
        [raw],
        "TGI",
    )


@incident
def stack_trtllm() -> None:
    f = Fleet(
        "stack-trtllm",
        "trtllm-serve (TensorRT-LLM, Deployment trtllm-llama, three replicas of Llama-3.1-70B on four "
        "GPUs each). A template change put a request id first in the system prompt: the KV cache hit "
        "rate fell from ~0.62 to ~0.15 on every replica at once, prefills ran in full, and TTFT rose at "
        "unchanged prompt length and request rate.",
        replicas=3,
        duration="70m",
        seed=441,
        prefix="trtllm",
        gpu_signals=False,
    )
    _scale(
        f,
        {
            "ttft_p99_seconds": 1.6,
            "ttft_p50_seconds": 1.6,
            "tpot_p99_seconds": 1.9,
            "tpot_p50_seconds": 1.9,
            "e2e_p99_seconds": 1.9,
            "request_rate": 0.5,
            "prompt_tokens_rate": 0.5,
            "generation_tokens_rate": 0.5,
            "prefill_time_p99_seconds": 1.6,
        },
    )
    prefix_cache_miss(f, "42m")
    model = "meta-llama/Llama-3.1-70B-Instruct"
    site = Site(
        "llm", "trtllm-llama", subnet=51, image="nvcr.io/nvidia/tensorrt-llm/release:1.3.0rc29", per_node=2
    )
    target = Target("trtllm-llama", "http", 8000, "trtllm-serve", service="trtllm-llama")
    raw = TrtllmFleet(f, RawSpec(model=model, namespace="llm"), site, target)
    _twins(
        f,
        "ttft_slow",
        "62m",
        _expect(f"llm/{model}@Deployment/trtllm-llama", "prefix_cache_miss", PREFIX_FORBIDDEN),
        [raw],
        "trtllm-serve",
    )


@incident
def stack_triton() -> None:
    f = Fleet(
        "stack-triton",
        "Triton Inference Server with the TensorRT-LLM backend (Deployment triton-llama, four "
        "replicas; an ensemble of preprocessing, tensorrt_llm and postprocessing). A batch client "
        "started hammering the endpoint: the request rate doubled within two minutes and the "
        "backend's waiting requests and TTFT rose at once on every replica; KV was healthy before.",
        replicas=4,
        duration="70m",
        seed=451,
        prefix="triton",
        gpu_signals=False,
    )
    traffic_burst(f, "40m")
    site = Site("llm", "triton-llama", subnet=61, image="nvcr.io/nvidia/tritonserver:25.12-trtllm-python-py3")
    target = Target("triton-llama-metrics", "metrics", 8002, "triton", service="triton-llama-metrics")
    raw = TritonFleet(f, RawSpec(model=LLAMA_8B, namespace="llm", created=False), site, target)
    _twins(
        f,
        "ttft_slow",
        "58m",
        _expect("llm/tensorrt_llm@Deployment/triton-llama", "traffic_burst", BURST_FORBIDDEN),
        [raw],
        "Triton with the TensorRT-LLM backend",
    )


@incident
def stack_vllm_033() -> None:
    f = Fleet(
        "stack-vllm-033",
        "vLLM 0.33 (Deployment vllm-qwen, Qwen3-8B, four replicas) with an LMCache KV-offload tier. A "
        "batch client doubled the request rate within two minutes; queues and TTFT rose on every "
        "replica and the engines began refusing some requests (503). The burst evicted prefixes from "
        "the GPUs' own cache: the local prefix hit ratio fell while the offload tier served the "
        "evicted prefixes back, so the combined hit ratio stayed where it was.",
        replicas=4,
        duration="70m",
        seed=461,
        prefix="vllm",
        gpu_signals=False,
    )
    traffic_burst(f, "40m")
    extras = {
        "local_share": _ramp_to(f, "41m", "44m", 0.97, 0.55),
        "rejected_share": _ramp_to(f, "42m", "44m", 0.001, 0.03),
        "deferred_share": np.full(f.n, 0.08),
    }
    site = Site("llm", "vllm-qwen", subnet=71, image="vllm/vllm-openai:v0.33.0")
    target = Target("vllm-qwen", "http", 8000, "vllm", service="vllm-qwen")
    raw = Vllm033Fleet(f, RawSpec(model="Qwen/Qwen3-8B", namespace="llm"), site, target, extras)
    _twins(
        f,
        "ttft_slow",
        "58m",
        _expect("llm/Qwen/Qwen3-8B@Deployment/vllm-qwen", "traffic_burst", BURST_FORBIDDEN),
        [raw],
        "vLLM 0.33",
    )


@incident
def stack_sglang() -> None:
    f = Fleet(
        "stack-sglang",
        "SGLang 0.5.23 (Deployment sglang-llama, four replicas at TP=2, priority scheduling on, "
        "metrics for every scheduler). A batch client at low priority started hammering the endpoint: "
        "the request rate doubled within two minutes and the queues grew at once on every replica; KV "
        "was healthy before it.",
        replicas=4,
        duration="70m",
        seed=471,
        prefix="sglang",
        gpu_signals=False,
    )
    f.relabel("build_info", "0s", {**SGLANG_BUILD, "engine_version": "0.5.23"})
    traffic_burst(f, "40m")
    extras = {"low_priority_share": _ramp_to(f, "40m", "43m", 0.3, 0.8)}
    site = Site("llm", "sglang-llama", subnet=81, image="lmsysorg/sglang:v0.5.23-cu129", per_node=2)
    target = Target("sglang-llama", "http", 30000, "sglang", service="sglang-llama")
    spec = RawSpec(flavour="sglang", model=LLAMA_8B, namespace="llm", sglang_tokens_histogram=False)
    raw = SglangRanksFleet(f, spec, site, target, extras)
    _twins(
        f,
        "ttft_slow",
        "58m",
        _expect(f"llm/{LLAMA_8B}@Deployment/sglang-llama", "traffic_burst", BURST_FORBIDDEN),
        [raw],
        "SGLang with priority scheduling at TP=2",
    )


@incident
def stack_dcgm() -> None:
    f = Fleet(
        "stack-dcgm",
        "A vLLM fleet (Deployment vllm-llama, six replicas, one H100 each) whose GPU Operator runs "
        "dcgm-exporter's default counters only. One GPU's hardware power brake engaged: its SM clock "
        "fell from ~1980 to ~1100 MHz at a normal temperature and its power draw fell with it; that "
        "replica decodes much slower and its queue grows, and the fleet's P99 rose modestly.",
        replicas=6,
        duration="70m",
        seed=481,
        prefix="vllm",
    )
    hot = f.who(3)
    at = "40m"
    f.set("gpu_throttle", at, 1.0, replicas=hot)
    f.step("gpu_power_watts", at, factor=0.62, replicas=hot, ramp="1m")
    f.step("gpu_temp_celsius", at, factor=0.95, replicas=hot, ramp="3m")
    f.step("gpu_util_ratio", at, to=0.97, replicas=hot, ramp="2m")
    f.step("tpot_p99_seconds", at, factor=2.2, replicas=hot, ramp="2m")
    f.step("tpot_p50_seconds", at, factor=1.9, replicas=hot, ramp="2m")
    f.step("e2e_p99_seconds", at, factor=1.9, replicas=hot, ramp="2m")
    f.step("prefill_time_p99_seconds", at, factor=1.7, replicas=hot, ramp="2m")
    f.step("ttft_p99_seconds", _after(at, 1), factor=1.5, replicas=hot, ramp="3m")
    f.step("requests_running", _after(at, 1), factor=1.5, replicas=hot, ramp="3m")
    f.step("kv_usage_ratio", _after(at, 1), to=0.7, replicas=hot, ramp="4m")
    f.step("queue_waiting", _after(at, 2), to=4.5, replicas=hot, ramp="3m")
    f.step("generation_tokens_rate", at, factor=0.9, replicas=hot, ramp="2m")
    site = Site("llm", "vllm-llama", subnet=91, image="vllm/vllm-openai:v0.12.0")
    target = Target("vllm-llama", "http", 8000, "vllm", service="vllm-llama")
    raw = DcgmDefaultFleet(f, RawSpec(model=LLAMA_8B, namespace="llm"), site, target)
    _twins(
        f,
        "tpot_slow",
        "62m",
        _expect(f"llm/{LLAMA_8B}@Deployment/vllm-llama", "gpu_throttling", BURST_FORBIDDEN),
        [raw],
        "a GPU Operator running dcgm-exporter's default counters",
    )
