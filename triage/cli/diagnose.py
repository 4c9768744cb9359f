"""`triage diagnose`: the diagnosis at one moment, from a recorded fixture or a live Prometheus.

The on-call answer without the TUI, for pipes and tickets (text, Markdown, JSON). It
can start from the alert that paged, taking the alert's symptom and its startsAt.
"""

from __future__ import annotations

import argparse
import json
import time
from dataclasses import replace
from typing import TextIO

from signals.fixture import Fixture, is_offset
from signals.fleets import Fleet
from signals.fleets.scope import scoped_options
from signals.live import fetch_frame
from signals.timeparse import format_instant, parse_duration, parse_instant
from triage.cli import common, sourceargs
from triage.cli.alertfile import read_alert
from triage.core.escape import printable
from triage.core.model import AUTO, Diagnosis
from triage.core.reads import replica_reads
from triage.core.render import to_json, to_markdown, to_text
from triage.core.walk import diagnose, symptom_from_alert
from triage.replay import fixture_symptom


def add_parser(sub: common.Subparsers) -> None:
    d = sub.add_parser(
        "diagnose",
        help="diagnose an incident at one moment, from a fixture or a live Prometheus",
        description="Diagnose an incident at one moment, from a recorded fixture or a live Prometheus.",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="--at takes an offset from the fixture's start (40m, 1h30m) or an RFC 3339 time; live, a\n"
        "duration means that long ago (--at 20m) and the default is now, or the alert's startsAt.\n"
        "--symptom auto detects the symptom from the signals (the worst breach wins).\n"
        "exit codes: 0 diagnosis made, 2 bad usage or input, 3 Prometheus could not be read at all.",
    )
    d.add_argument(
        "--fixture", metavar="PATH", help="incident fixture (YAML; raw ones replay through Prometheus)"
    )
    d.add_argument(
        "--symptom",
        metavar="ID",
        help="where to start: ttft_slow, tpot_slow, errors, rejected, "
        "cost_up, quality_down or auto (default: the fixture's or the alert's, else auto)",
    )
    d.add_argument(
        "--at", metavar="T", help="moment to diagnose (default: the fixture's at, else the last sample)"
    )
    d.add_argument(
        "--alert", metavar="FILE", help="an Alertmanager alert or webhook payload (JSON) to start from"
    )
    d.add_argument("--lookback", metavar="DURATION", default="2h", help="live: history to fetch (default 2h)")
    d.add_argument("--step", metavar="DURATION", default="30s", help="live: resolution (default 30s)")
    d.add_argument("--format", choices=("text", "markdown", "json"), default="text")
    d.add_argument("-v", "--verbose", action="store_true", help="show every check, also the ruled-out causes")
    common.add_playbook_option(d)
    sourceargs.add_prometheus_options(d)


def _at_arg(value: str | None, fixture: Fixture) -> float:
    if value is None:
        return fixture.at
    try:
        at = fixture.start + parse_duration(value) if is_offset(value) else parse_instant(value)
    except ValueError as exc:
        raise common.UsageError(f"--at: {exc}") from None
    if not fixture.frame.start <= at <= fixture.frame.end:
        raise common.UsageError(
            f"--at: {format_instant(at)} is outside the data "
            f"({format_instant(fixture.frame.start)} to {format_instant(fixture.frame.end)})"
        )
    return at


def _render(diagnosis: Diagnosis, args: argparse.Namespace, out: TextIO) -> None:
    if args.format == "json":
        out.write(to_json(diagnosis) + "\n")
    elif args.format == "markdown":
        out.write(to_markdown(diagnosis))
    else:
        out.write(to_text(diagnosis, color=common.use_color(out), verbose=args.verbose))


def cmd_diagnose(args: argparse.Namespace, out: TextIO) -> int:
    if bool(args.fixture) == bool(args.prometheus):
        raise common.UsageError("give either --fixture PATH or --prometheus URL")
    graph = common.graph_from_args(args)
    symptom = common.symptom_arg(args.symptom, graph.knowledge)
    alert = read_alert(args.alert) if args.alert else None
    if alert is not None and symptom is None:
        symptom = symptom_from_alert(alert.labels, graph.knowledge)
        source = "alert" if symptom else "auto"
    else:
        source = "given" if symptom else "auto"
    if args.fixture:
        fixture = common.load_checked_fixture(args.fixture, graph.knowledge, args.catalog)
        at = _at_arg(args.at, fixture)
        if alert is not None and args.at is None and alert.starts_at is not None:
            at = _at_arg(format_instant(alert.starts_at), fixture)
        if symptom is None:
            chosen, source = fixture_symptom(fixture, None, graph.knowledge)
        else:
            chosen = symptom
        _render(diagnose(graph, fixture.frame, chosen, at, source=source), args, out)
        return common.EXIT_OK
    now = time.time()
    at = common.live_moment(args.at, now, "--at")
    if args.at is None and alert is not None and alert.starts_at is not None:
        at = alert.starts_at
    lookback = sourceargs.duration_arg(args.lookback, "--lookback")
    step = sourceargs.duration_arg(args.step, "--step")
    prometheus, cat, options = sourceargs.live_source(args, at, lookback, scope=False)
    fleets = sourceargs.fleets_to_diagnose(prometheus, args, at, lookback, alert.labels if alert else None)
    if len(fleets) > 1 and symptom is not None:
        listing = "\n".join(f"  {f.name}" for f in fleets)
        raise common.UsageError(
            f"{prometheus.url} holds {len(fleets)} fleets; name one with --fleet (or use --symptom auto "
            f"to diagnose each one in breach):\n{listing}"
        )

    def one(fleet: Fleet | None) -> Diagnosis:
        scoped = scoped_options(fleet, options) if fleet is not None else options
        frame, report = fetch_frame(
            prometheus, cat, scoped, at, lookback, step, replica_reads(graph.knowledge)
        )
        found = diagnose(graph, frame, symptom or AUTO, frame.end, source=source)
        return replace(
            found,
            signal_problems=tuple(sorted(report.problems().items())),
            fleet=fleet.identity if fleet is not None else (),
        )

    if len(fleets) <= 1:
        _render(one(fleets[0] if fleets else None), args, out)
        return common.EXIT_OK
    _render_each(prometheus.url, [(f, one(f)) for f in fleets], args, out)
    return common.EXIT_OK


def _render_each(
    server: str, results: list[tuple[Fleet, Diagnosis]], args: argparse.Namespace, out: TextIO
) -> None:
    """Every fleet in breach with its own answer; the quiet ones named in one line."""
    breached = [(f, d) for f, d in results if d.symptom_visible]
    quiet = [f.name for f, d in results if not d.symptom_visible]
    if args.format == "json":
        payload = {
            "server": server,
            "fleets": [d.to_json() for _, d in breached],
            "quiet": quiet,
        }
        out.write(json.dumps(payload, indent=2, ensure_ascii=False) + "\n")
        return
    out.write(f"{len(results)} fleets in {server}: {len(breached)} in breach\n")
    for fleet, diagnosis in breached:
        out.write(f"\n== FLEET {printable(fleet.name)}\n")
        _render(diagnosis, args, out)
    if quiet:
        out.write(f"\nno breach: {printable(', '.join(quiet))}\n")


COMMAND = common.Command("diagnose", add_parser, cmd_diagnose)
