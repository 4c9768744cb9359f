"""Write the README's screenshots of `triage tui` (SVG, as Textual exports them).

Run: python -m tools.tui_screenshot   (writes docs/tui-diagnosis.svg and docs/tui-overview.svg)
"""

from __future__ import annotations

import asyncio
import contextlib
import sys
from pathlib import Path

from textual.worker import WorkerCancelled

from signals.catalog import load_catalog
from signals.fixture import load_fixture
from triage.replay import fixture_symptom
from triage.sources import load_graph
from tui.app import Settings, TriageApp
from tui.cli import create_app
from tui.feeds import FixtureFeed

ROOT = Path(__file__).resolve().parent.parent
FIXTURE = ROOT / "fixtures" / "kv-pressure-long-context.yaml"
SIZE = (130, 38)


def _app() -> TriageApp:
    graph = load_graph()
    fixture = load_fixture(str(FIXTURE))
    symptom, source = fixture_symptom(fixture, None, graph.knowledge)
    return create_app(graph, FixtureFeed(fixture, load_catalog()), settings=Settings(symptom, source))


async def _shoot() -> None:
    app = _app()
    async with app.run_test(size=SIZE) as pilot:
        while app.busy:
            with contextlib.suppress(WorkerCancelled):
                await app.workers.wait_for_complete()
            await pilot.pause()
        app.save_screenshot("tui-diagnosis.svg", str(ROOT / "docs"))
        await pilot.press("2")
        await pilot.pause()
        app.save_screenshot("tui-overview.svg", str(ROOT / "docs"))


def main() -> int:
    asyncio.run(_shoot())
    print("wrote docs/tui-diagnosis.svg and docs/tui-overview.svg")
    return 0


if __name__ == "__main__":
    sys.exit(main())
