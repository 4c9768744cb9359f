"""The calculator's vocabulary: units, defaults, dtypes, model and GPU specs, and its error.

Every other capacity module counts in these units and checks against these tables, so
they live apart from any one step of the method; nothing here computes a plan.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

from signals.vocabulary import suggest

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


class CapacityError(ValueError):
    """Inputs that cannot be planned; each problem names the input key it is about."""

    def __init__(self, problems: list[tuple[str, str]]) -> None:
        self.problems = tuple(problems)
        super().__init__("; ".join(f"{key}: {message}" for key, message in problems))


def kv_bits(kv_dtype: str, weight_dtype: str = "bf16") -> int:
    """Bits per KV element; `auto` follows the model's compute dtype, as vLLM does."""
    if kv_dtype == KV_AUTO:
        return 32 if weight_dtype == "fp32" else 16
    if kv_dtype not in KV_BITS:
        raise CapacityError([("kv_dtype", f"unknown '{kv_dtype}'{suggest(kv_dtype, list(KV_BITS))}")])
    return KV_BITS[kv_dtype]


def weight_bits(weight_dtype: str) -> int:
    """Bits per weight for a weight dtype name."""
    if weight_dtype not in WEIGHT_BITS:
        raise CapacityError(
            [("weight_dtype", f"unknown '{weight_dtype}'{suggest(weight_dtype, list(WEIGHT_BITS))}")]
        )
    return WEIGHT_BITS[weight_dtype]


def parallel_problems(model: ModelSpec, tp: int) -> list[tuple[str, str]]:
    """What vLLM itself refuses: heads that do not split evenly across the TP group."""
    if tp < 1:
        return [("tp", "must be at least 1")]
    if model.attention_heads % tp:
        return [("tp", f"{tp} does not divide {model.name}'s {model.attention_heads} attention heads")]
    if model.kv_heads % tp and tp % model.kv_heads:
        return [("tp", f"{tp} and {model.name}'s {model.kv_heads} KV heads must divide one another")]
    return []


def gib(n: int | float) -> str:
    """Bytes in GiB, the unit vLLM logs memory in."""
    return f"{n / GIB:.2f} GiB"
