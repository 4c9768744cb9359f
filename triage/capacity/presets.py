"""The bundled model and GPU presets, read from `presets.yaml` and validated when they load.

The presets are knowledge people extend (a new model, a new card), so they are a data
file rather than code, kept apart from the arithmetic that uses them. The file is
checked strictly, like the playbooks and the signal catalog: unknown keys, wrong types,
a KV head count that does not divide the attention heads or a preset name the
calculator could never match are errors that read `file:line: key: message`, all at once.
A broken bundled file fails the import, loudly, rather than leaving a preset out.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Final

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from signals.errors import InputError, InputErrors
from signals.yamldoc import Document, read_yaml
from triage.capacity.specs import MIB, GpuSpec, ModelSpec

BUNDLED: Final = Path(__file__).resolve().parent / "presets.yaml"
SCHEMA_VERSION: Final = 1


class _Strict(BaseModel):
    # strict: a quoted "32" or a `true` is a typo in a hand-written table, not a number.
    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)


class ModelPreset(_Strict):
    """A model as its Hugging Face config gives it; `params` counts every expert."""

    layers: int = Field(ge=1)
    hidden_size: int = Field(ge=1)
    attention_heads: int = Field(ge=1)
    kv_heads: int = Field(ge=1)
    head_dim: int | None = Field(None, ge=1)
    params: int = Field(ge=1)
    experts: int = Field(1, ge=1)
    experts_per_token: int = Field(1, ge=1)
    source: str = ""


class GpuPreset(_Strict):
    """A GPU's memory in MiB as `nvidia-smi --query-gpu=memory.total` reports it."""

    memory_mib: int = Field(ge=1)
    label: str = ""
    note: str = ""


class PresetsFile(_Strict):
    schema_version: int
    models: dict[str, ModelPreset] = Field(default_factory=dict)
    gpus: dict[str, GpuPreset] = Field(default_factory=dict)


def _model_problems(doc: Document, name: str, m: ModelPreset) -> list[InputError]:
    """What the schema cannot say alone: the numbers of one model must agree with one another."""
    path = ("models", name)
    problems = []
    if m.attention_heads % m.kv_heads:
        problems.append(doc.error((*path, "kv_heads"), f"must divide attention_heads ({m.attention_heads})"))
    if m.head_dim is None and m.hidden_size % m.attention_heads:
        problems.append(
            doc.error((*path, "head_dim"), "required: hidden_size is not a multiple of attention_heads")
        )
    if m.experts_per_token > m.experts:
        problems.append(doc.error((*path, "experts_per_token"), "cannot exceed experts"))
    return problems


def _name_problems(doc: Document, section: str, names: list[str]) -> list[InputError]:
    """A preset is looked up by the user's name lowercased and stripped, so its own name must be too."""
    return [
        doc.error((section, name), f"a preset name is lowercase without spaces around it: '{name}'")
        for name in names
        if name != name.strip().lower() or not name.strip()
    ]


def presets_from_document(doc: Document) -> tuple[dict[str, ModelSpec], dict[str, GpuSpec]]:
    """Validate a presets document and build the specs, in file order; every problem at once."""
    data = doc.data
    if not isinstance(data, dict):
        raise InputErrors([doc.error((), "a presets file is a mapping of schema_version, models and gpus")])
    if data.get("schema_version") != SCHEMA_VERSION:
        raise InputErrors([doc.error(("schema_version",), f"expected schema_version: {SCHEMA_VERSION}")])
    try:
        parsed = PresetsFile.model_validate(data)
    except ValidationError as exc:
        problems = []
        for err in exc.errors():
            message = "unknown key" if err["type"] == "extra_forbidden" else err["msg"]
            problems.append(doc.error(tuple(err["loc"]), message))
        raise InputErrors(problems) from None
    problems = _name_problems(doc, "models", list(parsed.models))
    problems += _name_problems(doc, "gpus", list(parsed.gpus))
    for name, m in parsed.models.items():
        problems += _model_problems(doc, name, m)
    if problems:
        raise InputErrors(problems)
    models = {
        name: ModelSpec(
            name=name,
            layers=m.layers,
            hidden_size=m.hidden_size,
            attention_heads=m.attention_heads,
            kv_heads=m.kv_heads,
            head_dim=m.head_dim if m.head_dim is not None else m.hidden_size // m.attention_heads,
            params=m.params,
            experts=m.experts,
            experts_per_token=m.experts_per_token,
            source=m.source,
        )
        for name, m in parsed.models.items()
    }
    gpus = {name: GpuSpec(name, g.memory_mib * MIB, g.label, g.note) for name, g in parsed.gpus.items()}
    return models, gpus


def load_presets(path: str | Path = BUNDLED) -> tuple[dict[str, ModelSpec], dict[str, GpuSpec]]:
    """Read and validate a presets file (the bundled one by default)."""
    return presets_from_document(read_yaml(str(path)))


_MODELS, _GPUS = load_presets()
MODEL_PRESETS: Final[Mapping[str, ModelSpec]] = _MODELS
GPU_PRESETS: Final[Mapping[str, GpuSpec]] = _GPUS
