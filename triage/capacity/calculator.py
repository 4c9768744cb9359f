"""`triage capacity`: the production chapter's capacity-planning method as a calculator.

The chapter (seeds, 第 21 篇 "容量规划：需要几张卡") plans in two halves, and so does this
module. Memory first, per GPU: the checklist's "容量与显存" asks that four parts be
counted (weights, KV, activations, fixed overhead), that KV per token be worked out from
layers, KV heads, head dim and precision (so GQA, MQA and KV quantisation show), and that
"available KV ÷ KV per request" bound the concurrency before a load test refines it.
Then replicas: peak rate ÷ the rate one replica sustains within SLO, rounded up, plus
redundancy so one failure or a rolling update still meets the SLO (30 req/s ÷ 4 = 7.5 →
8, plus 1–2 → 9–10 GPUs in the chapter's example).

Everything here is pure and deterministic except `load_inputs`, the one function that
reads a file. A model that does not fit is a result (`CapacityPlan.fits` is False, with
the shortfall and the smallest tensor-parallel size that would fit), never a negative
number of bytes. Memory is counted in bytes; GPU sizes are what the driver reports
(`nvidia-smi --query-gpu=memory.total`, MiB), because that is what vLLM's
`gpu_memory_utilization` multiplies, not the marketing "80 GB".
"""

from __future__ import annotations

import difflib
import math
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from typing import Any, Final, ParamSpec, TypeVar

import numpy as np

from signals.errors import InputError, InputErrors
from signals.frame import SignalFrame
from signals.yamldoc import Document, key_name, read_yaml

GIB: Final = 1024**3
MIB: Final = 1024**2
GB: Final = 10**9

RED_LINE_UTILIZATION: Final = 0.95
"""The checklist's red line: above it there is no room for fragmentation, CUDA graphs or a stray process."""
DEFAULT_UTILIZATION: Final = 0.90
"""vLLM's own default for gpu_memory_utilization."""
DEFAULT_ACTIVATION_FRACTION: Final = 0.05
"""Activation peak as a share of the per-GPU budget.

vLLM measures the peak with a profiling forward pass of `max_num_batched_tokens` at
start-up and logs it ("activation peak memory"); for 7–72B models at the default batch
budget that is about 1–4 GiB. 5% of an 80 GB card's budget (≈3.6 GiB) covers it; replace
it with your own log line when you have one.
"""
DEFAULT_OVERHEAD_BYTES: Final = 2 * GIB
"""Fixed per-GPU overhead outside the model: CUDA context (≈0.5 GiB), CUDA graphs
(≈0.5–1 GiB captured at start-up) and NCCL buffers under tensor parallelism. Counted
inside the budget because the engine allocates them too."""
DEFAULT_CONTEXT_TOKENS: Final = 4096
DEFAULT_BLOCK_SIZE: Final = 16
"""vLLM's KV block size: a request holds whole blocks, so its context rounds up to 16 tokens."""
DEFAULT_REDUNDANCY: Final = 1

WEIGHT_BITS: Final[Mapping[str, int]] = {
    "fp32": 32,
    "fp16": 16,
    "bf16": 16,
    "fp8": 8,
    "int8": 8,
    "int4": 4,
}
KV_BITS: Final[Mapping[str, int]] = {
    "fp16": 16,
    "bf16": 16,
    "fp8": 8,
    "fp8_e4m3": 8,
    "fp8_e5m2": 8,
    "int8": 8,
    "int4": 4,
}
KV_AUTO: Final = "auto"
"""As vLLM's `--kv-cache-dtype auto`: the model's compute dtype, 16-bit unless weights are fp32."""


# --- specs and presets ---------------------------------------------------------------------------


@dataclass(frozen=True)
class ModelSpec:
    """The few numbers of a model's config that decide its memory.

    `params` counts every weight that must be resident: for a mixture of experts that is
    all experts, not the ones a token activates (every expert may be routed to at any step).
    """

    name: str
    layers: int
    hidden_size: int
    attention_heads: int
    kv_heads: int
    head_dim: int
    params: int
    experts: int = 1
    experts_per_token: int = 1
    source: str = ""

    @property
    def attention(self) -> str:
        """MHA, GQA or MQA: what decides how many KV heads each token stores."""
        if self.kv_heads == self.attention_heads:
            return "MHA"
        return "MQA" if self.kv_heads == 1 else "GQA"

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "layers": self.layers,
            "hidden_size": self.hidden_size,
            "attention_heads": self.attention_heads,
            "kv_heads": self.kv_heads,
            "head_dim": self.head_dim,
            "params": self.params,
            "experts": self.experts,
            "experts_per_token": self.experts_per_token,
            "attention": self.attention,
        }


@dataclass(frozen=True)
class GpuSpec:
    """A GPU's memory as the driver reports it, in bytes (what gpu_memory_utilization multiplies)."""

    name: str
    memory_bytes: int
    label: str = ""
    note: str = ""

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "label": self.label, "memory_bytes": self.memory_bytes}


