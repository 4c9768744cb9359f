"""Pilot tests of the TUI: what is on screen, and how keys change it. No test sleeps."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

import pytest
from rich.text import Text
from textual.widgets import DataTable, OptionList, Select, Static
from tuiapp import FIXTURES, fixture_app

from signals.fixture import load_fixture
from signals.prometheus import ReadProgress
from signals.timeparse import format_instant
from triage.core.graph import TriageGraph
from triage.core.model import AUTO
from tui.app import Settings, TriageApp
from tui.feeds import FixtureFeed, Snapshot
from tui.launch import create_app
from tui.pilot import settle
from tui.screens import KEYS, HelpScreen, SignalScreen
from tui.widgets import SignalTile, WalkTree


@pytest.fixture
def kv_app(graph: TriageGraph) -> TriageApp:
    return fixture_app(graph, "kv-pressure-long-context")


def _plain(app: TriageApp, selector: str) -> str:
    content = app.query_one(selector, Static).content
    return content.plain if isinstance(content, Text) else str(content)


def _tree_labels(app: TriageApp) -> list[str]:
    tree = app.query_one("#walk", WalkTree)
    out: list[str] = []

    def walk(node: object) -> None:
        out.append(node.label.plain)  # type: ignore[attr-defined]
        for child in node.children:  # type: ignore[attr-defined]
            walk(child)

    walk(tree.root)
    return out


async def test_first_screen_shows_cause_evidence_first_action_and_forbidden(kv_app: TriageApp) -> None:
    async with kv_app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        d = kv_app.diagnosis
        assert d is not None and d.top is not None and d.top.cause == "kv_pressure"
        verdict = _plain(kv_app, "#verdict")
        assert "VERDICT kv_pressure" in verdict
        holding = [e for e in d.top.evidence if e.holds]
        assert holding and all(e.check in verdict for e in holding)
        actions = kv_app.query_one("#actions", OptionList)
        assert actions.option_count == len(d.first_actions) > 0
        first = actions.get_option_at_index(0).prompt
        assert isinstance(first, Text) and d.first_actions[0].text in first.plain
        warnings = _plain(kv_app, "#warnings")
        for forbidden in ("scale_out", "raise_gpu_memory_utilization", "raise_max_num_seqs"):
            assert f"✗ {forbidden} — " in warnings or f"✗ always: {forbidden} — " in warnings
        scale_out = next(f for f in d.forbidden if f.action == "scale_out")
        assert scale_out.reason in warnings
        labels = _tree_labels(kv_app)
        assert labels[0].startswith("TPOT SLOW") or labels[0].startswith("TTFT SLOW")
        assert any(label.startswith("✔ kv_pressure") for label in labels)


async def test_symptom_switch_by_keyboard_changes_the_walk(graph: TriageGraph) -> None:
    app = fixture_app(graph, "replica-down-queue-growth")
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        assert app.diagnosis is not None and app.diagnosis.symptom == "ttft_slow"
        before = _tree_labels(app)
        await pilot.press("s", "down", "down", "enter")  # ttft_slow -> tpot_slow -> errors
        await settle(pilot)
        assert app.query_one("#symptom", Select).value == "errors"
        assert app.diagnosis.symptom == "errors"
        after = _tree_labels(app)
        assert after[0].startswith("ERRORS") and before[0].startswith("TTFT SLOW")
        assert after != before


async def test_auto_symptom_names_what_it_detected(graph: TriageGraph) -> None:
    app = fixture_app(graph, "kv-pressure-long-context", symptom=AUTO)
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        assert app.diagnosis is not None and app.diagnosis.symptom_source == "auto"
        assert f"symptom: {app.diagnosis.symptom} (auto)" in _plain(app, "#symptom-note")


async def test_cursor_steps_and_onset_recompute_the_diagnosis(kv_app: TriageApp) -> None:
    async with kv_app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        d = kv_app.diagnosis
        assert d is not None and d.onset is not None
        step = kv_app.snapshot.frame.step  # type: ignore[union-attr]
        start = d.at
        await pilot.press("left")
        await settle(pilot)
        assert kv_app.diagnosis.at == start - step
        await pilot.press("shift+left")
        await settle(pilot)
        assert kv_app.diagnosis.at == start - step - 600
        await pilot.press("o")
        await settle(pilot)
        assert kv_app.diagnosis.at == d.onset
        status = _plain(kv_app, "#status")
        assert format_instant(d.onset)[11:19] in status
        # Well before the onset nothing departs from its baseline: no cause is blamed.
        for _ in range(3):
            await pilot.press("shift+left")
        await settle(pilot)
        assert kv_app.diagnosis.at == d.onset - 1800
        assert kv_app.diagnosis.top is None
        assert _plain(kv_app, "#verdict").startswith("VERDICT no incident: tpot_slow is not breached")
        # Forward past the end stops at the last sample.
        for _ in range(20):
            await pilot.press("shift+right")
        await settle(pilot)
        assert kv_app.diagnosis.at == kv_app.snapshot.frame.end  # type: ignore[union-attr]


async def test_space_plays_one_step_per_tick_and_pauses(graph: TriageGraph) -> None:
    kv_app = fixture_app(graph, "kv-pressure-long-context", play_interval=3600)  # ticks driven by hand
    async with kv_app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        await pilot.press("o")
        await settle(pilot)
        at = kv_app.diagnosis.at  # type: ignore[union-attr]
        await pilot.press("space")
        assert kv_app.playing and "▶ playing" in _plain(kv_app, "#status")
        kv_app._tick()
        await settle(pilot)
        assert kv_app.diagnosis.at == at + kv_app.snapshot.frame.step  # type: ignore[union-attr]
        await pilot.press("space")
        assert not kv_app.playing
        kv_app._tick()
        await settle(pilot)
        assert kv_app.diagnosis.at == at + kv_app.snapshot.frame.step  # type: ignore[union-attr]


@dataclass
class FlakyFeed:
    """A live feed that answers once, then fails: the last good picture must stay."""

    inner: FixtureFeed
    live: bool = True
    label: str = "live flaky"
    loads: list[float | None] = field(default_factory=list)

    def load(self, at: float | None = None) -> Snapshot:
        self.loads.append(at)
        if len(self.loads) > 1:
            raise ConnectionError("http://prometheus:9090: connection refused")
        return self.inner.load(None)


async def test_failing_source_shows_the_error_and_keeps_the_last_good_data(graph: TriageGraph) -> None:
    feed = FlakyFeed(kv_feed())
    app = create_app(graph, feed, settings=Settings(symptom="tpot_slow", refresh=3600))
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        good = app.diagnosis
        assert good is not None and good.top is not None and good.top.cause == "kv_pressure"
        await pilot.press("r")
        await settle(pilot)
        assert len(feed.loads) == 2
        status = _plain(app, "#status")
        assert "FETCH FAILED: http://prometheus:9090: connection refused" in status
        assert "showing the last good data" in status
        assert app.diagnosis is good
        assert "VERDICT kv_pressure" in _plain(app, "#verdict")


@dataclass
class SlowLiveFeed:
    """A live feed whose load tells how far it has come, then waits to be let go (a large
    fleet's read, as `PrometheusFeed.reading` tells it)."""

    inner: FixtureFeed
    release: threading.Event = field(default_factory=threading.Event)
    live: bool = True
    label: str = "live slow"
    told: list[Callable[[ReadProgress], None]] = field(default_factory=list)

    @contextmanager
    def reading(self, progress: Callable[[ReadProgress], None]) -> Iterator[None]:
        self.told.append(progress)
        yield

    def load(self, at: float | None = None) -> Snapshot:
        progress = self.told[-1]
        progress(ReadProgress(0, 3))
        progress(ReadProgress(2, 3))
        assert self.release.wait(60)
        return self.inner.load(None)


async def test_a_slow_live_load_shows_how_far_it_has_come_until_it_is_in(graph: TriageGraph) -> None:
    feed = SlowLiveFeed(kv_feed())
    app = create_app(graph, feed, settings=Settings(symptom="tpot_slow", refresh=3600))
    async with app.run_test(size=(120, 40)) as pilot:
        for _ in range(100):
            await pilot.pause(0.05)
            if "2 of 3" in _plain(app, "#verdict"):
                break
        assert _plain(app, "#verdict") == "loading… 2 of 3 requests answered by Prometheus"
        assert _plain(app, "#status").endswith(" · reading 2 of 3")
        feed.release.set()
        await settle(pilot)
        assert app.diagnosis is not None and "VERDICT kv_pressure" in _plain(app, "#verdict")
        assert "reading" not in _plain(app, "#status") and app.reading is None
        feed.told[0](ReadProgress(3, 3))  # a request ending after its load returned: dropped
        await settle(pilot)
        assert "reading" not in _plain(app, "#status") and app.reading is None


def kv_feed() -> FixtureFeed:
    """The KV-pressure incident as a feed, for the live feeds above to wrap."""
    return FixtureFeed(load_fixture(str(FIXTURES / "kv-pressure-long-context.yaml")), kv_catalog())


def kv_catalog():  # type: ignore[no-untyped-def]
    from signals.catalog import load_catalog

    return load_catalog()


async def test_enter_on_an_evidence_line_charts_it_with_its_promql(kv_app: TriageApp) -> None:
    async with kv_app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        tree = kv_app.query_one("#walk", WalkTree)
        tree.focus()
        target = None
        stack = [tree.root]
        while stack:
            node = stack.pop()
            if node.data == "kv_usage_ratio":
                target = node
                break
            stack.extend(node.children)
        assert target is not None
        parent = target.parent
        while parent is not None:
            parent.expand()
            parent = parent.parent
        await pilot.pause()
        tree.move_cursor(target)
        await pilot.press("enter")
        await pilot.pause()
        screen = kv_app.screen
        assert isinstance(screen, SignalScreen)
        assert "vllm:kv_cache_usage_perc" in screen.promql
        data = screen.chart.data
        assert data.signal == "kv_usage_ratio" and data.onset == kv_app.diagnosis.onset  # type: ignore[union-attr]
        assert len(data.replicas) > 1 and data.baseline is not None
        await pilot.press("c")
        assert kv_app.clipboard == screen.promql
        await pilot.press("escape")
        assert not isinstance(kv_app.screen, SignalScreen)


async def test_copy_puts_the_first_actions_confirm_query_on_the_clipboard(kv_app: TriageApp) -> None:
    async with kv_app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        kv_app.query_one("#actions", OptionList).focus()
        await pilot.press("c")
        first = kv_app.diagnosis.first_actions[0]  # type: ignore[union-attr]
        assert kv_app.clipboard == (first.confirm or first.text)


async def test_help_lists_every_key_binding(kv_app: TriageApp) -> None:
    async with kv_app.run_test(size=(100, 40)) as pilot:
        await settle(pilot)
        await pilot.press("question_mark")
        await pilot.pause()
        assert isinstance(kv_app.screen, HelpScreen)
        described = " ".join(k for k, _ in KEYS)
        for binding in TriageApp.BINDINGS:
            key = binding.key.split(",")[0]  # type: ignore[union-attr]
            name = {
                "question_mark": "?",
                "left": "←",
                "right": "→",
                "shift+left": "shift+←",
                "shift+right": "shift+→",
            }.get(key, key)
            assert name in described, f"key {key} is not in the help"
        await pilot.press("escape")
        assert not isinstance(kv_app.screen, HelpScreen)


async def test_overview_flags_vanished_replicas_first(graph: TriageGraph) -> None:
    app = fixture_app(graph, "replica-down-queue-growth")
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        await pilot.press("2")
        await pilot.pause()
        table = app.query_one("#replicas", DataTable)
        first_two = [table.get_row_at(i)[0].plain for i in range(2)]
        assert first_two == ["vllm-2 gone", "vllm-5 gone"]
        kv_tile = app.query_one("#tile-kv_usage_ratio", SignalTile)
        assert kv_tile.tile is not None and kv_tile.tile.level == "bad"
        assert "-bad" in kv_tile.classes


def _seconds(cell: Text) -> float:
    text = cell.plain
    return float(text[:-2]) / 1000 if text.endswith("ms") else float(text[:-1])


async def test_clicking_a_header_sorts_by_value_worst_first_then_reverses(kv_app: TriageApp) -> None:
    async with kv_app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        await pilot.press("2")
        await pilot.pause()
        table = kv_app.query_one("#replicas", DataTable)
        cells = list(table.get_column("ttft_p99_seconds"))
        assert {c.plain[-2:] == "ms" for c in cells} == {True, False}  # 942ms beside 1.11s
        await pilot.click("#replicas", offset=(12, 0))  # the TTFT99 header
        await pilot.pause()
        values = [_seconds(c) for c in table.get_column("ttft_p99_seconds")]
        assert values == sorted(values, reverse=True)
        await pilot.click("#replicas", offset=(12, 0))
        await pilot.pause()
        values = [_seconds(c) for c in table.get_column("ttft_p99_seconds")]
        assert values == sorted(values)


async def test_alerts_tab_without_sources_says_how_to_get_them(kv_app: TriageApp) -> None:
    async with kv_app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        await pilot.press("3")
        await pilot.pause()
        assert "--alertmanager URL" in _plain(kv_app, "#alerts-note")


async def test_gpu_fault_tile_names_the_faulty_replicas(graph: TriageGraph) -> None:
    app = fixture_app(graph, "gpu-throttling-hot-node")
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        await pilot.press("2")
        await pilot.pause()
        tile = app.query_one("#tile-gpu_health", SignalTile).tile
        assert tile is not None and tile.level == "bad" and tile.value == 2
        assert "vllm-4" in tile.note and "vllm-7" in tile.note


async def test_clicking_a_tile_charts_its_signal(graph: TriageGraph) -> None:
    app = fixture_app(graph, "replica-down-queue-growth")
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        await pilot.press("2")
        await pilot.pause()
        await pilot.click("#tile-queue_waiting")
        await pilot.pause()
        assert isinstance(app.screen, SignalScreen)
        assert app.screen.chart.data.signal == "queue_waiting"


async def test_a_diagnosis_that_raises_is_a_line_on_screen_not_a_crash(
    kv_app: TriageApp, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken(*args: object, **kwargs: object) -> None:
        raise RuntimeError("walk exploded")

    monkeypatch.setattr("tui.app.diagnose", broken)
    async with kv_app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        assert kv_app.is_running and kv_app.diagnosis is None
        assert "The diagnosis failed: RuntimeError: walk exploded" in _plain(kv_app, "#verdict")
        await pilot.press("left")  # and the keys still work
        await settle(pilot)
        assert kv_app.is_running


async def test_enter_on_a_replica_charts_its_outlier_or_the_sorted_column(graph: TriageGraph) -> None:
    app = fixture_app(graph, "routing-imbalance-kv-pressure-hot-replica")
    async with app.run_test(size=(130, 40)) as pilot:
        await settle(pilot)
        await pilot.press("2")
        await pilot.pause()
        table = app.query_one("#replicas", DataTable)
        assert table.get_row_at(0)[0].plain == "vllm-11"  # flagged rows first
        table.focus()
        await pilot.press("enter")
        await pilot.pause()
        assert isinstance(app.screen, SignalScreen)
        assert app.screen.chart.data.signal == "ttft_p99_seconds"  # its first outlier column
        await pilot.press("escape")
        kv = [c.key.value for c in table.ordered_columns].index("kv_usage_ratio")
        x = sum(c.get_render_width(table) for c in table.ordered_columns[:kv]) + 1
        await pilot.click("#replicas", offset=(x, 0))  # sort by KV, worst first
        await pilot.pause()
        assert app.sort_by == ("kv_usage_ratio", True)
        table.focus()
        await pilot.press("enter")
        await pilot.pause()
        assert isinstance(app.screen, SignalScreen)
        assert app.screen.chart.data.signal == "kv_usage_ratio"
