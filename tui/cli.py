"""`triage tui`, and the console script that adds it to the core's commands.

The core's CLI may not import the TUI, so the `triage` console script starts here: it
runs `triage.cli.main` with the `tui` subcommand handed in. Textual is imported only
when `triage tui` runs, so every other command starts as fast as before.

`create_app` is the one factory: the CLI and the tests build the app the same way,
with the knowledge, the SLO red lines and the feed injected.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING, TextIO

from signals.catalog import Catalog, load_catalog
from signals.fixture import Fixture
from signals.fleets import FleetMap
from signals.timeparse import format_duration
from triage.cli import main as core
from triage.cli.sourceargs import (
    SourceArgError,
    add_prometheus_options,
    catalog,
    duration_arg,
    fleet_labels,
    prometheus_source,
    query_options,
    read_secret,
)
from triage.core.graph import TriageGraph
from triage.core.model import AUTO
from triage.replay import fixture_symptom
from triage.rules import Slo, load_slo

if TYPE_CHECKING:
    from tui.app import TriageApp
    from tui.feeds import Feed
    from tui.settings import Settings

EPILOG = """\
examples:
  triage tui --fixture fixtures/kv-pressure-long-context.yaml      # replay: ←/→ move the cursor
  triage tui --prometheus http://prometheus:9090 --fleet llm/meta-llama/Llama-3.1-8B-Instruct
  triage tui --prometheus http://prometheus:9090 --selector '{namespace="llm"}'   # f picks a fleet
  triage tui --prometheus URL --alertmanager http://alertmanager:9093 --service http://triage:8080

keys: ? every key · q quit · 1/2/3 tabs · s symptom · enter chart the selection · c copy
      replay: ←/→ one step · shift+←/→ ten minutes · o onset · space play/pause
      live: r refresh · f fleet (the picker opens by itself when the server holds several)
NO_COLOR=1 turns colour off.
"""


THEMES = {"dark": "textual-dark", "light": "textual-light"}


def create_app(
    graph: TriageGraph,
    feed: Feed,
    slo: Slo | None = None,
    settings: Settings | None = None,
) -> TriageApp:
    """The app with everything injected; the SLO red lines default to the bundled ones."""
    from tui.app import TriageApp

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
    from tui.feeds import FixtureFeed
    from tui.settings import Settings

    settings = settings or Settings()
    settings.symptom, settings.symptom_source = fixture_symptom(fixture, symptom, graph.knowledge)
    return create_app(graph, FixtureFeed(fixture, catalog or load_catalog()), slo, settings)


def add_tui_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "tui",
        help="the on-call terminal UI: the picture, the walk, the evidence and the actions",
        description="The on-call terminal UI. Replay a recorded incident with a time cursor "
        "(--fixture), or watch a live Prometheus refresh every 15 s (--prometheus).",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--fixture", metavar="PATH", help="replay a recorded incident (YAML)")
    p.add_argument(
        "--symptom",
        metavar="ID",
        help="where to start: ttft_slow, tpot_slow, errors, rejected, cost_up, quality_down or auto "
        "(default: the fixture's, else auto); switch on screen with s",
    )
    p.add_argument("--refresh", metavar="DURATION", default="15s", help="live refresh period (default 15s)")
    p.add_argument("--lookback", metavar="DURATION", default="2h", help="live: history to fetch (default 2h)")
    p.add_argument("--step", metavar="DURATION", default="30s", help="live: resolution (default 30s)")
    p.add_argument("--alertmanager", metavar="URL", help="list firing alerts from this Alertmanager (v2 API)")
    p.add_argument("--service", metavar="URL", help="attach annotations from a `triage serve` service")
    p.add_argument("--service-token-file", metavar="FILE", help="bearer token file for --service")
    p.add_argument("--slo", metavar="FILE", help="SLO file for the red lines (default: the bundled one)")
    p.add_argument(
        "--theme",
        choices=sorted(THEMES),
        default="dark",
        help="colours for a dark or a light terminal (default dark; ctrl+p switches on screen)",
    )
    add_prometheus_options(p)
    core.add_playbook_option(p)


def _url(value: str | None, flag: str) -> str | None:
    if value is not None and not value.startswith(("http://", "https://")):
        raise SourceArgError(f"{flag}: '{value}' is not an http:// or https:// URL")
    return value.rstrip("/") if value else None


def _fleet_arg(value: str | None) -> str | None:
    """`--fleet` as written: each load finds the fleet it names again (its pods change with
    rollouts), so only its syntax can be checked before the screen takes over."""
    if not value:
        return None
    try:
        FleetMap(()).find(value)
    except ValueError as exc:
        raise SourceArgError(f"--fleet: {exc}") from None
    return value.strip()


def build_from_args(args: argparse.Namespace) -> TriageApp:
    """Validate every option before the screen takes over, so errors print as plain lines."""
    from tui.feeds import PrometheusFeed
    from tui.settings import Settings

    if bool(args.fixture) == bool(args.prometheus):
        raise core.UsageError("give either --fixture PATH (replay) or --prometheus URL (live)")
    graph = core.graph_from_args(args)
    symptom = core.symptom_arg(args.symptom, graph.knowledge)
    refresh = duration_arg(args.refresh, "--refresh")
    settings = Settings(
        refresh=refresh,
        alertmanager=_url(args.alertmanager, "--alertmanager"),
        service=_url(args.service, "--service"),
        service_token=read_secret(args.service_token_file, "service-token-file")
        if args.service_token_file
        else None,
        theme=THEMES[args.theme],
    )
    slo = load_slo(args.slo)
    if args.fixture:
        if args.fleet:
            raise core.UsageError("--fleet: only with --prometheus; a fixture names its own fleet")
        fixture = core.load_checked_fixture(args.fixture, graph.knowledge, args.catalog)
        return replay_app(graph, fixture, symptom, load_catalog(args.catalog), slo, settings)
    settings.symptom = symptom or AUTO
    settings.symptom_source = "given" if symptom else "auto"
    feed = PrometheusFeed(
        prometheus_source(args),
        catalog(args),
        query_options(args),
        lookback=duration_arg(args.lookback, "--lookback"),
        step=duration_arg(args.step, "--step"),
        fleet=_fleet_arg(args.fleet),
        fleet_labels=fleet_labels(args),
    )
    return create_app(graph, feed, slo, settings)


def run_tui(args: argparse.Namespace, out: TextIO) -> int:
    app = build_from_args(args)
    if not (sys.stdin.isatty() and out.isatty()):
        raise core.UsageError("triage tui needs a terminal; for pipes use triage diagnose --format json")
    app.run()
    if app.fetch_error and app.snapshot is None:
        sys.stderr.write(
            f"triage: no signals could be read ({app.fetch_error}); "
            f"retried every {format_duration(app.settings.refresh)}\n"
        )
        return core.EXIT_UNAVAILABLE
    return core.EXIT_OK


TUI = core.Extension("tui", add_tui_parser, run_tui)


def main(argv: Sequence[str] | None = None) -> int:
    """The `triage` console script: the core's commands plus `tui`."""
    return core.main(argv, extensions=(TUI,))


if __name__ == "__main__":
    sys.exit(main())