def _model(
    name: str,
    layers: int,
    hidden: int,
    heads: int,
    kv: int,
    params: int,
    source: str,
    experts: int = 1,
    active: int = 1,
) -> ModelSpec:
    return ModelSpec(name, layers, hidden, heads, kv, hidden // heads, params, experts, active, source)


MODEL_PRESETS: Final[Mapping[str, ModelSpec]] = {
    # Published Hugging Face configs; params are the exact safetensors totals (untied embeddings).
    "llama-3.1-8b": _model("llama-3.1-8b", 32, 4096, 32, 8, 8_030_261_248, "meta-llama/Llama-3.1-8B"),
    "llama-3.1-70b": _model("llama-3.1-70b", 80, 8192, 64, 8, 70_553_706_496, "meta-llama/Llama-3.1-70B"),
    "qwen2.5-7b": _model("qwen2.5-7b", 28, 3584, 28, 4, 7_615_616_512, "Qwen/Qwen2.5-7B-Instruct"),
    "qwen2.5-72b": _model("qwen2.5-72b", 80, 8192, 64, 8, 72_706_203_648, "Qwen/Qwen2.5-72B-Instruct"),
    "mixtral-8x7b": _model(
        "mixtral-8x7b", 32, 4096, 32, 8, 46_702_792_704, "mistralai/Mixtral-8x7B-Instruct-v0.1", 8, 2
    ),
}

_SMI = "nvidia-smi memory.total"
GPU_PRESETS: Final[Mapping[str, GpuSpec]] = {
    # The marketing size is GiB on A100 (40/80 GiB exactly), a little under it on H100 and
    # H200, and decimal GB on L40S, whose ECC (on by default) takes 1/16 of its 48 GiB.
    "a100-40gb": GpuSpec("a100-40gb", 40960 * MIB, "A100 40GB", f"{_SMI} 40960 MiB = 40 GiB = 42.9 GB"),
    "a100-80gb": GpuSpec("a100-80gb", 81920 * MIB, "A100 80GB", f"{_SMI} 81920 MiB = 80 GiB = 85.9 GB"),
    "h100-80gb": GpuSpec("h100-80gb", 81559 * MIB, "H100 80GB", f"{_SMI} 81559 MiB = 79.6 GiB = 85.5 GB"),
    "h200-141gb": GpuSpec(
        "h200-141gb", 143771 * MIB, "H200 141GB", f"{_SMI} 143771 MiB = 140.4 GiB = 150.8 GB"
    ),
    "l40s-48gb": GpuSpec(
        "l40s-48gb", 46068 * MIB, "L40S 48GB", f"{_SMI} 46068 MiB (ECC on) = 45.0 GiB = 48.3 GB"
    ),
}


# --- errors ----------------------------------------------------------------------------------------


class CapacityError(ValueError):
    """Inputs that cannot be planned; each problem names the input key it is about."""

    def __init__(self, problems: list[tuple[str, str]]) -> None:
        self.problems = tuple(problems)
        super().__init__("; ".join(f"{key}: {message}" for key, message in problems))


def _suggest(name: str, choices: list[str]) -> str:
    close = difflib.get_close_matches(name, choices, n=1, cutoff=0.6)
    return f" (did you mean {close[0]}?)" if close else ""


def kv_bits(kv_dtype: str, weight_dtype: str = "bf16") -> int:
    """Bits per KV element; `auto` follows the model's compute dtype, as vLLM does."""
    if kv_dtype == KV_AUTO:
        return 32 if weight_dtype == "fp32" else 16
    if kv_dtype not in KV_BITS:
        raise CapacityError([("kv_dtype", f"unknown '{kv_dtype}'{_suggest(kv_dtype, list(KV_BITS))}")])
    return KV_BITS[kv_dtype]


def weight_bits(weight_dtype: str) -> int:
    """Bits per weight for a weight dtype name."""
    if weight_dtype not in WEIGHT_BITS:
        raise CapacityError(
            [("weight_dtype", f"unknown '{weight_dtype}'{_suggest(weight_dtype, list(WEIGHT_BITS))}")]
        )
    return WEIGHT_BITS[weight_dtype]


def _parallel_problems(model: ModelSpec, tp: int) -> list[tuple[str, str]]:
    """What vLLM itself refuses: heads that do not split evenly across the TP group."""
    if tp < 1:
        return [("tp", "must be at least 1")]
    if model.attention_heads % tp:
        return [("tp", f"{tp} does not divide {model.name}'s {model.attention_heads} attention heads")]
    if model.kv_heads % tp and tp % model.kv_heads:
        return [("tp", f"{tp} and {model.name}'s {model.kv_heads} KV heads must divide one another")]
    return []


def kv_heads_per_gpu(model: ModelSpec, tp: int = 1) -> int:
    """KV heads each GPU of a TP group stores: a share, or a replica when there are fewer heads than GPUs."""
    return max(1, model.kv_heads // tp)


# --- the four parts of memory ----------------------------------------------------------------------


def kv_bytes_per_token(model: ModelSpec, kv_dtype: str, *, tp: int = 1, weight_dtype: str = "bf16") -> int:
    """KV bytes one token holds: layers × KV heads × head dim × 2 (K and V) × bytes per element.

    GQA and MQA enter through the KV heads, KV quantisation through `kv_dtype`. With
    `tp` > 1 this is one GPU's share; when the group is wider than the KV heads each GPU
    keeps a full replica of a head, so the share stops shrinking (MQA under TP stores the
    same head on every GPU).
    """
    bits = kv_bits(kv_dtype, weight_dtype)
    return model.layers * kv_heads_per_gpu(model, tp) * model.head_dim * 2 * bits // 8


@dataclass(frozen=True)
class MemoryBudget:
    """One GPU's memory under gpu_memory_utilization, split into the checklist's four parts.

    `kv_bytes` is what is left for the KV cache and never negative: when weights,
    activations and overhead exceed the budget, `kv_bytes` is 0 and `shortfall_bytes`
    says by how much.
    """

    total_bytes: int
    utilization: float
    budget_bytes: int
    weights_bytes: int
    activation_bytes: int
    overhead_bytes: int
    kv_bytes: int
    shortfall_bytes: int
    tp: int
    activation_fraction: float

    @property
    def weights_fit(self) -> bool:
        return self.shortfall_bytes == 0

    def to_json(self) -> dict[str, Any]:
        return {
            "total_bytes": self.total_bytes,
            "gpu_memory_utilization": self.utilization,
            "budget_bytes": self.budget_bytes,
            "weights_bytes": self.weights_bytes,
            "activation_bytes": self.activation_bytes,
            "activation_fraction": self.activation_fraction,
            "overhead_bytes": self.overhead_bytes,
            "kv_bytes": self.kv_bytes,
            "shortfall_bytes": self.shortfall_bytes,
            "tp": self.tp,
        }


def memory_budget(
    model: ModelSpec,
    gpu: GpuSpec,
    *,
    tp: int = 1,
    weight_dtype: str = "bf16",
    gpu_memory_utilization: float = DEFAULT_UTILIZATION,
    activation_fraction: float = DEFAULT_ACTIVATION_FRACTION,
    overhead_bytes: int = DEFAULT_OVERHEAD_BYTES,
) -> MemoryBudget:
    """Split one GPU's budget (total × utilization) into weights, activations, overhead and KV.

    Weights are params × bytes per weight ÷ tp: tensor parallelism shards every matrix
    (experts included), so each GPU holds its share. Activations are a stated estimate,
    `activation_fraction` of the budget; overhead is a fixed amount per GPU.
    """
    problems = _parallel_problems(model, tp)
    if not 0 < gpu_memory_utilization <= 1:
        problems.append(("gpu_memory_utilization", "must be above 0 and at most 1"))
    if not 0 <= activation_fraction < 1:
        problems.append(("activation_fraction", "must be at least 0 and below 1"))
    if overhead_bytes < 0:
        problems.append(("overhead_gib", "must not be negative"))
    if problems:
        raise CapacityError(problems)
    bits = weight_bits(weight_dtype)
    budget = math.floor(gpu.memory_bytes * gpu_memory_utilization)
    weights = math.ceil(model.params * bits / 8 / tp)
    activations = math.floor(budget * activation_fraction)
    left = budget - weights - activations - overhead_bytes
    return MemoryBudget(
        total_bytes=gpu.memory_bytes,
        utilization=gpu_memory_utilization,
        budget_bytes=budget,
        weights_bytes=weights,
        activation_bytes=activations,
        overhead_bytes=overhead_bytes,
        kv_bytes=max(0, left),
        shortfall_bytes=max(0, -left),
        tp=tp,
        activation_fraction=activation_fraction,
    )


def request_tokens(context_tokens: int, block_size: int = DEFAULT_BLOCK_SIZE) -> int:
    """Tokens of KV a request occupies: its context rounded up to whole blocks."""
    return -(-context_tokens // block_size) * block_size


def concurrency_ceiling(
    kv_bytes: int, kv_bytes_per_token: int, context_tokens: int, *, block_size: int = DEFAULT_BLOCK_SIZE
) -> int:
    """How many requests of `context_tokens` (prompt + output) fit in `kv_bytes` at once.

    Memory only, an upper bound: the engine's max_num_seqs, its batch budget and the SLO
    usually stop it earlier, which is why the checklist asks to correct it with a load
    test. Under TP pass one GPU's KV and one GPU's share per token; the answer is the
    group's, since every GPU holds its share of every request.
    """
    if context_tokens < 1 or block_size < 1 or kv_bytes_per_token < 1:
        raise CapacityError([("context_tokens", "context, block size and KV per token must be positive")])
    per_request = request_tokens(context_tokens, block_size) * kv_bytes_per_token
    return max(0, kv_bytes) // per_request


# --- replicas ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ReplicaPlan:
    """Replicas for a peak: ceil(peak ÷ per-replica rate at SLO) plus redundancy."""

    peak_rate: float
    per_replica_rate: float
    ratio: float
    base: int
    redundancy: int
    source: str = "given"

    @property
    def replicas(self) -> int:
        return self.base + self.redundancy

    def to_json(self) -> dict[str, Any]:
        return {
            "peak_rate": self.peak_rate,
            "per_replica_rate": self.per_replica_rate,
            "per_replica_rate_source": self.source,
            "ratio": self.ratio,
            "base": self.base,
            "redundancy": self.redundancy,
            "replicas": self.replicas,
        }


def replicas_needed(
    peak_rate: float, per_replica_rate: float, redundancy: int = DEFAULT_REDUNDANCY, *, source: str = "given"
) -> ReplicaPlan:
    """The chapter's step 4: replicas = peak ÷ one replica's capacity at SLO, rounded up, + redundancy.

    Redundancy (1 by default, the chapter says 1–2) keeps the SLO while one replica fails
    or is replaced in a rolling update. The ratio is rounded to 9 places before the
    ceiling so that float noise (0.9 ÷ 0.03 = 30.000000000000004) does not buy a GPU.
    """
    problems: list[tuple[str, str]] = []
    if not (math.isfinite(peak_rate) and peak_rate > 0):
        problems.append(("peak_rate", "must be a positive number of requests per second"))
    if not (math.isfinite(per_replica_rate) and per_replica_rate > 0):
        problems.append(("per_replica_rate", "must be a positive number of requests per second"))
    if redundancy < 0:
        problems.append(("redundancy", "must not be negative"))
    if problems:
        raise CapacityError(problems)
    ratio = peak_rate / per_replica_rate
    base = max(1, math.ceil(round(ratio, 9)))
    return ReplicaPlan(peak_rate, per_replica_rate, ratio, base, redundancy, source)


@dataclass(frozen=True)
class RateMeasurement:
    """The highest request rate one replica served with TTFT P99 and TPOT P99 both within SLO.

    `lower_bound` is True when no replica ever breached the SLO in the frame: the fleet
    was never pushed to its limit, so the true capacity is at least `rate`, maybe more.
    """

    rate: float
    replica: str
    at: float
    lower_bound: bool

    def describe(self) -> str:
        bound = "; a lower bound: no replica breached the SLO in the window" if self.lower_bound else ""
        return f"measured: highest rate within SLO, replica {self.replica}{bound}"


def measure_rate_at_slo(
    frame: SignalFrame, ttft_slo: float = 1.0, tpot_slo: float = 0.05
) -> RateMeasurement | None:
    """Find the step and replica with the highest request rate while both P99s met the SLO.

    A step counts only when all three signals are known for that replica: an unknown
    latency is not a latency within SLO. P99 is stricter than the chapter's P95, so the
    rate errs low, which is the safe side for capacity. None when no step qualifies.
    """
    rate_view = frame.replicas("request_rate")
    ttft_view = frame.replicas("ttft_p99_seconds")
    tpot_view = frame.replicas("tpot_p99_seconds")
    ttft_rows = dict(zip(ttft_view.replicas, ttft_view.values, strict=True))
    tpot_rows = dict(zip(tpot_view.replicas, tpot_view.values, strict=True))
    best: tuple[float, str, float] | None = None
    breached = False
    for name, rate in zip(rate_view.replicas, rate_view.values, strict=True):
        ttft = ttft_rows.get(name)
        tpot = tpot_rows.get(name)
        if ttft is None or tpot is None:
            continue
        known = np.isfinite(rate) & np.isfinite(ttft) & np.isfinite(tpot)
        within = known & (ttft <= ttft_slo) & (tpot <= tpot_slo)
        breached = breached or bool((known & ~within).any())
        if not within.any():
            continue
        candidates = np.where(within, rate, -np.inf)
        i = int(np.argmax(candidates))
        if best is None or float(candidates[i]) > best[0]:
            best = (float(candidates[i]), name, float(frame.times[i]))
    if best is None or best[0] <= 0:
        return None
    return RateMeasurement(best[0], best[1], best[2], lower_bound=not breached)


def measured_rate_at_slo(frame: SignalFrame, ttft_slo: float = 1.0, tpot_slo: float = 0.05) -> float | None:
    """The per-replica rate at SLO from a frame (see `measure_rate_at_slo` for where and how sure)."""
    found = measure_rate_at_slo(frame, ttft_slo, tpot_slo)
    return None if found is None else found.rate


# --- the plan ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class CapacityInputs:
    """Everything a plan needs; validated on construction (CapacityError names each bad key)."""

    model: ModelSpec
    gpu: GpuSpec
    tp: int = 1
    weight_dtype: str = "bf16"
    kv_dtype: str = KV_AUTO
    context_tokens: int = DEFAULT_CONTEXT_TOKENS
    gpu_memory_utilization: float = DEFAULT_UTILIZATION
    activation_fraction: float = DEFAULT_ACTIVATION_FRACTION
    overhead_bytes: int = DEFAULT_OVERHEAD_BYTES
    block_size: int = DEFAULT_BLOCK_SIZE
    peak_rate: float | None = None
    per_replica_rate: float | None = None
    per_replica_rate_source: str = "given"
    redundancy: int = DEFAULT_REDUNDANCY

    def __post_init__(self) -> None:
        problems = _parallel_problems(self.model, self.tp)
        if self.weight_dtype not in WEIGHT_BITS:
            problems.append(
                (
                    "weight_dtype",
                    f"unknown '{self.weight_dtype}'{_suggest(self.weight_dtype, list(WEIGHT_BITS))}; "
                    f"one of {', '.join(WEIGHT_BITS)}",
                )
            )
        if self.kv_dtype != KV_AUTO and self.kv_dtype not in KV_BITS:
            problems.append(
                (
                    "kv_dtype",
                    f"unknown '{self.kv_dtype}'{_suggest(self.kv_dtype, list(KV_BITS))}; "
                    f"one of {KV_AUTO}, {', '.join(KV_BITS)}",
                )
            )
        if self.context_tokens < 1:
            problems.append(("context_tokens", "must be at least 1"))
        if not 0 < self.gpu_memory_utilization <= 1:
            problems.append(("gpu_memory_utilization", "must be above 0 and at most 1"))
        if not 0 <= self.activation_fraction < 1:
            problems.append(("activation_fraction", "must be at least 0 and below 1"))
        if self.overhead_bytes < 0:
            problems.append(("overhead_gib", "must not be negative"))
        if self.block_size < 1:
            problems.append(("block_size", "must be at least 1"))
        for key in ("peak_rate", "per_replica_rate"):
            value = getattr(self, key)
            if value is not None and not (math.isfinite(value) and value > 0):
                problems.append((key, "must be a positive number of requests per second"))
        if self.redundancy < 0:
            problems.append(("redundancy", "must not be negative"))
        if problems:
            raise CapacityError(problems)

    def to_json(self) -> dict[str, Any]:
        return {
            "model": self.model.to_json(),
            "gpu": self.gpu.to_json(),
            "tp": self.tp,
            "weight_dtype": self.weight_dtype,
            "kv_dtype": self.kv_dtype,
            "context_tokens": self.context_tokens,
            "gpu_memory_utilization": self.gpu_memory_utilization,
            "activation_fraction": self.activation_fraction,
            "overhead_bytes": self.overhead_bytes,
            "block_size": self.block_size,
            "peak_rate": self.peak_rate,
            "per_replica_rate": self.per_replica_rate,
            "redundancy": self.redundancy,
        }


@dataclass(frozen=True)
class CapacityPlan:
    """The calculator's answer: memory per GPU, KV, the concurrency ceiling, replicas, and caveats."""

    inputs: CapacityInputs
    budget: MemoryBudget
    kv_bytes_per_token: int
    kv_bytes_per_token_per_gpu: int
    kv_bytes_per_request_per_gpu: int
    concurrency: int
    replicas: ReplicaPlan | None
    warnings: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()
    smallest_tp: int | None = None
    smallest_tp_fp8: int | None = None

    @property
    def fits(self) -> bool:
        """Whether one request of the stated context fits beside the weights."""
        return self.concurrency >= 1

    @property
    def gpus(self) -> int | None:
        return None if self.replicas is None else self.replicas.replicas * self.inputs.tp

    def why_not(self) -> str:
        """Why the model does not fit, in a sentence an operator can act on ('' when it fits)."""
        if self.fits:
            return ""
        b = self.budget
        if not b.weights_fit:
            head = (
                f"weights ({gib(b.weights_bytes)}), activations ({gib(b.activation_bytes)}) and overhead "
                f"({gib(b.overhead_bytes)}) exceed the {gib(b.budget_bytes)} budget per GPU by "
                f"{gib(b.shortfall_bytes)}, leaving nothing for the KV cache"
            )
        else:
            head = (
                f"the {gib(b.kv_bytes)} left for KV per GPU is less than one request of "
                f"{self.inputs.context_tokens:,} tokens ({gib(self.kv_bytes_per_request_per_gpu)} per GPU)"
            )
        options = []
        if self.smallest_tp_fp8 is not None and WEIGHT_BITS[self.inputs.weight_dtype] > 8:
            options.append(f"fp8 weights at tp {self.smallest_tp_fp8}")
        if self.smallest_tp is not None:
            options.append(f"tp {self.smallest_tp} at {self.inputs.weight_dtype}")
        tail = (
            f"; fits with {' or '.join(options)}" if options else "; no tp up to 8 fits: a bigger GPU or PP"
        )
        return head + tail

    def to_json(self) -> dict[str, Any]:
        return {
            "inputs": self.inputs.to_json(),
            "fits": self.fits,
            "why_not": self.why_not() or None,
            "memory_per_gpu": self.budget.to_json(),
            "kv": {
                "bytes_per_token": self.kv_bytes_per_token,
                "bytes_per_token_per_gpu": self.kv_bytes_per_token_per_gpu,
                "bytes_per_request_per_gpu": self.kv_bytes_per_request_per_gpu,
                "kv_bits": kv_bits(self.inputs.kv_dtype, self.inputs.weight_dtype),
            },
            "concurrency_ceiling": self.concurrency,
            "replicas": None if self.replicas is None else self.replicas.to_json(),
            "gpus": self.gpus,
            "smallest_tp": self.smallest_tp,
            "smallest_tp_fp8": self.smallest_tp_fp8,
            "warnings": list(self.warnings),
            "notes": list(self.notes),
        }


TP_CANDIDATES: Final = (1, 2, 4, 8)


def _ceiling_for(inputs: CapacityInputs) -> tuple[MemoryBudget, int, int]:
    b = memory_budget(
        inputs.model,
        inputs.gpu,
        tp=inputs.tp,
        weight_dtype=inputs.weight_dtype,
        gpu_memory_utilization=inputs.gpu_memory_utilization,
        activation_fraction=inputs.activation_fraction,
        overhead_bytes=inputs.overhead_bytes,
    )
    per_token = kv_bytes_per_token(
        inputs.model, inputs.kv_dtype, tp=inputs.tp, weight_dtype=inputs.weight_dtype
    )
    ceiling = concurrency_ceiling(b.kv_bytes, per_token, inputs.context_tokens, block_size=inputs.block_size)
    return b, per_token, ceiling


def _smallest_tp(inputs: CapacityInputs, weight_dtype: str) -> int | None:
    """The narrowest TP group (1, 2, 4, 8) in which one request of the context fits."""
    for tp in TP_CANDIDATES:
        if _parallel_problems(inputs.model, tp):
            continue
        if _ceiling_for(replace(inputs, tp=tp, weight_dtype=weight_dtype))[2] >= 1:
            return tp
    return None


def plan(inputs: CapacityInputs) -> CapacityPlan:
    """Work the chapter's method through for one model on one GPU type."""
    budget, per_token_gpu, ceiling = _ceiling_for(inputs)
    per_token = kv_bytes_per_token(inputs.model, inputs.kv_dtype, weight_dtype=inputs.weight_dtype)
    per_request = request_tokens(inputs.context_tokens, inputs.block_size) * per_token_gpu
    warnings: list[str] = []
    notes: list[str] = []
    if inputs.gpu_memory_utilization > RED_LINE_UTILIZATION:
        warnings.append(
            f"gpu_memory_utilization {inputs.gpu_memory_utilization:.2f} is above {RED_LINE_UTILIZATION}: "
            "the checklist's red line; leave headroom for fragmentation, CUDA graphs and other "
            "processes or expect OOM under load"
        )
    if inputs.model.kv_heads < inputs.tp:
        warnings.append(
            f"{inputs.model.kv_heads} KV head(s) across tp {inputs.tp}: every GPU stores a replica, so "
            "TP beyond the KV heads adds no KV capacity per token"
        )
    if inputs.kv_dtype != KV_AUTO and KV_BITS[inputs.kv_dtype] < 16:
        notes.append(f"{inputs.kv_dtype} KV cache: check quality on your golden set, not only perplexity")
    if inputs.model.experts > 1:
        notes.append(
            f"mixture of experts: all {inputs.model.experts} experts are resident "
            f"({inputs.model.params / 1e9:.1f}B params), though only {inputs.model.experts_per_token} "
            "run per token"
        )
    notes.append(
        "concurrency is a memory bound only: max_num_seqs, the batch budget and the SLO stop it "
        "earlier; correct it with a load test (compare vLLM's 'Maximum concurrency' start-up line)"
    )
    replicas = None
    fits = ceiling >= 1
    if fits and inputs.peak_rate is not None and inputs.per_replica_rate is not None:
        replicas = replicas_needed(
            inputs.peak_rate,
            inputs.per_replica_rate,
            inputs.redundancy,
            source=inputs.per_replica_rate_source,
        )
        notes.append(
            "the replica count holds only for this model, GPU and request-length distribution; "
            "longer inputs lower a replica's rate at SLO: measure again"
        )
    return CapacityPlan(
        inputs=inputs,
        budget=budget,
        kv_bytes_per_token=per_token,
        kv_bytes_per_token_per_gpu=per_token_gpu,
        kv_bytes_per_request_per_gpu=per_request,
        concurrency=ceiling,
        replicas=replicas,
        warnings=tuple(warnings),
        notes=tuple(notes),
        smallest_tp=None if fits else _smallest_tp(inputs, inputs.weight_dtype),
        smallest_tp_fp8=None if fits else _smallest_tp(inputs, "fp8"),
    )


# --- rendering -----------------------------------------------------------------------------------


def gib(n: int | float) -> str:
    """Bytes in GiB, the unit vLLM logs memory in."""
    return f"{n / GIB:.2f} GiB"


def _bytes_small(n: int) -> str:
    if n >= MIB and n % MIB == 0:
        return f"{n // MIB:,} MiB"
    if n >= 1024 and n % 1024 == 0:
        return f"{n // 1024:,} KiB"
    return f"{n:,} B"


def _rate(value: float) -> str:
    return f"{value:g}"


def render_text(plan: CapacityPlan) -> str:
    """Plain text for a terminal or a ticket; lines are not hard-wrapped, so they grep cleanly."""
    i, b, m = plan.inputs, plan.budget, plan.inputs.model
    bits = kv_bits(i.kv_dtype, i.weight_dtype)
    kv_name = f"{i.kv_dtype} ({bits}-bit)" if i.kv_dtype == KV_AUTO else i.kv_dtype
    out = [
        f"CAPACITY  {m.name} on {i.gpu.name} · tp {i.tp} · weights {i.weight_dtype} · KV {kv_name} · "
        f"{i.context_tokens:,} tokens per request (prompt + output)",
        f"GPU       {i.gpu.label or i.gpu.name}: {b.total_bytes:,} B = {gib(b.total_bytes)} "
        f"({b.total_bytes / GB:.1f} GB) × gpu_memory_utilization {b.utilization:.2f} = "
        f"{gib(b.budget_bytes)} budget per GPU",
        "MEMORY PER GPU",
        f"  weights      {gib(b.weights_bytes):>11}  {m.params / 1e9:.2f}B params × "
        f"{WEIGHT_BITS[i.weight_dtype] / 8:g} B ÷ tp {i.tp}",
        f"  activations  {gib(b.activation_bytes):>11}  estimate: {b.activation_fraction:.0%} of the budget "
        "(vLLM logs its measured peak at start-up)",
        f"  overhead     {gib(b.overhead_bytes):>11}  CUDA context, CUDA graphs, NCCL buffers",
    ]
    if b.weights_fit:
        out.append(f"  KV cache     {gib(b.kv_bytes):>11}  what is left")
    else:
        out.append(f"  KV cache     {gib(0):>11}  nothing left: {gib(b.shortfall_bytes)} short")
    share = f"; {_bytes_small(plan.kv_bytes_per_token_per_gpu)} per GPU" if i.tp > 1 else ""
    out.append(
        f"KV        {_bytes_small(plan.kv_bytes_per_token)} per token = {m.layers} layers × "
        f"{m.kv_heads} KV heads ({m.attention}) × {m.head_dim} head dim × 2 (K and V) × "
        f"{bits / 8:g} B{share}; "
        f"{_bytes_small(plan.kv_bytes_per_request_per_gpu)} per request per GPU"
    )
    if plan.fits:
        out.append(
            f"CONCURRENCY  ≤ {plan.concurrency:,} requests at {i.context_tokens:,} tokens "
            f"({gib(b.kv_bytes)} ÷ {_bytes_small(plan.kv_bytes_per_request_per_gpu)})"
        )
    else:
        out.append(f"DOES NOT FIT  {plan.why_not()}")
    r = plan.replicas
    if r is not None:
        out.append(
            f"REPLICAS  {_rate(r.peak_rate)} req/s peak ÷ {_rate(r.per_replica_rate)} req/s per replica "
            f"at SLO = {r.ratio:.3g} → {r.base}, + {r.redundancy} redundancy = {r.replicas} replicas "
            f"× tp {i.tp} = {plan.gpus} GPUs"
        )
        if r.source != "given":
            out.append(f"          per-replica rate {r.source}")
    elif not plan.fits:
        out.append("REPLICAS  not planned: one replica does not fit (see above)")
    else:
        out.append(
            "REPLICAS  need --peak-rate and --per-replica-rate (the highest rate one replica sustains "
            "within SLO: a load test, or measured from Prometheus)"
        )
    if plan.warnings:
        out.append("WARNINGS")
        out.extend(f"  ! {w}" for w in plan.warnings)
    out.append("NOTES")
    out.extend(f"  · {n}" for n in plan.notes)
    return "\n".join(out) + "\n"


def render_presets() -> str:
    """The bundled model and GPU presets, for --list-presets."""
    out = ["MODELS  (layers, hidden, heads/KV heads, head dim, params)"]
    for key, m in MODEL_PRESETS.items():
        moe = f", MoE {m.experts} experts ({m.experts_per_token} per token)" if m.experts > 1 else ""
        out.append(
            f"  {key:<14} {m.layers} layers, hidden {m.hidden_size}, {m.attention_heads}/{m.kv_heads} heads "
            f"({m.attention}), head dim {m.head_dim}, {m.params / 1e9:.2f}B params{moe}  [{m.source}]"
        )
    out.append("GPUS  (memory as the driver reports it)")
    for key, g in GPU_PRESETS.items():
        out.append(f"  {key:<14} {g.memory_bytes:,} B  {g.note}")
    return "\n".join(out) + "\n"


# --- input file and flags ------------------------------------------------------------------------

Path = tuple[str | int, ...]
Locate = Callable[[Path, str], InputError]
P = ParamSpec("P")
T = TypeVar("T")

FLAGS: Final[Mapping[str, str]] = {
    "model": "--model",
    "gpu": "--gpu",
    "tp": "--tp",
    "weight_dtype": "--weight-dtype",
    "kv_dtype": "--kv-dtype",
    "context_tokens": "--context",
    "gpu_memory_utilization": "--gpu-memory-utilization",
    "activation_fraction": "--activation-fraction",
    "overhead_gib": "--overhead-gib",
    "peak_rate": "--peak-rate",
    "per_replica_rate": "--per-replica-rate",
    "redundancy": "--redundancy",
}
"""Flag spelling per input key, for errors about values given on the command line."""

_TOP_KEYS: Final = (
    "schema_version",
    "model",
    "gpu",
    "tp",
    "weight_dtype",
    "kv_dtype",
    "context_tokens",
    "prompt_tokens",
    "output_tokens",
    "gpu_memory_utilization",
    "activation_fraction",
    "overhead_gib",
    "block_size",
    "peak_rate",
    "per_replica_rate",
    "redundancy",
)
_MODEL_INTS: Final[Mapping[str, bool]] = {
    # key: required
    "layers": True,
    "hidden_size": True,
    "attention_heads": True,
    "kv_heads": True,
    "head_dim": False,
    "params": True,
    "experts": False,
    "experts_per_token": False,
}
_MODEL_KEYS: Final = ("name", *_MODEL_INTS)
_GPU_SIZES: Final[Mapping[str, int]] = {"memory_bytes": 1, "memory_gib": GIB, "memory_gb": GB}
_GPU_KEYS: Final = ("name", *_GPU_SIZES)
_MINIMUM: Final[Mapping[str, int]] = {"prompt_tokens": 0, "redundancy": 0}
_INTEGERS: Final = ("tp", "block_size", "context_tokens", "prompt_tokens", "output_tokens", "redundancy")
_NAMES: Final = ("weight_dtype", "kv_dtype")
_KV_NAMES: Final[Mapping[str, int]] = {KV_AUTO: 16, **KV_BITS}
# PyYAML reads YAML 1.1, where 8.03e9 (no sign in the exponent) is a string, not a float.
_SCIENTIFIC = re.compile(r"^[-+]?\d+(\.\d*)?[eE][-+]?\d+$")


class _Bad(Exception):
    """One problem at a path, before it is located in a file or on the command line."""

    def __init__(self, path: Path, message: str) -> None:
        super().__init__(message)
        self.path = path
        self.message = message


def _checked(bad: list[_Bad], read: Callable[P, T], /, *args: P.args, **kwargs: P.kwargs) -> T | None:
    """Run one reader, collecting its problem instead of stopping: every problem is reported at once."""
    try:
        return read(*args, **kwargs)
    except _Bad as exc:
        bad.append(exc)
        return None


def _number(value: Any, path: Path) -> float:
    if isinstance(value, str) and _SCIENTIFIC.match(value.strip()):
        value = float(value)
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        shown = f"the text '{value}'" if isinstance(value, str) else type(value).__name__
        raise _Bad(path, f"expected a number, got {shown}")
    if not math.isfinite(value):
        raise _Bad(path, "expected a finite number")
    return float(value)


def _integer(value: Any, path: Path, minimum: int = 1) -> int:
    number = _number(value, path)
    if number != int(number):
        raise _Bad(path, f"expected a whole number, got {value}")
    if number < minimum:
        raise _Bad(path, f"must be at least {minimum}")
    return int(number)


def _name(value: Any, path: Path) -> str:
    if not isinstance(value, str) or not value.strip():
        raise _Bad(path, "expected a name")
    return value.strip()


def _dtype(value: Any, path: Path, known: Mapping[str, int]) -> str:
    name = _name(value, path).lower()
    if name not in known:
        raise _Bad(path, f"unknown '{name}'{_suggest(name, list(known))}; one of {', '.join(known)}")
    return name


def _unknown_keys(mapping: dict[Any, Any], allowed: tuple[str, ...], path: Path) -> list[_Bad]:
    return [
        _Bad(
            (*path, str(key)),
            f"unknown key{_suggest(str(key), list(allowed))}; allowed: {', '.join(allowed)}",
        )
        for key in mapping
        if str(key) not in allowed
    ]


def _preset(value: str, presets: Mapping[str, T], what: str, path: Path) -> T:
    key = value.strip().lower()
    if key not in presets:
        hint = _suggest(key, list(presets))
        raise _Bad(path, f"unknown {what} preset '{value}'{hint}; presets: {', '.join(presets)}")
    return presets[key]


def _read_model(value: Any, path: Path, bad: list[_Bad]) -> ModelSpec | None:
    """A preset name, or a model written out: the config's numbers, params counting every expert."""
    if isinstance(value, str):
        return _checked(bad, _preset, value, MODEL_PRESETS, "model", path)
    if not isinstance(value, dict):
        bad.append(
            _Bad(path, f"a preset ({', '.join(MODEL_PRESETS)}) or a mapping of {', '.join(_MODEL_KEYS)}")
        )
        return None
    before = len(bad)
    bad.extend(_unknown_keys(value, _MODEL_KEYS, path))
    name = _checked(bad, _name, value.get("name"), (*path, "name"))
    numbers: dict[str, int | None] = {}
    for key, required in _MODEL_INTS.items():
        if key in value:
            numbers[key] = _checked(bad, _integer, value[key], (*path, key))
        elif required:
            bad.append(_Bad((*path, key), "required"))
    n: dict[str, int] = {k: v for k, v in numbers.items() if v is not None}
    if name is None or any(required and key not in n for key, required in _MODEL_INTS.items()):
        return None
    if n["attention_heads"] % n["kv_heads"]:
        bad.append(_Bad((*path, "kv_heads"), f"must divide attention_heads ({n['attention_heads']})"))
    if "head_dim" not in n and n["hidden_size"] % n["attention_heads"]:
        bad.append(_Bad((*path, "head_dim"), "required: hidden_size is not a multiple of attention_heads"))
    if n.get("experts_per_token", 1) > n.get("experts", 1):
        bad.append(_Bad((*path, "experts_per_token"), "cannot exceed experts"))
    if len(bad) > before:
        return None
    return ModelSpec(
        name=name,
        layers=n["layers"],
        hidden_size=n["hidden_size"],
        attention_heads=n["attention_heads"],
        kv_heads=n["kv_heads"],
        head_dim=n.get("head_dim", n["hidden_size"] // n["attention_heads"]),
        params=n["params"],
        experts=n.get("experts", 1),
        experts_per_token=n.get("experts_per_token", 1),
    )


def _read_gpu(value: Any, path: Path, bad: list[_Bad]) -> GpuSpec | None:
    """A preset name, or a GPU with its memory in one explicit unit (the GB/GiB mix-up is the usual error)."""
    if isinstance(value, str):
        return _checked(bad, _preset, value, GPU_PRESETS, "GPU", path)
    if not isinstance(value, dict):
        bad.append(_Bad(path, f"a preset ({', '.join(GPU_PRESETS)}) or a mapping of {', '.join(_GPU_KEYS)}"))
        return None
    before = len(bad)
    bad.extend(_unknown_keys(value, _GPU_KEYS, path))
    name = _checked(bad, _name, value.get("name"), (*path, "name"))
    sizes = [key for key in _GPU_SIZES if key in value]
    if len(sizes) != 1:
        bad.append(
            _Bad(path, "give exactly one of memory_bytes, memory_gib (2^30 bytes) or memory_gb (10^9 bytes)")
        )
        return None
    amount = _checked(bad, _number, value[sizes[0]], (*path, sizes[0]))
    if amount is not None and amount <= 0:
        bad.append(_Bad((*path, sizes[0]), "must be positive"))
    if len(bad) > before or name is None or amount is None:
        return None
    return GpuSpec(name, int(amount * _GPU_SIZES[sizes[0]]), name)


def _read_value(key: str, value: Any, bad: list[_Bad]) -> Any:
    path: Path = (key,)
    if key == "model":
        return _read_model(value, path, bad)
    if key == "gpu":
        return _read_gpu(value, path, bad)
    if key == "schema_version":
        if isinstance(value, bool) or value != 1:
            bad.append(_Bad(path, "only schema_version 1 exists"))
        return 1
    if key in _NAMES:
        return _checked(bad, _dtype, value, path, WEIGHT_BITS if key == "weight_dtype" else _KV_NAMES)
    if key in _INTEGERS:
        return _checked(bad, _integer, value, path, _MINIMUM.get(key, 1))
    return _checked(bad, _number, value, path)


def _flag_locate(path: Path, message: str) -> InputError:
    key = str(path[0]) if path else ""
    rest = f".{key_name(path[1:])}" if path[1:] else ""
    return InputError("command line", 0, FLAGS.get(key, key) + rest, message)


def parse_inputs(doc: Document | None = None, flags: Mapping[str, Any] | None = None) -> CapacityInputs:
    """Inputs from a capacity document and flags (a flag wins over the file); every problem at once.

    Problems in the file read `file:line: key: message`; problems in a flag value read
    `command line:0: --flag: message`. Both arrive as one InputErrors, which the CLI
    prints line by line. Unknown keys are errors: a typo must not keep a default silently.
    `flags` uses the file's keys (`context_tokens`, not `--context`); None values are ignored.
    """
    raw: dict[str, tuple[Any, Locate]] = {}
    problems: list[InputError] = []
    if doc is not None:
        if not isinstance(doc.data, dict):
            raise InputErrors([doc.error((), "a capacity file is a mapping of " + ", ".join(_TOP_KEYS))])
        problems.extend(doc.error(b.path, b.message) for b in _unknown_keys(doc.data, _TOP_KEYS, ()))
        raw.update((str(k), (v, doc.error)) for k, v in doc.data.items() if str(k) in _TOP_KEYS)
    for key, value in (flags or {}).items():
        if key not in _TOP_KEYS:
            raise ValueError(f"parse_inputs: no input key {key!r}")  # the caller's bug, not the user's
        if value is not None:
            raw[key] = (value, _flag_locate)

    def where(key: str) -> Locate:
        if key in raw:
            return raw[key][1]
        return doc.error if doc is not None else _flag_locate

    values: dict[str, Any] = {}
    for key, (value, locate) in raw.items():
        bad: list[_Bad] = []
        values[key] = _read_value(key, value, bad)
        problems.extend(locate(b.path, b.message) for b in bad)
    for key, presets in (("model", MODEL_PRESETS), ("gpu", GPU_PRESETS)):
        if key not in raw:
            problems.append(where(key)((key,), f"required: a preset ({', '.join(presets)}) or a mapping"))
    split = [key for key in ("prompt_tokens", "output_tokens") if key in raw]
    if split and "context_tokens" in raw:
        message = "give context_tokens or prompt_tokens + output_tokens, not both"
        problems.append(where("context_tokens")(("context_tokens",), message))
    elif len(split) == 1:
        problems.append(where(split[0])((split[0],), "prompt_tokens and output_tokens go together"))
    if problems or any(v is None for v in values.values()):
        raise InputErrors(problems)

    kwargs: dict[str, Any] = {k: v for k, v in values.items() if k in _INPUT_FIELDS}
    if split:
        kwargs["context_tokens"] = values["prompt_tokens"] + values["output_tokens"]
    if "overhead_gib" in values:
        kwargs["overhead_bytes"] = round(values["overhead_gib"] * GIB)
    try:
        return CapacityInputs(**kwargs)
    except CapacityError as exc:
        located = []
        for key, message in exc.problems:
            named = "prompt_tokens" if key == "context_tokens" and split else key
            located.append(where(named)((named,), message))
        raise InputErrors(located) from None


_INPUT_FIELDS: Final = frozenset(CapacityInputs.__dataclass_fields__) - {"overhead_bytes"}


def load_inputs(path: str | None = None, flags: Mapping[str, Any] | None = None) -> CapacityInputs:
    """Read a capacity YAML file (if any) and apply flags on top; the only function here that does IO."""
    return parse_inputs(read_yaml(path) if path is not None else None, flags)


EXAMPLE_FILE: Final = """\
# triage capacity --config FILE: every key but model and gpu is optional.
schema_version: 1
model: llama-3.1-8b            # a preset, or a mapping of name, layers, hidden_size,
                               # attention_heads, kv_heads, head_dim, params, experts, experts_per_token
gpu: h100-80gb                 # a preset, or {name: x, memory_gib: 80} (or memory_bytes / memory_gb)
tp: 1
weight_dtype: bf16             # fp32 fp16 bf16 fp8 int8 int4
kv_dtype: auto                 # auto (the model's dtype) fp16 bf16 fp8 int8 int4
context_tokens: 4096           # or prompt_tokens + output_tokens
gpu_memory_utilization: 0.90   # above 0.95 is the checklist's red line
activation_fraction: 0.05      # of the per-GPU budget; from vLLM's start-up log if you have it
overhead_gib: 2                # CUDA context, CUDA graphs, NCCL per GPU
peak_rate: 30                  # req/s at peak
per_replica_rate: 4            # req/s one replica sustains within SLO (load test)
redundancy: 1                  # replicas for one failure or a rolling update
"""
"""A documented example of the capacity file, for docs and `--help`."""

__all__ = [
    "GPU_PRESETS",
    "MODEL_PRESETS",
    "CapacityError",
    "CapacityInputs",
    "CapacityPlan",
    "GpuSpec",
    "MemoryBudget",
    "ModelSpec",
    "RateMeasurement",
    "ReplicaPlan",
    "concurrency_ceiling",
    "kv_bytes_per_token",
    "load_inputs",
    "measure_rate_at_slo",
    "measured_rate_at_slo",
    "memory_budget",
    "parse_inputs",
    "plan",
    "render_presets",
    "render_text",
    "replicas_needed",
]
