"""The audit's types: what it reads (`Fetched`), how it is tuned (`AuditSettings`), what it says.

They live apart from the checks so that the fetcher, the checks, the engine and the
renderers share one vocabulary without importing each other. `AuditItem.to_json` and
`AuditReport.to_json` are the stable output contract of `triage audit --format json`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Final, Literal

from signals.frame import SignalFrame

if TYPE_CHECKING:
    from triage.rules import Slo


Status = Literal["pass", "fail", "unknown", "not_applicable"]
STATUS_ORDER: Final[tuple[Status, ...]] = ("fail", "unknown", "pass", "not_applicable")
DEFAULT_LOOKBACK: Final = 6 * 3600.0


@dataclass(frozen=True)
class Section:
    """One section of the checklist, in its order; `original` is the checklist's own heading."""

    id: str
    title: str
    original: str


@dataclass(frozen=True)
class ChecklistItem:
    """One checklist line: a stable id, an English title, the original words.

    `settle` is the evidence that would settle the item when metrics cannot; `fix` is
    what to do when it fails (or turns out not done).
    """

    id: str
    section: str
    title: str
    original: str
    settle: str
    fix: str


@dataclass(frozen=True)
class Checklist:
    """The sections and items of `checklist.yaml`, in the checklist's order, validated."""

    sections: tuple[Section, ...]
    items: tuple[ChecklistItem, ...]


@dataclass(frozen=True)
class AuditSettings:
    """Thresholds of the checks, and the window they look at.

    The SLOs default to `triage/slo_defaults.yaml` (`from_slo` takes a loaded one); the
    red line 0.95 is the checklist's; a prefix hit ratio under 5% over the window is "near
    zero"; a prompt is long from 8,192 tokens (vLLM's default max_num_batched_tokens in
    V1 online serving), and long prompts are common from 5% of requests. A replica's
    capacity at SLO may be extrapolated from its KV use up to `kv_ceiling`, by at most
    `max_extrapolation` times what it was seen to serve. Overload reached the engines when
    their waiting queue held at `queue_overload_min` or more, and above their running batch
    (more waiting than being served), for `overload_for` seconds.
    """

    lookback: float = DEFAULT_LOOKBACK
    step: float = 60.0
    ttft_p99_slo: float = 1.0
    tpot_p99_slo: float = 0.05
    gpu_memory_utilization_max: float = 0.95
    prefix_hit_floor: float = 0.05
    long_prompt_tokens: float = 8192.0
    long_prompt_share: float = 0.05
    kv_ceiling: float = 0.9
    max_extrapolation: float = 1.5
    redundancy: int = 1
    queue_overload_min: float = 10.0
    overload_for: float = 300.0

    @classmethod
    def from_slo(cls, slo: Slo, **overrides: Any) -> AuditSettings:
        """Settings whose latency SLOs are those of a `triage.rules.Slo` (what the alerts use)."""
        return cls(ttft_p99_slo=slo.ttft.p99_seconds, tpot_p99_slo=slo.tpot.p99_seconds, **overrides)


@dataclass(frozen=True)
class Sample:
    """One series of an instant query: its labels (with `__name__` when kept) and value."""

    labels: Mapping[str, str]
    value: float


@dataclass(frozen=True)
class Fetched:
    """Everything the audit reads, as fetched; None (with a reason in `problems`) when unreadable.

    `rules` and `targets` are the `data` objects of `/api/v1/rules` and `/api/v1/targets`.
    `instant` holds the answers to `instant_queries`, by name; a name missing from it was
    not asked (its metric does not exist) or failed (`problems["instant:<name>"]`).
    """

    server: str
    at: float
    metric_names: frozenset[str] | None
    rules: Mapping[str, Any] | None
    targets: Mapping[str, Any] | None
    frame: SignalFrame | None
    instant: Mapping[str, Sequence[Sample]] = field(default_factory=dict)
    problems: Mapping[str, str] = field(default_factory=dict)
    lookback: float = DEFAULT_LOOKBACK


@dataclass(frozen=True)
class AuditItem:
    """One checklist item's verdict; `to_json` is the stable output contract."""

    id: str
    section: str
    title: str
    status: Status
    evidence: str
    how_to_fix: str

    def to_json(self) -> dict[str, str]:
        return {
            "id": self.id,
            "section": self.section,
            "title": self.title,
            "status": self.status,
            "evidence": self.evidence,
            "how_to_fix": self.how_to_fix,
        }


@dataclass(frozen=True)
class AuditReport:
    """Every item in checklist order, and what could not be read (source -> one-line reason)."""

    server: str
    at: float
    lookback: float
    items: tuple[AuditItem, ...]
    problems: Mapping[str, str] = field(default_factory=dict)

    def counts(self) -> dict[str, int]:
        out: dict[str, int] = {status: 0 for status in STATUS_ORDER}
        for item in self.items:
            out[item.status] += 1
        return out

    def by_id(self, item_id: str) -> AuditItem:
        return next(item for item in self.items if item.id == item_id)

    @property
    def nothing_readable(self) -> bool:
        """True when neither metric names, rules nor targets could be read: the CLI's exit 3."""
        return all(key in self.problems for key in ("metric_names", "rules", "targets"))

    def to_json(self) -> list[dict[str, str]]:
        return [item.to_json() for item in self.items]


@dataclass(frozen=True)
class Finding:
    """What one check concluded, before it is dressed as an `AuditItem`."""

    status: Status
    evidence: tuple[str, ...]


def verdict(status: Status, *lines: str) -> Finding:
    return Finding(status, tuple(line for line in lines if line))


__all__ = [
    "DEFAULT_LOOKBACK",
    "STATUS_ORDER",
    "AuditItem",
    "AuditReport",
    "AuditSettings",
    "Checklist",
    "ChecklistItem",
    "Fetched",
    "Finding",
    "Sample",
    "Section",
    "Status",
    "verdict",
]
