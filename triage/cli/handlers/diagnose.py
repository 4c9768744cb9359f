"""`triage diagnose`: the diagnosis at one moment, from a recorded fixture or a live Prometheus.

The on-call answer without the TUI, for pipes and tickets (text, Markdown, JSON). It
can start from the alert that paged, taking the alert's symptom and its startsAt. A
fixture is diagnosed here; a live Prometheus in `diagnose_live`.
"""

from __future__ import annotations

import argparse
from typing import TextIO

from signals.fixture import Fixture, is_offset
from signals.timeparse import format_instant, parse_duration, parse_instant
from triage.cli import common
from triage.cli.handlers import inputs
from triage.cli.handlers.alertfile import read_alert
from triage.core.model import Diagnosis
from triage.core.render import to_json, to_text
from triage.core.walk import diagnose, symptom_from_alert
from triage.replay import fixture_symptom


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


def render(diagnosis: Diagnosis, args: argparse.Namespace, out: TextIO) -> None:
    if args.format == "json":
        out.write(to_json(diagnosis) + "\n")
    elif args.format == "markdown":
        from triage.core.markdown import to_markdown  # jinja2, for Markdown alone

        out.write(to_markdown(diagnosis))
    else:
        out.write(to_text(diagnosis, color=common.use_color(out), verbose=args.verbose))


def cmd_diagnose(args: argparse.Namespace, out: TextIO) -> int:
    if bool(args.fixture) == bool(args.prometheus):
        raise common.UsageError("give either --fixture PATH or --prometheus URL")
    graph = inputs.graph_from_args(args)
    symptom = inputs.symptom_arg(args.symptom, graph.knowledge)
    alert = read_alert(args.alert) if args.alert else None
    if alert is not None and symptom is None:
        symptom = symptom_from_alert(alert.labels, graph.knowledge)
        source = "alert" if symptom else "auto"
    else:
        source = "given" if symptom else "auto"
    if args.fixture:
        fixture = inputs.load_checked_fixture(args.fixture, graph.knowledge, args.catalog)
        at = _at_arg(args.at, fixture)
        if alert is not None and args.at is None and alert.starts_at is not None:
            at = _at_arg(format_instant(alert.starts_at), fixture)
        if symptom is None:
            chosen, source = fixture_symptom(fixture, None, graph.knowledge)
        else:
            chosen = symptom
        render(diagnose(graph, fixture.frame, chosen, at, source=source), args, out)
        return common.EXIT_OK
    # The live path's client libraries (HTTP, the catalog, fleet discovery) load only for it.
    from triage.cli.handlers.diagnose_live import diagnose_live

    return diagnose_live(args, graph, symptom, source, alert, out)
