"""Snapshot tests: the screens as SVG, compared with the ones checked in.

Textual is pinned in pyproject.toml because the SVG depends on it. Refresh after an
intended change with `pytest tests/tui/test_snapshots.py --snapshot-update` and look
at the report it writes before committing.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from textual.pilot import Pilot
from tuiapp import fixture_app

from triage.core.graph import TriageGraph
from tui.pilot import settle

SnapCompare = Callable[..., bool]


async def _ready(pilot: Pilot[None]) -> None:
    await settle(pilot)


def _then(*keys: str) -> Callable[[Pilot[None]], Any]:
    async def run(pilot: Pilot[None]) -> None:
        await settle(pilot)
        await pilot.press(*keys)
        await settle(pilot)

    return run


def test_diagnosis_screen(graph: TriageGraph, snap_compare: SnapCompare) -> None:
    app = fixture_app(graph, "kv-pressure-long-context")
    assert snap_compare(app, terminal_size=(130, 40), run_before=_ready)


def test_diagnosis_screen_at_80x24(graph: TriageGraph, snap_compare: SnapCompare) -> None:
    app = fixture_app(graph, "replica-down-queue-growth")
    assert snap_compare(app, terminal_size=(80, 24), run_before=_ready)


def test_overview_screen(graph: TriageGraph, snap_compare: SnapCompare) -> None:
    app = fixture_app(graph, "gpu-throttling-hot-node")
    assert snap_compare(app, terminal_size=(130, 40), run_before=_then("2"))


def test_signal_drilldown(graph: TriageGraph, snap_compare: SnapCompare) -> None:
    app = fixture_app(graph, "kv-pressure-long-context")

    async def run(pilot: Pilot[None]) -> None:
        await settle(pilot)
        app.action_drill("kv_usage_ratio")
        await pilot.pause()

    assert snap_compare(app, terminal_size=(130, 40), run_before=run)


def test_help_screen(graph: TriageGraph, snap_compare: SnapCompare) -> None:
    app = fixture_app(graph, "kv-pressure-long-context")
    assert snap_compare(app, terminal_size=(100, 30), run_before=_then("question_mark"))


def test_light_theme(graph: TriageGraph, snap_compare: SnapCompare) -> None:
    app = fixture_app(graph, "replica-down-queue-growth")
    app.settings.theme = "textual-light"
    assert snap_compare(app, terminal_size=(110, 32), run_before=_ready)
