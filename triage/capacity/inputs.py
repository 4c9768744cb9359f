"""The capacity file and flags: read, validate every key at once, and build CapacityInputs.

The calculator's edge: user input arrives here as YAML or flag values and leaves as
validated inputs, with every problem located as `file:line: key: message` or
`command line:0: --flag: message`. `load_inputs` is the only function in the room that
reads a user's file (the bundled presets are read once, when `presets` loads).
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping
from typing import Any, Final, ParamSpec, TypeVar

from signals.errors import InputError, InputErrors
from signals.vocabulary import suggest
from signals.yamldoc import Document, key_name, read_yaml
from triage.capacity.calculator import CapacityInputs
from triage.capacity.presets import GPU_PRESETS, MODEL_PRESETS
from triage.capacity.specs import (
    GB,
    GIB,
    KV_AUTO,
    KV_BITS,
    WEIGHT_BITS,
    CapacityError,
    GpuSpec,
    ModelSpec,
)

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
        raise _Bad(path, f"unknown '{name}'{suggest(name, list(known))}; one of {', '.join(known)}")
    return name


def _unknown_keys(mapping: dict[Any, Any], allowed: tuple[str, ...], path: Path) -> list[_Bad]:
    return [
        _Bad(
            (*path, str(key)),
            f"unknown key{suggest(str(key), list(allowed))}; allowed: {', '.join(allowed)}",
        )
        for key in mapping
        if str(key) not in allowed
    ]


def _preset(value: str, presets: Mapping[str, T], what: str, path: Path) -> T:
    key = value.strip().lower()
    if key not in presets:
        hint = suggest(key, list(presets))
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
