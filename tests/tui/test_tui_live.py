"""Live mode against a real engine (Prometheus, VictoriaMetrics), and the UI staying responsive
while a fetch stalls."""

from __future__ import annotations

import pytest
from promserver import PromStandIn, Reply
from rich.text import Text
from test_live import raw_kv_incident
from textual.widgets import Static, TabbedContent
from tuiapp import live_feed
from vmserver import ENGINES, require_engine, temporary_engine

from signals.prometheus import ReadProgress
from triage.core.graph import TriageGraph
from tui.app import Settings
from tui.feeds import ReadingFeed
from tui.launch import create_app
from tui.pilot import settle
from tui.screens import SignalScreen
from tui.widgets import SignalTile


def _status(app: object) -> str:
    content = app.query_one("#status", Static).content  # type: ignore[attr-defined]
    return content.plain if isinstance(content, Text) else str(content)


@pytest.mark.parametrize("engine", ENGINES)
async def test_live_mode_diagnoses_a_real_prometheus_and_keeps_the_picture_when_it_goes(
    engine: str, graph: TriageGraph
) -> None:
    require_engine(engine)
    with temporary_engine(engine, raw_kv_incident()) as prom:
        app = create_app(graph, live_feed(prom.url), settings=Settings(symptom="tpot_slow", refresh=3600))
        async with app.run_test(size=(130, 40)) as pilot:
            await settle(pilot)
            d = app.diagnosis
            assert d is not None and d.top is not None and d.top.cause == "kv_pressure"
            assert "scale_out" in {f.action for f in d.forbidden}
            assert "gpu_xid" in d.missing_signals  # no DCGM here: a blind spot, never healthy
            status = _status(app)
            assert status.startswith("LIVE") and prom.url in status and "refreshed" in status
            await pilot.press("2")
            await pilot.pause()
            kv = app.query_one("#tile-kv_usage_ratio", SignalTile).tile
            assert kv is not None and kv.level == "bad" and kv.value is not None and kv.value > 0.95
            gpu = app.query_one("#tile-gpu_health", SignalTile).tile
            assert gpu is not None and gpu.level == "blind"
            app.action_drill("kv_usage_ratio")
            await pilot.pause()
            assert isinstance(app.screen, SignalScreen)
            assert "vllm:kv_cache_usage_perc" in app.screen.promql and 'job="vllm"' in app.screen.promql
            await pilot.press("escape")

            prom.stop()
            await pilot.press("r")
            await settle(pilot)
            status = _status(app)
            assert "FETCH FAILED" in status and "showing the last good data" in status
            assert app.diagnosis is d


def test_a_live_load_tells_each_request_it_sends_as_it_ends() -> None:
    """The glue between the screen and the source: a real load, watched through the feed."""
    require_engine(ENGINES[0])
    heard: list[ReadProgress] = []
    with temporary_engine(ENGINES[0], raw_kv_incident()) as prom:
        feed = live_feed(prom.url)
        assert isinstance(feed, ReadingFeed)
        with feed.reading(heard.append):
            snapshot = feed.load()
        told = len(heard)
        feed.load()  # not watched
    assert snapshot.frame.signals() and len(heard) == told
    assert heard and heard[-1].answered == heard[-1].asked > 2  # the names, then the round: all ended
    assert [p.answered for p in heard] == sorted(p.answered for p in heard)


async def test_keys_are_handled_while_a_fetch_is_stalled(graph: TriageGraph) -> None:
    # The stall lasts until the test ends it (`stop` releases it and closes the server), so no
    # timeout races the key presses however slow the machine is.
    with PromStandIn(Reply.stalled(600.0, then=Reply.names([]))) as stalled:
        app = create_app(graph, live_feed(stalled.url, timeout=300.0), settings=Settings(refresh=3600))
        async with app.run_test(size=(120, 40)) as pilot:
            await pilot.pause()
            fetches = [w for w in app.workers if w.group == "fetch"]
            assert fetches and fetches[0].is_running
            await pilot.press("2")
            assert app.query_one(TabbedContent).active == "overview"
            await pilot.press("question_mark")
            assert type(app.screen).__name__ == "HelpScreen"
            assert fetches[0].is_running  # all of that happened while the fetch was still out
            await pilot.press("escape")
            stalled.stop()
            await settle(pilot)
            assert app.snapshot is None and app.fetch_error is not None
            assert "FETCH FAILED" in _status(app)
