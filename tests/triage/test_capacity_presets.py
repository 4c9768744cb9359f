"""The capacity presets file: the bundled one loads as the tables it replaced, a broken one is named.

Every problem in a presets file reads `file:line: key: message`, as in the playbooks.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from signals.errors import InputErrors
from signals.yamldoc import parse_yaml
from triage.capacity.presets import BUNDLED, GPU_PRESETS, MODEL_PRESETS, load_presets, presets_from_document
from triage.capacity.specs import MIB

GOOD = """\
schema_version: 1
models:
  tiny:
    layers: 2
    hidden_size: 256
    attention_heads: 4
    kv_heads: 2
    params: 1_000_000
gpus:
  card-16gb:
    memory_mib: 16384
"""


def _problems(text: str) -> list[str]:
    with pytest.raises(InputErrors) as caught:
        presets_from_document(parse_yaml(text, "presets.yaml"))
    return [str(p) for p in caught.value.problems]


def test_the_bundled_file_is_the_presets_the_calculator_offers() -> None:
    assert BUNDLED.name == "presets.yaml" and BUNDLED.is_file()
    models, gpus = load_presets()
    assert models == dict(MODEL_PRESETS) and gpus == dict(GPU_PRESETS)
    assert list(models) == ["llama-3.1-8b", "llama-3.1-70b", "qwen2.5-7b", "qwen2.5-72b", "mixtral-8x7b"]
    assert list(gpus) == ["a100-40gb", "a100-80gb", "h100-80gb", "h200-141gb", "l40s-48gb"]
    mixtral = models["mixtral-8x7b"]
    assert (mixtral.experts, mixtral.experts_per_token, mixtral.head_dim) == (8, 2, 128)
    assert mixtral.source == "mistralai/Mixtral-8x7B-Instruct-v0.1"
    assert gpus["h100-80gb"].label == "H100 80GB" and "81559 MiB" in gpus["h100-80gb"].note


def test_a_written_preset_builds_specs_with_head_dim_from_hidden_size() -> None:
    models, gpus = presets_from_document(parse_yaml(GOOD, "presets.yaml"))
    tiny = models["tiny"]
    assert (tiny.name, tiny.head_dim, tiny.experts, tiny.attention) == ("tiny", 64, 1, "GQA")
    assert gpus["card-16gb"].memory_bytes == 16384 * MIB


def test_a_user_file_loads_from_disk(tmp_path: Path) -> None:
    path = tmp_path / "presets.yaml"
    path.write_text(GOOD, encoding="utf-8")
    models, _ = load_presets(path)
    assert list(models) == ["tiny"]


def test_schema_problems_name_file_line_and_key() -> None:
    text = GOOD.replace("    layers: 2\n", '    layers: "2"\n    colour: red\n').replace(
        "memory_mib: 16384", "memory_gib: 16"
    )
    assert _problems(text) == [
        "presets.yaml:4: models.tiny.layers: Input should be a valid integer",
        "presets.yaml:5: models.tiny.colour: unknown key",
        "presets.yaml:11: gpus.card-16gb.memory_mib: Field required",
        "presets.yaml:12: gpus.card-16gb.memory_gib: unknown key",
    ]


def test_numbers_that_disagree_and_unmatchable_names_are_all_reported() -> None:
    text = (
        GOOD.replace("kv_heads: 2", "kv_heads: 3")
        .replace("hidden_size: 256", "hidden_size: 250")
        .replace("params: 1_000_000", "params: 1_000_000\n    experts_per_token: 2")
        .replace("card-16gb:", "Card-16GB:")
    )
    assert _problems(text) == [
        "presets.yaml:3: models.tiny.head_dim: required: hidden_size is not a multiple of attention_heads",
        "presets.yaml:7: models.tiny.kv_heads: must divide attention_heads (4)",
        "presets.yaml:9: models.tiny.experts_per_token: cannot exceed experts",
        "presets.yaml:11: gpus.Card-16GB: a preset name is lowercase without spaces around it: 'Card-16GB'",
    ]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("- a list\n", "presets.yaml:1: (document): a presets file is a mapping"),
        ("schema_version: 2\nmodels: {}\n", "presets.yaml:1: schema_version: expected schema_version: 1"),
        ("schema_version: 1\nmodels:\n  x: 3\n", "presets.yaml:3: models.x: Input should be"),
    ],
)
def test_the_shape_of_the_file_is_checked(text: str, expected: str) -> None:
    assert _problems(text)[0].startswith(expected)
