"""The replay cursor: stepping, jumping to the onset, and playing a recorded incident.

In replay the cursor is the moment diagnosed; it moves within the frame and each move
asks for a new diagnosis. Kept apart from the app's layout, workers and rendering, which
it reaches through `ReplayHost`.
"""

from __future__ import annotations

from typing import Protocol

from triage.core.model import Diagnosis
from tui.feeds import Feed, Snapshot


class ReplayHost(Protocol):
    """What the cursor needs of the app it moves."""

    feed: Feed
    snapshot: Snapshot | None
    cursor: float | None
    diagnosis: Diagnosis | None
    playing: bool
    last_refresh: float | None

    def request_diagnosis(self) -> None: ...

    def _render_status(self) -> None: ...

    def notify(self, message: str, *, timeout: float | None = None) -> None: ...

    def _step_size(self) -> float: ...

    def _move(self, to: float) -> None: ...


class ReplayCursor:
    """The cursor's actions, mixed into the app (the `←/→`, `shift+←/→`, `o` and `space` keys)."""

    cursor: float | None
    playing: bool

    def _step_size(self: ReplayHost) -> float:
        return self.snapshot.frame.step if self.snapshot is not None else 60.0

    def _move(self: ReplayHost, to: float) -> None:
        if self.feed.live or self.snapshot is None:
            return
        frame = self.snapshot.frame
        target = min(max(to, frame.start + frame.step), frame.end)
        if target != self.cursor:
            self.cursor = target
            self.request_diagnosis()

    def action_step(self: ReplayHost, steps: int) -> None:
        if self.cursor is not None:
            self._move(self.cursor + steps * self._step_size())

    def action_jump(self: ReplayHost, seconds: float) -> None:
        if self.cursor is not None:
            self._move(self.cursor + seconds)

    def action_onset(self: ReplayHost) -> None:
        if self.diagnosis is None or self.diagnosis.onset is None:
            self.notify("No onset found at this moment.", timeout=3)
            return
        self._move(self.diagnosis.onset)

    def action_play(self: ReplayHost) -> None:
        self.playing = not self.playing
        self._render_status()

    def _tick(self: ReplayHost) -> None:
        if self.playing and self.snapshot is not None and self.cursor is not None:
            if self.cursor >= self.snapshot.frame.end:
                self.playing = False
                self._render_status()
                return
            self._move(self.cursor + self._step_size())
        elif self.feed.live and self.last_refresh is not None:
            self._render_status()
