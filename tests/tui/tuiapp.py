"""Building the TUI the way the CLI does, and waiting on its workers instead of sleeping."""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Any

from textual.pilot import Pilot
from textual.worker import WorkerCancelled

from signals.catalog import QueryOptions, load_catalog
from signals.fixture import load_fixture
from signals.prometheus import PrometheusSource
from triage.graph import TriageGraph
from triage.replay import fixture_symptom
from tui.app import Settings, TriageApp
from tui.cli import create_app
from tui.feeds import FixtureFeed, PrometheusFeed

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "fixtures"


def fixture_app(
    graph: TriageGraph, name: str, symptom: str | None = None, play_interval: float = 0.5, **more: Any
) -> TriageApp:
    """The app on a bundled fixture, its symptom chosen as `triage tui --fixture` chooses it."""
    fixture = load_fixture(str(FIXTURES / f"{name}.yaml"))
    chosen, source = fixture_symptom(fixture, symptom, graph.knowledge)
    settings = Settings(symptom=chosen, symptom_source=source, play_interval=play_interval, **more)
    return create_app(graph, FixtureFeed(fixture, load_catalog()), settings=settings)


async def settle(pilot: Pilot[None]) -> None:
    """Until every load and diagnosis requested so far is on screen."""
    app = pilot.app
    assert isinstance(app, TriageApp)
    for _ in range(200):
        with contextlib.suppress(WorkerCancelled):  # an exclusive worker overtaken by a newer one
            await app.workers.wait_for_complete()
        await pilot.pause()
        if not app.busy:
            return
    raise AssertionError("the app never settled")


def live_feed(url: str, timeout: float = 5.0) -> PrometheusFeed:
    """The live feed on the test Prometheus's recorded incident (test_live's), its clock at the end."""
    from test_live import AT

    return PrometheusFeed(
        PrometheusSource(url, timeout=timeout),
        load_catalog(),
        QueryOptions(selector='job="vllm"'),
        lookback=5400,
        step=30,
        clock=lambda: AT,
    )
