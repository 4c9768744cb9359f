"""Write the README's screenshots of `triage tui` (SVG, as Textual exports them).

Run: python -m tools.tui_screenshot   (writes docs/tui-diagnosis.svg and docs/tui-overview.svg)
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

from signals.fixture import load_fixture
from triage.sources import load_graph
from tui.launch import replay_app
from tui.pilot import settle

ROOT = Path(__file__).resolve().parent.parent
FIXTURE = ROOT / "fixtures" / "kv-pressure-long-context.yaml"
SIZE = (130, 38)


async def _shoot() -> None:
    app = replay_app(load_graph(), load_fixture(str(FIXTURE)))
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
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
