"""Driving the app headless (tests, benchmarks, screenshots): wait on its workers, never sleep."""

from __future__ import annotations

import contextlib

from textual.pilot import Pilot
from textual.worker import WorkerCancelled

from tui.app import TriageApp


async def settle(pilot: Pilot[None], rounds: int = 200) -> None:
    """Until every load and diagnosis requested so far is on screen (RuntimeError if it never is)."""
    app = pilot.app
    assert isinstance(app, TriageApp)
    for _ in range(rounds):
        with contextlib.suppress(WorkerCancelled):  # an exclusive worker overtaken by a newer one
            await app.workers.wait_for_complete()
        await pilot.pause()
        if not app.busy:
            return
    raise RuntimeError("the app never settled: a load or a diagnosis is still outstanding")
