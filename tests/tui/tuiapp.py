"""Building the TUI the way the CLI does, on a bundled fixture or the test Prometheus."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from signals.catalog import QueryOptions, load_catalog
from signals.fixture import load_fixture
from signals.prometheus import PrometheusSource
from triage.core.graph import TriageGraph
from tui.app import Settings, TriageApp
from tui.launch import replay_app
from tui.livefeed import PrometheusFeed

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "fixtures"


def fixture_app(
    graph: TriageGraph, name: str, symptom: str | None = None, play_interval: float = 0.5, **more: Any
) -> TriageApp:
    """The app on a bundled fixture, built as `triage tui --fixture` builds it."""
    fixture = load_fixture(str(FIXTURES / f"{name}.yaml"))
    return replay_app(graph, fixture, symptom, settings=Settings(play_interval=play_interval, **more))


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
