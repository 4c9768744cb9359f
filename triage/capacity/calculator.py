"""`triage capacity`: the production chapter's capacity-planning method as a calculator.

The chapter (seeds, 第 21 篇 "容量规划：需要几张卡") plans in two halves, and so does this
room. Memory first, per GPU: the checklist's "容量与显存" asks that four parts be
counted (weights, KV, activations, fixed overhead), that KV per token be worked out from
layers, KV heads, head dim and precision (so GQA, MQA and KV quantisation show), and that
"available KV ÷ KV per request" bound the concurrency before a load test refines it.
Then replicas: peak rate ÷ the rate one replica sustains within SLO, rounded up, plus
redundancy so one failure or a rolling update still meets the SLO (30 req/s ÷ 4 = 7.5 →
8, plus 1–2 → 9–10 GPUs in the chapter's example).

This module owns the second half and the plan that joins both: the replica count, the
validated inputs and `plan`. The room's other modules: `specs` (units, dtypes, model and
GPU specs), `presets` (read from `presets.yaml`), `memory` (the first half), `measure`
(the rate at SLO from a frame), `inputs` (the capacity file and flags) and `render` (text).

Everything here is pure and deterministic. A model that does not fit is a result
(`CapacityPlan.fits` is False, with the shortfall and the smallest tensor-parallel size
that would fit), never a negative number of bytes. Memory is counted in bytes; GPU sizes
are what the driver reports (`nvidia-smi --query-gpu=memory.total`, MiB), because that
is what vLLM's `gpu_memory_utilization` multiplies, not the marketing "80 GB".
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Any, Final

from signals.vocabulary import suggest
from triage.capacity.memory import (
    MemoryBudget,
    concurrency_ceiling,
    kv_bytes_per_token,
    memory_budget,
    request_tokens,
)
from triage.capacity.specs import (
    DEFAULT_ACTIVATION_FRACTION,
    DEFAULT_BLOCK_SIZE,
    DEFAULT_CONTEXT_TOKENS,
    DEFAULT_OVERHEAD_BYTES,
    DEFAULT_REDUNDANCY,
    DEFAULT_UTILIZATION,
    KV_AUTO,
    KV_BITS,
    RED_LINE_UTILIZATION,
    WEIGHT_BITS,
    CapacityError,
    GpuSpec,
    ModelSpec,
    gib,
    kv_bits,
    parallel_problems,
)

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
        problems = parallel_problems(self.model, self.tp)
        if self.weight_dtype not in WEIGHT_BITS:
            problems.append(
                (
                    "weight_dtype",
                    f"unknown '{self.weight_dtype}'{suggest(self.weight_dtype, list(WEIGHT_BITS))}; "
                    f"one of {', '.join(WEIGHT_BITS)}",
                )
            )
        if self.kv_dtype != KV_AUTO and self.kv_dtype not in KV_BITS:
            problems.append(
                (
                    "kv_dtype",
                    f"unknown '{self.kv_dtype}'{suggest(self.kv_dtype, list(KV_BITS))}; "
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
        if parallel_problems(inputs.model, tp):
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
