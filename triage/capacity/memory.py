"""Memory per GPU: KV per token, the four parts of the budget, and the concurrency it allows.

The checklist's "容量与显存" half of the method; pure arithmetic on specs, apart from the
replica count and the plan that combine it with rates.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from triage.capacity.specs import (
    DEFAULT_ACTIVATION_FRACTION,
    DEFAULT_BLOCK_SIZE,
    DEFAULT_OVERHEAD_BYTES,
    DEFAULT_UTILIZATION,
    CapacityError,
    GpuSpec,
    ModelSpec,
    kv_bits,
    parallel_problems,
    weight_bits,
)


def kv_heads_per_gpu(model: ModelSpec, tp: int = 1) -> int:
    """KV heads each GPU of a TP group stores: a share, or a replica when there are fewer heads than GPUs."""
    return max(1, model.kv_heads // tp)


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
    problems = parallel_problems(model, tp)
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
