"""The TUI per fleet: the picker lists a live server's fleets and scopes the picture to one.

A real Prometheus serves the bundled two-fleet recording (label sets as the scraped test
cluster gave them). No sleeps: every step waits on the app's workers.
"""

from __future__ import annotations

import argparse
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace

import pytest
from fleetrecording import LARGE, SMALL, recording, serving
from promserver import require_prometheus_binaries
from rich.text import Text
from textual.pilot import Pilot
from textual.widgets import DataTable, OptionList, Static, TabbedContent
from tuiapp import ROOT

from signals.catalog import QueryOptions, load_catalog
from signals.fixture import load_fixture
from signals.fleets import Fleet, FleetMap
from signals.prometheus import PrometheusSource
from triage.cli.main import main
from triage.cli.tui import add_tui_parser
from triage.core.graph import TriageGraph
from tui.app import Settings, TriageApp
from tui.feeds import FixtureFeed, Snapshot
from tui.fleets import ALL, FleetScreen
from tui.launch import build_from_args, create_app
from tui.livefeed import PrometheusFeed
from tui.pilot import settle

PODS_8B = 3


@pytest.fixture(scope="module")
def url() -> Iterator[str]:
    require_prometheus_binaries()
    with serving(recording()) as prometheus:
        yield prometheus.url


def feed(url: str, fleet: str | None = None) -> PrometheusFeed:
    """The live feed at the recording's moment of diagnosis, over the whole recording before it."""
    fixture = recording()
    return PrometheusFeed(
        PrometheusSource(url, timeout=30.0),
        load_catalog(),
        QueryOptions(),
        lookback=fixture.at - fixture.start,
        step=fixture.interval,
        clock=lambda: fixture.at,
        fleet=fleet,
    )


def status(app: TriageApp) -> str:
    content = app.query_one("#status", Static).content
    return content.plain if isinstance(content, Text) else str(content)


def replica_rows(app: TriageApp) -> set[str]:
    table = app.query_one("#replicas", DataTable)
    return {str(key.value) for key in table.rows}


async def until(pilot: Pilot[None], done: Callable[[], bool], rounds: int = 50) -> None:
    """Settle until `done()` holds (a message may open a screen after the workers finished)."""
    for _ in range(rounds):
        await settle(pilot)
        if done():
            return
    raise AssertionError("never reached")


async def test_the_picker_lists_the_fleets_and_choosing_one_scopes_the_picture(
    graph: TriageGraph, url: str
) -> None:
    app = create_app(graph, feed(url), settings=Settings(symptom="tpot_slow", refresh=3600))
    async with app.run_test(size=(130, 40)) as pilot:
        # Several fleets and none chosen: after the first picture the picker opens by itself.
        await until(pilot, lambda: isinstance(app.screen, FleetScreen))
        options = app.screen.query_one("#fleet-list", OptionList)
        ids = [options.get_option_at_index(i).id for i in range(options.option_count)]
        assert ids == [ALL, LARGE, SMALL]
        large = str(options.get_option_at_index(1).prompt)
        assert "LeaderWorkerSet/vllm-70b · 3 replicas · 24 GPUs" in large
        assert "Deployment/vllm · 3 replicas · 3 GPUs" in str(options.get_option_at_index(2).prompt)
        assert "all 2 fleets mixed: f picks one" in status(app)
        assert app.snapshot is not None and app.snapshot.fleet is None
        mixed = len(app.snapshot.frame.replicas("requests_running").replicas)
        # both fleets' engines by instance; never the router's re-export of their gauges
        assert mixed == 2 * PODS_8B

        await pilot.press("down", "enter")  # the 8B fleet
        await until(pilot, lambda: app.snapshot is not None and app.snapshot.fleet == SMALL)
        assert not isinstance(app.screen, FleetScreen)
        assert f"fleet {SMALL}" in status(app) and "mixed" not in status(app)
        assert app.diagnosis is not None and app.diagnosis.top is not None
        assert app.diagnosis.top.cause == "kv_pressure"
        await pilot.press("2")
        await pilot.pause()
        pods = replica_rows(app)
        assert len(pods) == PODS_8B and all(p.startswith("vllm-") and "70b" not in p for p in pods)

        # f opens it again, the fleet shown marked; "all fleets" goes back to the whole server.
        await pilot.press("f")
        await until(pilot, lambda: isinstance(app.screen, FleetScreen))
        options = app.screen.query_one("#fleet-list", OptionList)
        assert options.highlighted == 2 and str(options.get_option_at_index(2).prompt).startswith("● ")
        await pilot.press("home", "enter")
        await until(pilot, lambda: app.snapshot is not None and app.snapshot.fleet is None)
        assert len(replica_rows(app)) >= mixed  # every exporter's instance, the fleets mixed
        assert "all 2 fleets mixed" in status(app)


