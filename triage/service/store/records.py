"""The rows the store takes in and hands out: intake counts, work items and results, outbox rows.

Shared by every part of the store and by the worker, the runtime and the sinks, so they
live apart from the SQL that fills them.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from triage.service.store.backend import Tx


@dataclass(frozen=True)
class IntakeResult:
    """What one notification changed: counts for the response and the metrics."""

    alerts: int
    new: int
    duplicates: int
    resolved: int
    heartbeats: int
    new_work: int
    annotated: int = 0


@dataclass(frozen=True)
class WorkItem:
    """A claimed diagnosis job: one group at one moment, with the symptom to start from.

    `fleet` is the fleet its alerts name by their fleet labels (`namespace="llm",...`;
    empty when they name none), and `alerts` the distinct label sets of its alerts, from
    which the worker finds the fleet (by those labels, or by a pod or instance).
    """

    id: int
    group_key: str
    at: float
    symptom: str
    symptom_source: str
    attempts: int
    fleet: str = ""
    alerts: tuple[Mapping[str, str], ...] = ()
    claim: str = ""
    """The token of this claim: the result is stored only while it is still the row's."""


@dataclass(frozen=True)
class WorkResult:
    """What a worker hands back: a diagnosis (as JSON and text), or why signals were unavailable."""

    signature: str
    symptom: str
    cause: str | None
    diagnosis: Mapping[str, Any] | None
    summary: str
    headline: str
    unavailable: str | None
    fetches: int
    reason: str = ""
    """For unavailable signals, the kind of failure (timeout, unreachable, auth, not_json, ...)."""
    scope: str = ""
    """Which fleet was diagnosed and how it was chosen, or why none was (one line)."""
    brief: Mapping[str, Any] | None = None
    """The diagnosis's headline as a message shows it (the service's `diagnosis_brief` of
    `stored()`), made where the diagnosis is made: finishing the work under its group's lock
    then reads only the alerts, and the intake's process never renders a diagnosis. None: the
    message reads it back from the store."""

    def stored(self) -> dict[str, Any]:
        """What the store keeps of this result on each of its annotations and its work row: the
        state, symptom, cause, signals note, the diagnosis as JSON text, and the scope."""
        return {
            "state": "unavailable" if self.unavailable else "annotated",
            "symptom": self.symptom,
            "cause": self.cause,
            "signals": (
                f"unavailable: {self.unavailable}"
                if self.unavailable
                else ("ok" if self.diagnosis is not None else "not read")
            ),
            "diagnosis": (
                json.dumps(self.diagnosis, ensure_ascii=False, allow_nan=False) if self.diagnosis else None
            ),
            "scope": self.scope or None,
        }


@dataclass(frozen=True)
class OutboxRow:
    """One message to deliver to one sink."""

    id: int
    sink: str
    key: str
    group_key: str
    kind: str
    message: dict[str, Any]
    attempts: int
    next_at: float
    created_at: float = 0.0
    """When it was queued: a sink that waits for something to exist (a PagerDuty incident)
    retries within a window counted from here."""
    claim: str = ""
    """The token of this replica's claim on sending it: its outcome is stored only under it."""


class MessageBuilder(Protocol):
    """Builds a group's message inside the transaction that queues it: `kind` is `diagnosis`,
    `changed` or `resolved`; `brief` is the finished work's own headline (`WorkResult.brief`),
    given when the message is about the work `work_id` that carries it."""

    def __call__(
        self,
        db: Tx,
        group_key: str,
        kind: str,
        episode: int,
        work_id: int | None,
        brief: Mapping[str, Any] | None = None,
    ) -> dict[str, Any]: ...
