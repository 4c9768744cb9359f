"""Benchmark of the terminal UI; prints a table.

Measures, headless (Textual's test driver, the same screen at 120x40):
  first paint     launch of `triage tui --fixture` on a bundled incident until the
                  diagnosis is on screen, each in a fresh process timed from before it
                  starts (interpreter, imports, playbooks, fixture, app)  target <= 1.0 s
  cursor step     → on the 64-replica, 6-hour benchmark fixture: key, diagnosis at the
                  new moment, every widget redrawn (median and worst of 40)  target <= 100 ms
  key while slow  keys handled while a live fetch is stalled for 5 s by a server that
                  accepts and does not answer (worst of 20 keys)              target <= 100 ms

Run: python -m bench.tui [--runs 5] [--fixture fixtures/replica-down-queue-growth.yaml]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import socket
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

from bench.big_fixture import PATH as BIG
from bench.big_fixture import build as build_big

ROOT = Path(__file__).resolve().parent.parent
PAINT_TARGET = 1.0

PAINT_CHILD = r"""
import asyncio, json, sys, time
from triage.cli import main as core
from triage.cli.tui import COMMAND as TUI

core.prepare_process()  # as the console script does before any command loads
TUI.load()  # the handler's module, imported as `triage tui` imports it
from tui.launch import build_from_args
from tui.pilot import settle

async def main():
    args = core.build_parser().parse_args(["tui", "--fixture", sys.argv[1]])
    app = build_from_args(args)
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        painted = time.time()
        top = app.diagnosis.top.cause if app.diagnosis.top else None
    print(json.dumps({"painted": painted, "top": top}))

