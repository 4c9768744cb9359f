"""Typed messages from the workers to the app: results travel as data, widgets only render."""

from __future__ import annotations

from typing import TYPE_CHECKING

from textual.message import Message

from signals.fleets import FleetMap
from triage.core.model import Diagnosis
from tui.alerts import AlertView
from tui.feeds import Feed, Snapshot

if TYPE_CHECKING:  # a replay loads no HTTP client
    from signals.prometheus import ReadProgress


class SnapshotLoaded(Message):
    """A feed load finished; `purpose` says whether it is the picture or an alert's moment.
    `source` is the feed that loaded it: a load from a feed since replaced (another fleet
    chosen) is dropped."""

    def __init__(self, snapshot: Snapshot, purpose: str = "picture", source: Feed | None = None) -> None:
        super().__init__()
        self.snapshot = snapshot
        self.purpose = purpose
        self.source = source


class ReadProgressed(Message):
    """How far a live load has come: requests answered of those sent (from a worker's thread)."""

    def __init__(self, progress: ReadProgress, source: Feed | None = None) -> None:
        super().__init__()
        self.progress = progress
        self.source = source


class FetchFailed(Message):
    """A feed load failed; the last good snapshot stays on screen."""

    def __init__(self, error: str, at: float, source: Feed | None = None) -> None:
        super().__init__()
        self.error = error
        self.at = at
        self.source = source


class DiagnosisReady(Message):
    """The walk at one moment; `seq` lets the app drop an answer overtaken by a newer request."""

    def __init__(self, seq: int, diagnosis: Diagnosis, elapsed: float) -> None:
        super().__init__()
        self.seq = seq
        self.diagnosis = diagnosis
        self.elapsed = elapsed


class DiagnosisFailed(Message):
    """The walk raised: shown in place of the verdict, the app keeps running."""

    def __init__(self, seq: int, error: str) -> None:
        super().__init__()
        self.seq = seq
        self.error = error


class AlertsLoaded(Message):
    """Firing alerts and their annotations, or why they could not be read."""

    def __init__(self, alerts: list[AlertView], errors: list[str]) -> None:
        super().__init__()
        self.alerts = alerts
        self.errors = errors


class FleetsFound(Message):
    """The fleets a live server holds, for the fleet picker."""

    def __init__(self, fleets: FleetMap) -> None:
        super().__init__()
        self.fleets = fleets


class FleetsFailed(Message):
    """The fleets could not be listed: said in the picker, and tried again when it opens."""

    def __init__(self, error: str) -> None:
        super().__init__()
        self.error = error
