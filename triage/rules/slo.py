"""SLO thresholds: the bundled defaults and a user's file on top, validated strictly.

The thresholds the alert rules use (and the audit and the TUI read). The bundled
`slo_defaults.yaml` documents every key. Latency SLOs are P99, TTFT and TPOT apart,
never the mean: an SLA on the mean is one of the project's forbidden actions
(`average_latency_sla`). `load_slo` is the only function here that reads a file.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, ValidationError

from signals.errors import InputError, InputErrors
from signals.timeparse import parse_duration
from signals.vocabulary import suggest
from signals.yamldoc import Document, read_yaml

SLO_DEFAULTS = Path(__file__).resolve().parents[1] / "slo_defaults.yaml"

# Exactly what Prometheus accepts: units largest first, each at most once.
_PROM_DURATION = re.compile(r"^(?:\d+y)?(?:\d+w)?(?:\d+d)?(?:\d+h)?(?:\d+m)?(?:\d+s)?(?:\d+ms)?$")


def _duration(text: str) -> str:
    if not text or not _PROM_DURATION.match(text):
        raise ValueError(f"'{text}' is not a Prometheus duration like 30s, 5m, 1h30m or 1d")
    return text


def _positive_duration(text: str) -> str:
    _duration(text)
    if parse_duration(text) <= 0:
        raise ValueError("must be longer than zero")
    return text


Duration = Annotated[str, AfterValidator(_duration)]
Window = Annotated[str, AfterValidator(_positive_duration)]
Severity = Annotated[str, Field(pattern=r"^[a-z][a-z0-9_-]*$")]


class _Strict(BaseModel):
    """Strict on purpose: a typo in an SLO file must not silently keep a default threshold."""

    model_config = ConfigDict(extra="forbid", frozen=True, strict=True, populate_by_name=True)


class _Alerting(_Strict):
    for_: Duration = Field(alias="for", description="how long the condition holds before it fires")
    severity: Severity


class LatencySlo(_Alerting):
    """A P99 latency SLO (TTFT, TPOT, or the edge's): fire while the P99 is above it."""

    p99_seconds: float = Field(gt=0)


class RatioSlo(_Alerting):
    """A share of requests (failed, rejected, failed upstream): fire above `ratio`."""

    ratio: float = Field(gt=0, le=1)


class QueueGrowthSlo(_Alerting):
    """The queue against its own past: `factor` times and `min_increase` more than `baseline` ago."""

    factor: float = Field(gt=1)
    min_increase: float = Field(ge=0)
    window: Window
    baseline: Window


class KvNearFullSlo(_Alerting):
    """KV use (median over `window`) at or above `ratio` on a replica that is preempting."""

    ratio: float = Field(gt=0, le=1)
    window: Window
    min_preemption_rate: float = Field(ge=0)


class PrefixHitDropSlo(_Alerting):
    """The hit ratio under `factor` times its value `baseline` ago (when that was above `min_baseline`)."""

    factor: float = Field(gt=0, lt=1)
    baseline: Window
    min_baseline: float = Field(ge=0, lt=1)


class GpuEventSlo(_Strict):
    """A GPU fault: fires at once and holds for `hold`, as the faulty GPU's series may vanish."""

    hold: Window
    severity: Severity


class EngineStalledSlo(_Alerting):
    """A replica with requests running and no token generated (the signal needs its whole window)."""


class IdleKvQueueSlo(_Alerting):
    """A queue growing like `queue_growth` while KV use stays under `kv_below`: the deferred queue
    (AdmissionStall) or the waiting queue (BatchCapped), neither of which capacity explains."""

    factor: float = Field(gt=1)
    min_increase: float = Field(ge=0)
    window: Window
    baseline: Window
    kv_below: float = Field(gt=0, le=1)


class GpuLinkSlo(_Alerting):
    """NVLink errors on a GPU, or its PCIe replays over `pcie_factor` times their rate `baseline` ago."""

    pcie_factor: float = Field(gt=1)
    pcie_min_rate: float = Field(ge=0)
    baseline: Window


class RateSlo(_Alerting):
    """An event rate (per second) above `min_rate`."""

    min_rate: float = Field(ge=0)


class ShareShiftSlo(_Alerting):
    """A routing target's share of a model's requests moved by more than `share`."""

    share: float = Field(gt=0, le=1)


class ReplicasSlo(_Alerting):
    """Ready replicas at least `min_missing` below the desired count."""

    min_missing: int = Field(ge=1)


class SpendJumpSlo(_Alerting):
    """Spend per hour above `factor` times its value `baseline` ago."""

    factor: float = Field(gt=1)
    baseline: Window


class Slo(_Strict):
    """Every threshold the alert rules use; see `slo_defaults.yaml` for what each key means."""

    schema_version: Literal[1]
    ttft: LatencySlo
    tpot: LatencySlo
    gateway_latency: LatencySlo
    error_ratio: RatioSlo
    rejected_ratio: RatioSlo
    upstream_error_ratio: RatioSlo
    queue_growth: QueueGrowthSlo
    kv_near_full: KvNearFullSlo
    prefix_hit_drop: PrefixHitDropSlo
    gpu_xid: GpuEventSlo
    gpu_ecc: GpuEventSlo
    replicas: ReplicasSlo
    spend_jump: SpendJumpSlo
    engine_stalled: EngineStalledSlo
    admission_stall: IdleKvQueueSlo
    batch_capped: IdleKvQueueSlo
    gpu_links: GpuLinkSlo
    kv_transfer_failures: RateSlo
    route_share_shift: ShareShiftSlo


def _merge(base: Any, override: Any) -> Any:
    """The override on top of the defaults, mapping by mapping; anything else replaces."""
    if isinstance(base, dict) and isinstance(override, dict):
        out = dict(base)
        for key, value in override.items():
            out[key] = _merge(base[key], value) if key in base else value
        return out
    return override


def _allowed(defaults: Any, path: tuple[Any, ...]) -> list[str]:
    node = defaults
    for part in path:
        if not isinstance(node, dict) or part not in node:
            return []
        node = node[part]
    return [str(k) for k in node] if isinstance(node, dict) else []


def _validate(doc: Document, data: Any, defaults: Any) -> Slo:
    """Validate merged data; every problem is located in `doc`, the file the person wrote."""
    try:
        return Slo.model_validate(data)
    except ValidationError as exc:
        problems: list[InputError] = []
        for err in exc.errors():
            path = tuple("for" if p == "for_" else p for p in err["loc"])
            message = err["msg"].removeprefix("Value error, ")
            if err["type"] == "extra_forbidden":
                allowed = _allowed(defaults, path[:-1])
                message = f"unknown key{suggest(str(path[-1]), allowed)}; allowed: {', '.join(allowed)}"
            elif err["type"] == "model_type":
                message = f"expected a mapping of {', '.join(_allowed(defaults, path))}"
            problems.append(doc.error(path, message))
        raise InputErrors(problems) from None


def load_slo(path: str | None = None) -> Slo:
    """The bundled defaults, with the file at `path` (if any) on top; InputErrors names file and line."""
    defaults = read_yaml(str(SLO_DEFAULTS))
    if path is None:
        return _validate(defaults, defaults.data, defaults.data)
    doc = read_yaml(path)
    if not isinstance(doc.data, dict):
        raise InputErrors([doc.error((), "an SLO file is a mapping, like the bundled slo_defaults.yaml")])
    return _validate(doc, _merge(defaults.data, doc.data), defaults.data)


__all__ = ["SLO_DEFAULTS", "Slo", "load_slo"]