async def test_a_fleet_given_from_the_start_is_shown_alone_and_the_picker_stays_shut(
    graph: TriageGraph, url: str
) -> None:
    app = create_app(graph, feed(url, "llm/meta-llama/Llama-3.1-70B"), settings=Settings(refresh=3600))
    async with app.run_test(size=(130, 40)) as pilot:
        await until(pilot, lambda: app.snapshot is not None and app.fleet_map is not None)
        assert not isinstance(app.screen, FleetScreen)
        assert app.snapshot is not None and app.snapshot.fleet == LARGE
        assert f"fleet {LARGE}" in status(app)
        await pilot.press("2")
        await pilot.pause()
        assert replica_rows(app) == {"vllm-70b-0", "vllm-70b-1", "vllm-70b-2"}


async def test_a_fleet_that_is_not_there_says_which_are(graph: TriageGraph, url: str) -> None:
    app = create_app(graph, feed(url, "llm/qwen"), settings=Settings(refresh=3600))
    async with app.run_test(size=(130, 40)) as pilot:
        await settle(pilot)
        assert app.snapshot is None and app.fetch_error is not None
        assert f"no fleet 'llm/qwen' in {url}; the fleets are: {LARGE}, {SMALL}" in status(app)
        await pilot.press("f")
        await until(pilot, lambda: isinstance(app.screen, FleetScreen) and app.fleet_map is not None)
        await pilot.press("enter")  # the first fleet listed
        await until(pilot, lambda: app.snapshot is not None)
        assert app.snapshot is not None and app.snapshot.fleet == LARGE and app.fetch_error is None


def test_the_command_line_hands_the_fleet_to_the_live_feed(capsys: pytest.CaptureFixture[str]) -> None:
    parser = argparse.ArgumentParser()
    add_tui_parser(parser.add_subparsers())
    wanted = "namespace=llm,model_name=m"
    app = build_from_args(
        parser.parse_args(
            ["tui", "--prometheus", "http://p:9090", "--fleet", wanted, "--fleet-labels", "model_name"]
        )
    )
    assert isinstance(app.feed, PrometheusFeed)
    assert app.feed.fleet == wanted and app.feed.fleet_labels == ("model_name",)
    assert main(["tui", "--prometheus", "http://p:9090", "--fleet", "namespace=llm,m"]) == 2
    assert "--fleet: 'm' is not key=value" in capsys.readouterr().err
    assert main(["tui", "--fixture", "fixtures/kv-pressure-long-context.yaml", "--fleet", "llm/x"]) == 2
    assert "--fleet: only with --prometheus" in capsys.readouterr().err


@dataclass
class SlowFleets:
    """A live feed over a recording whose fleet listing blocks until released."""

    inner: FixtureFeed
    release: threading.Event
    fleet: str | None = None
    live: bool = True
    label: str = "live slow fleets"

    def load(self, at: float | None = None) -> Snapshot:
        return self.inner.load(None)

    def fleets(self) -> FleetMap:
        self.release.wait(30)
        return FleetMap(tuple(Fleet((("model_name", m),), "vllm", None, "pod", (f"{m}-0",)) for m in "ab"))

    def scoped(self, fleet: str | None) -> SlowFleets:
        return replace(self, fleet=fleet)


async def test_keys_never_wait_on_the_fleet_listing(graph: TriageGraph) -> None:
    fixture = load_fixture(str(ROOT / "fixtures" / "kv-pressure-long-context.yaml"))
    release = threading.Event()
    slow = SlowFleets(FixtureFeed(fixture, load_catalog()), release)
    app = create_app(graph, slow, settings=Settings(symptom="tpot_slow", refresh=3600))
    try:
        async with app.run_test(size=(120, 40)) as pilot:
            for _ in range(200):
                await pilot.pause()
                if app.diagnosis is not None:
                    break
            listing = next(w for w in app.workers if w.group == "fleets")
            await pilot.press("f")
            assert isinstance(app.screen, FleetScreen)
            note = app.screen.query_one("#fleet-note", Static).content
            assert "looking for fleets" in str(note)
            assert app.screen.query_one("#fleet-list", OptionList).option_count == 0
            await pilot.press("escape", "2")
            assert app.query_one(TabbedContent).active == "overview"
            assert listing.is_running  # all of that happened while the listing was still out
            release.set()
            await settle(pilot)
            assert not isinstance(app.screen, FleetScreen)  # offered already: it does not reopen
            await pilot.press("f")
            await settle(pilot)
            options = app.screen.query_one("#fleet-list", OptionList)
            assert [options.get_option_at_index(i).id for i in range(options.option_count)] == [ALL, "a", "b"]
    finally:
        release.set()
