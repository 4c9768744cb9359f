"""The Alerts tab end to end: a real Alertmanager, `triage serve` and a real Prometheus.

Alertmanager sends the alert to the service, which annotates it from Prometheus; the
TUI lists Alertmanager's firing alert with the service's cause and opens it at its start.
"""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

from promserver import require_prometheus_binaries
from rich.text import Text
from service.harness.alertmanager import TemporaryAlertmanager, make_alert, require_alertmanager_binary
from service.servicekit import ServeProcess, count, wait_until
from test_live import AT, STEP, raw_kv_incident
from textual.widgets import DataTable, Static, TabbedContent
from tuiapp import fixture_app, live_feed

from signals.tempprom import TemporaryPrometheus
from triage.core.graph import TriageGraph
from tui.app import Settings, TriageApp
from tui.launch import create_app
from tui.pilot import settle


async def _alerts_loaded(app: TriageApp, pilot: object) -> None:
    for _ in range(200):
        await app.workers.wait_for_complete()
        await pilot.pause()  # type: ignore[attr-defined]
        if app.alerts:
            return
    raise AssertionError("the alerts never loaded")


async def test_alerts_tab_shows_the_services_cause_and_opens_the_alert_at_its_start(
    graph: TriageGraph, tmp_path: Path
) -> None:
    require_prometheus_binaries()
    binary = require_alertmanager_binary()
    starts = AT - 40 * STEP  # ten minutes before the end of the recorded incident
    db = tmp_path / "triage.db"
    with TemporaryPrometheus(raw_kv_incident()) as prom:
        serve_args = ["--store", str(db), "--prometheus", prom.url, "--workers", "1"]
        with (
            ServeProcess(serve_args, tmp_path / "serve.log") as serve,
            TemporaryAlertmanager(f"{serve.url}/api/alertmanager", binary=binary) as am,
        ):
            am.push(
                [
                    make_alert(
                        "LLMTPOTP99High", starts_at=datetime.fromtimestamp(starts, UTC), symptom="tpot_slow"
                    )
                ]
            )
            wait_until(lambda: count(db, "annotations", "state = 'annotated'") == 1, timeout=60)
            settings = Settings(symptom="ttft_slow", refresh=3600, alertmanager=am.url, service=serve.url)
            app = create_app(graph, live_feed(prom.url), settings=settings)
            async with app.run_test(size=(130, 40)) as pilot:
                await settle(pilot)
                await _alerts_loaded(app, pilot)
                await pilot.press("3")
                await pilot.pause()
                table = app.query_one("#alert-table", DataTable)
                row = [c if isinstance(c, str) else c.plain for c in table.get_row_at(0)]
                assert row[0] == "LLMTPOTP99High" and row[1] == "tpot_slow" and row[4] == "kv_pressure"
                note = app.query_one("#alerts-note", Static).content
                assert "1 firing" in (note.plain if isinstance(note, Text) else str(note))
                table.focus()
                await pilot.press("enter")
                await settle(pilot)
                assert app.query_one(TabbedContent).active == "diagnosis"
                d = app.diagnosis
                assert d is not None and d.symptom == "tpot_slow" and d.symptom_source == "alert"
                assert abs(d.at - starts) <= 30  # the fetch's grid ends at the alert's start
                assert d.top is not None and d.top.cause == "kv_pressure"
                assert app.pinned  # the periodic refresh does not pull it back to now


HOSTILE = "{{ 7*7 }} {% raw %} <!channel> \x1b[2J\u202eevil"


async def test_hostile_alert_labels_are_shown_as_data_with_controls_escaped(graph: TriageGraph) -> None:
    binary = require_alertmanager_binary()
    with TemporaryAlertmanager("http://127.0.0.1:9/unused", binary=binary) as am:
        am.push([make_alert(HOSTILE, symptom="ttft_slow", team=HOSTILE)])
        app = fixture_app(graph, "kv-pressure-long-context", alertmanager=am.url, refresh=3600)
        async with app.run_test(size=(130, 40)) as pilot:
            await settle(pilot)
            await _alerts_loaded(app, pilot)
            await pilot.press("3")
            await pilot.pause()
            shown = app.query_one("#alert-table", DataTable).get_row_at(0)[0]
            assert shown == "{{ 7*7 }} {% raw %} <!channel> \\x1b[2J\\u202eevil"
            assert "\x1b" not in shown and "\u202e" not in shown
            assert app.is_running
