"""The bundled model and GPU presets: published configs and what the driver reports.

These are tables people extend (a new model, a new card), kept apart from the
arithmetic that uses them.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

from triage.capacity.specs import MIB, GpuSpec, ModelSpec


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
