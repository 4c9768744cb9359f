"""`triage tui` run: the app built from its arguments, and run in the terminal.

`create_app` is the one factory: the CLI and the tests build the app the same way,
with the knowledge, the SLO red lines and the feed injected. The arguments are declared
in `triage.cli.tui`, and the command line imports this module only when `triage tui` runs; a live screen's
feed is built by `tui.livefeed`, imported only for one.
"""

from __future__ import annotations

import argparse
import sys
from typing import TextIO

from signals.catalog import Catalog, load_catalog
from signals.fixture import Fixture
from signals.timeparse import format_duration
from triage.core.graph import TriageGraph
from triage.core.model import AUTO
from triage.inputs.arguments import (
    duration_arg,
    graph_from_args,
    load_checked_fixture,
    read_secret,
    symptom_arg,
)
from triage.inputs.errors import EXIT_OK, EXIT_UNAVAILABLE, SourceArgError, UsageError
from triage.replay import fixture_symptom
from triage.rules import Slo, load_slo
from tui.app import TriageApp
from tui.feeds import Feed, FixtureFeed
from tui.settings import Settings


def create_app(
    graph: TriageGraph,
    feed: Feed,
    slo: Slo | None = None,
    settings: Settings | None = None,
) -> TriageApp:
    """The app with everything injected; the SLO red lines default to the bundled ones."""
    return TriageApp(graph, feed, slo or load_slo(), settings)


def replay_app(
    graph: TriageGraph,
    fixture: Fixture,
    symptom: str | None = None,
    catalog: Catalog | None = None,
    slo: Slo | None = None,
    settings: Settings | None = None,
) -> TriageApp:
    """The app replaying `fixture`, starting from `symptom`, else the fixture's, else auto."""
    settings = settings or Settings()
    settings.symptom, settings.symptom_source = fixture_symptom(fixture, symptom, graph.knowledge)
    return create_app(graph, FixtureFeed(fixture, catalog or load_catalog()), slo, settings)


def _url(value: str | None, flag: str) -> str | None:
    if value is not None and not value.startswith(("http://", "https://")):
        raise SourceArgError(f"{flag}: '{value}' is not an http:// or https:// URL")
    return value.rstrip("/") if value else None


def build_from_args(args: argparse.Namespace) -> TriageApp:
    """Validate every option before the screen takes over, so errors print as plain lines."""
    if bool(args.fixture) == bool(args.prometheus):
        raise UsageError("give either --fixture PATH (replay) or --prometheus URL (live)")
    graph = graph_from_args(args)
    symptom = symptom_arg(args.symptom, graph.knowledge)
    refresh = duration_arg(args.refresh, "--refresh")
    settings = Settings(
        refresh=refresh,
        alertmanager=_url(args.alertmanager, "--alertmanager"),
        service=_url(args.service, "--service"),
        service_token=read_secret(args.service_token_file, "service-token-file")
        if args.service_token_file
        else None,
        theme=f"textual-{args.theme}",
    )
    slo = load_slo(args.slo)
    if args.fixture:
        if args.fleet:
            raise UsageError("--fleet: only with --prometheus; a fixture names its own fleet")
        fixture = load_checked_fixture(args.fixture, graph.knowledge, args.catalog)
        return replay_app(graph, fixture, symptom, load_catalog(args.catalog), slo, settings)
    settings.symptom = symptom or AUTO
    settings.symptom_source = "given" if symptom else "auto"
    # The live feed's HTTP client and fleet discovery load only for a live screen.
    from tui.livefeed import live_feed

    return create_app(graph, live_feed(args), slo, settings)


def run_tui(args: argparse.Namespace, out: TextIO) -> int:
    app = build_from_args(args)
    if not (sys.stdin.isatty() and out.isatty()):
        raise UsageError("triage tui needs a terminal; for pipes use triage diagnose --format json")
    app.run()
    if app.fetch_error and app.snapshot is None:
        sys.stderr.write(
            f"triage: no signals could be read ({app.fetch_error}); "
            f"retried every {format_duration(app.settings.refresh)}\n"
        )
        return EXIT_UNAVAILABLE
    return EXIT_OK
