"""`triage report`: a postmortem report of an incident, one self-contained HTML page or Markdown.

The replay, the evidence as charts, the walk and the actions, in a file people read
without the tool: offline, printed, in a wiki or a ticket.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path
from typing import Literal, TextIO

import jinja2

from signals.capture import dump_fixture, frame_to_fixture
from signals.fixture import Fixture, fixture_from_document
from signals.live import fetch_frame
from signals.timeparse import format_duration
from signals.yamldoc import parse_yaml
from triage.cli.common import (
    EXIT_OK,
    Command,
    Subparsers,
    UsageError,
    add_playbook_option,
    graph_from_args,
    live_moment,
    load_checked_fixture,
    symptom_arg,
    write_output,
)
from triage.cli.sourceargs import (
    add_prometheus_options,
    catalog,
    duration_arg,
    prometheus_source,
    query_options,
)
from triage.core.model import AUTO
from triage.core.playbook import Knowledge
from triage.report.report import build_report, render_report


def add_parser(sub: Subparsers) -> None:
    rp = sub.add_parser(
        "report",
        help="a postmortem report of an incident: one self-contained HTML page, or Markdown",
        description="Replay an incident and write a postmortem report: summary, charts of the evidence "
        "(SVG, drawn from the data), the walk, first and forbidden actions, blind spots, and the diagnosis "
        "timeline. FILE ending in .html gives one self-contained page (opens offline, prints); .md gives "
        "Markdown for wikis and tickets. SOURCE is a fixture, or --prometheus with --start/--end.",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    rp.add_argument("fixture", nargs="?", metavar="FIXTURE", help="incident fixture (or use --prometheus)")
    rp.add_argument("-o", "--output", required=True, metavar="FILE", help="report file: .html or .md")
    rp.add_argument("--every", default="1m", metavar="DURATION", help="timeline step (default 1m)")
    rp.add_argument("--templates", metavar="DIR", help="your own report templates (searched first)")
    rp.add_argument("--start", metavar="T", help="live: RFC 3339 time, or a duration ago")
    rp.add_argument("--end", metavar="T", help="live: RFC 3339 time, or a duration ago (default now)")
    rp.add_argument("--step", metavar="DURATION", default="30s", help="live: resolution (default 30s)")
    rp.add_argument("--symptom", metavar="ID", help="live: symptom to start from (default auto)")
    add_playbook_option(rp)
    add_prometheus_options(rp)


def _live_fixture(args: argparse.Namespace, kb: Knowledge) -> Fixture:
    """Capture [start, end] from a live Prometheus into an in-memory fixture."""
    if not args.start:
        raise UsageError("--start is needed with --prometheus")
    now = time.time()
    start = live_moment(args.start, now, "--start")
    end = live_moment(args.end, now, "--end")
    if end <= start:
        raise UsageError("--end must be after --start")
    step = duration_arg(args.step, "--step")
    symptom = symptom_arg(args.symptom, kb)
    prometheus = prometheus_source(args)
    frame, _ = fetch_frame(prometheus, catalog(args), query_options(args), end, end - start, step)
    doc = frame_to_fixture(
        frame,
        Path(args.output).stem,
        f"captured from {prometheus.url}",
        symptom=symptom if symptom not in (None, AUTO) else None,
    )
    return fixture_from_document(parse_yaml(dump_fixture(doc), f"{prometheus.url} (capture)"))


def cmd_report(args: argparse.Namespace, out: TextIO) -> int:
    if bool(args.fixture) == bool(args.prometheus):
        raise UsageError("give either a FIXTURE or --prometheus URL with --start and --end")
    suffix = Path(args.output).suffix.lower()
    if suffix not in (".html", ".htm", ".md", ".markdown"):
        raise UsageError(f"-o {args.output}: the report is .html or .md")
    fmt: Literal["html", "md"] = "html" if suffix in (".html", ".htm") else "md"
    templates = Path(args.templates) if args.templates else None
    if templates is not None and not templates.is_dir():
        raise UsageError(f"--templates: {templates} is not a folder")
    graph = graph_from_args(args)
    if args.fixture:
        fixture = load_checked_fixture(args.fixture, graph.knowledge, args.catalog)
    else:
        fixture = _live_fixture(args, graph.knowledge)
    every = duration_arg(args.every, "--every")
    if every < fixture.interval:
        raise UsageError(
            f"--every: {args.every} is shorter than the data's step ({format_duration(fixture.interval)})"
        )
    report = build_report(graph, fixture, every, generated_at=time.time())
    try:
        text = render_report(report, fmt, templates)
    except jinja2.TemplateError as exc:
        where = f"{exc.filename}:{exc.lineno}: " if isinstance(exc, jinja2.TemplateSyntaxError) else ""
        raise UsageError(f"--templates: {where}{exc}") from None
    write_output(args.output, text, "-o")
    out.write(f"wrote {args.output} ({len(text.encode()) / 1e6:.2f} MB)\n")
    return EXIT_OK


COMMAND = Command("report", add_parser, cmd_report)