asyncio.run(main())
"""


def first_paint(fixture: str, runs: int) -> tuple[list[float], str | None]:
    """Seconds from before the process starts until the diagnosis is on screen."""
    times, top = [], None
    for _ in range(runs):
        started = time.time()
        result = subprocess.run(
            [sys.executable, "-c", PAINT_CHILD, fixture], capture_output=True, text=True, cwd=ROOT, check=True
        )
        data = json.loads(result.stdout.strip().splitlines()[-1])
        times.append(data["painted"] - started)
        top = data["top"]
    return times, top


async def _settle(pilot: Any) -> None:
    """Every request on screen, then one more turn so the frame showing it is composed."""
    from tui.pilot import settle

    await settle(pilot)
    await pilot.pause()


def _paint_clock(app: Any) -> list[float]:
    """Timestamps of every frame the screen composes from now on (a key's work ends on screen)."""
    stamps: list[float] = []
    screen = app.screen
    compose = screen._compositor_refresh

    def stamped() -> None:
        compose()
        stamps.append(time.perf_counter())

    screen._compositor_refresh = stamped
    return stamps


def _first_after(stamps: list[float], moment: float) -> float:
    return next(t for t in stamps if t >= moment)


def cursor_steps(steps: int) -> tuple[list[float], list[float], int]:
    """Per → on the big fixture: key to the frame that shows the new diagnosis; and the diagnosis alone.

    The clock starts before the key is sent and stops at the first frame composed after
    every widget took the new diagnosis; the test driver's own idle waits are not counted.
    """
    from signals.catalog import load_catalog
    from signals.fixture import load_fixture
    from triage.sources import load_graph
    from tui.app import Settings
    from tui.feeds import FixtureFeed
    from tui.launch import create_app

    if not BIG.exists():
        build_big()
    fixture = load_fixture(str(BIG))
    app = create_app(
        load_graph(), FixtureFeed(fixture, load_catalog()), settings=Settings(symptom="tpot_slow")
    )
    total: list[float] = []
    walk: list[float] = []
    rendered: list[float] = []
    render_all = app._render_all

    def stamped_render() -> None:
        render_all()
        rendered.append(time.perf_counter())

    app._render_all = stamped_render

    async def run() -> None:
        async with app.run_test(size=(120, 40)) as pilot:
            await _settle(pilot)
            await pilot.press("shift+left", "shift+left", "shift+left")  # inside the incident, room to step
            await _settle(pilot)
            frames = _paint_clock(app)
            for _ in range(steps):
                started = time.perf_counter()
                await pilot.press("right")
                await _settle(pilot)
                total.append(_first_after(frames, rendered[-1]) - started)
                walk.append(app.last_diagnosis_seconds)

    asyncio.run(run())
    return total, walk, len(fixture.frame.replica_names())


def _silent_server() -> tuple[str, socket.socket, threading.Event]:
    """A TCP server that accepts connections and never answers: a Prometheus stuck on a query."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(16)
    stop = threading.Event()
    held: list[socket.socket] = []

    def accept() -> None:
        server.settimeout(0.2)
        while not stop.is_set():
            with contextlib.suppress(OSError):
                conn, _ = server.accept()
                held.append(conn)
        for c in held:
            c.close()

    threading.Thread(target=accept, daemon=True).start()
    return f"http://127.0.0.1:{server.getsockname()[1]}", server, stop


def keys_while_stalled(keys: int) -> tuple[list[float], bool]:
    """Key to the frame that shows it (tab switches) while a 5 s live fetch is in flight.

    The tab underline's animation is turned off so the figure is the app's latency, not
    the length of a cosmetic slide.
    """
    from signals.catalog import QueryOptions, load_catalog
    from signals.prometheus import PrometheusSource
    from triage.sources import load_graph
    from tui.app import Settings
    from tui.launch import create_app
    from tui.livefeed import PrometheusFeed

    url, server, stop = _silent_server()
    feed = PrometheusFeed(PrometheusSource(url, timeout=5.0, max_retries=0), load_catalog(), QueryOptions())
    app = create_app(load_graph(), feed, settings=Settings(refresh=3600))
    app.animation_level = "none"
    out: list[float] = []
    in_flight = True

    async def run() -> None:
        nonlocal in_flight
        from textual.widgets import TabbedContent

        async with app.run_test(size=(120, 40)) as pilot:
            await pilot.pause()
            fetch = next(w for w in app.workers if w.group == "fetch")
            tabs = app.query_one(TabbedContent)
            frames = _paint_clock(app)
            for i in range(keys):
                key, want = ("2", "overview") if i % 2 == 0 else ("1", "diagnosis")
                started = time.perf_counter()
                await pilot.press(key)
                assert tabs.active == want
                out.append(_first_after(frames, started) - started)
            in_flight = fetch.is_running

    try:
        asyncio.run(run())
    finally:
        stop.set()
        server.close()
    return out, in_flight


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--runs", type=int, default=5, help="fresh processes for the first paint (default 5)")
    parser.add_argument("--fixture", default="fixtures/replica-down-queue-growth.yaml")
    parser.add_argument("--steps", type=int, default=40, help="cursor steps on the big fixture (default 40)")
    args = parser.parse_args(argv)

    paint, top = first_paint(args.fixture, args.runs)
    steps, walks, replicas = cursor_steps(args.steps)
    keys, in_flight = keys_while_stalled(20)

    def ms(value: float) -> str:
        return f"{value * 1000:.0f} ms"

    rows = [
        (
            "first paint, median of fresh launches",
            f"{statistics.median(paint):.2f} s",
            f"≤ {PAINT_TARGET} s",
            statistics.median(paint) <= PAINT_TARGET,
        ),
        ("first paint, slowest launch", f"{max(paint):.2f} s", "—", None),
        (
            f"cursor step, {replicas} replicas, median",
            ms(statistics.median(steps)),
            "≤ 100 ms",
            statistics.median(steps) <= 0.1,
        ),
        ("cursor step, worst", ms(max(steps)), "—", None),
        ("  of which the diagnosis (worker thread), median", ms(statistics.median(walks)), "—", None),
        ("key handled during a stalled fetch, worst", ms(max(keys)), "≤ 100 ms", max(keys) <= 0.1),
    ]
    print(
        f"triage tui benchmark · {args.fixture} (top cause {top}) · {len(paint)} launches, "
        f"{len(steps)} steps, {len(keys)} keys (fetch still in flight after them: {in_flight})"
    )
    print("| measure | figure | target |")
    print("| --- | --- | --- |")
    for name, figure, target, ok in rows:
        mark = "" if ok is None else (" ✔" if ok else " ✘")
        print(f"| {name} | {figure} | {target}{mark} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
