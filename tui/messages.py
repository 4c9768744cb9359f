"""Typed messages from the workers to the app: results travel as data, widgets only render."""

from __future__ import annotations

from textual.message import Message

from triage.core.model import Diagnosis
from tui.alerts import AlertView
from tui.feeds import Snapshot


class SnapshotLoaded(Message):
    """A feed load finished; `purpose` says whether it is the picture or an alert's moment."""

    def __init__(self, snapshot: Snapshot, purpose: str = "picture") -> None:
        super().__init__()
        self.snapshot = snapshot
        self.purpose = purpose


class FetchFailed(Message):
    """A feed load failed; the last good snapshot stays on screen."""

    def __init__(self, error: str, at: float) -> None:
        super().__init__()
        self.error = error
        self.at = at


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
