"""`triage diagnose`: the diagnosis at one moment, from a recorded fixture or a live Prometheus.

The on-call answer without the TUI, for pipes and tickets (text, Markdown, JSON). It
can start from the alert that paged, taking the alert's symptom and its startsAt.
"""

from __future__ import annotations

import argparse
import time
from dataclasses import replace
from typing import TextIO

from signals.fixture import Fixture, is_offset
from signals.live import fetch_frame
from signals.timeparse import format_instant, parse_duration, parse_instant
from triage.cli.alertfile import read_alert
from triage.cli.common import (
    EXIT_OK,
    UsageError,
    graph_from_args,
    live_moment,
    load_checked_fixture,
    symptom_arg,
    use_color,
)
from triage.cli.sourceargs import catalog, duration_arg, prometheus_source, query_options
from triage.core.model import AUTO, Diagnosis
from triage.core.render import to_json, to_markdown, to_text
from triage.core.walk import diagnose, symptom_from_alert
from triage.replay import fixture_symptom


def _at_arg(value: str | None, fixture: Fixture) -> float:
    if value is None:
        return fixture.at
    try:
        at = fixture.start + parse_duration(value) if is_offset(value) else parse_instant(value)
    except ValueError as exc:
        raise UsageError(f"--at: {exc}") from None
    if not fixture.frame.start <= at <= fixture.frame.end:
        raise UsageError(
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
        out.write(to_text(diagnosis, color=use_color(out), verbose=args.verbose))


def cmd_diagnose(args: argparse.Namespace, out: TextIO) -> int:
    if bool(args.fixture) == bool(args.prometheus):
        raise UsageError("give either --fixture PATH or --prometheus URL")
    graph = graph_from_args(args)
    symptom = symptom_arg(args.symptom, graph.knowledge)
    alert = read_alert(args.alert) if args.alert else None
    if alert is not None and symptom is None:
        symptom = symptom_from_alert(alert.labels, graph.knowledge)
        source = "alert" if symptom else "auto"
    else:
        source = "given" if symptom else "auto"
    if args.fixture:
        fixture = load_checked_fixture(args.fixture, graph.knowledge, args.catalog)
        at = _at_arg(args.at, fixture)
        if alert is not None and args.at is None and alert.starts_at is not None:
            at = _at_arg(format_instant(alert.starts_at), fixture)
        if symptom is None:
            chosen, source = fixture_symptom(fixture, None, graph.knowledge)
        else:
            chosen = symptom
        _render(diagnose(graph, fixture.frame, chosen, at, source=source), args, out)
        return EXIT_OK
    now = time.time()
    at = live_moment(args.at, now, "--at")
    if args.at is None and alert is not None and alert.starts_at is not None:
        at = alert.starts_at
    lookback = duration_arg(args.lookback, "--lookback")
    step = duration_arg(args.step, "--step")
    prometheus = prometheus_source(args)
    frame, report = fetch_frame(prometheus, catalog(args), query_options(args), at, lookback, step)
    diagnosis = diagnose(graph, frame, symptom or AUTO, frame.end, source=source)
    diagnosis = replace(diagnosis, signal_problems=tuple(sorted(report.problems().items())))
    _render(diagnosis, args, out)
    return EXIT_OK
