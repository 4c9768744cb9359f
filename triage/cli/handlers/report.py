"""`triage report`: a postmortem report of an incident, one self-contained HTML page or Markdown.

The replay, the evidence as charts, the walk and the actions, in a file people read
without the tool: offline, printed, in a wiki or a ticket.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Literal, TextIO

import jinja2

from signals.capture import dump_fixture, frame_to_fixture
from signals.fixture import Fixture, fixture_from_document
from signals.live import fetch_frame
from signals.timeparse import format_duration
from signals.yamldoc import parse_yaml
from triage.cli import common
from triage.cli.progress import TerminalProgress
from triage.core.model import AUTO
from triage.core.playbook import Knowledge
from triage.inputs import arguments as inputs
from triage.inputs import sources as sourceargs
from triage.report.report import build_report, render_report


def _live_fixture(args: argparse.Namespace, kb: Knowledge) -> Fixture:
    """Capture [start, end] from a live Prometheus into an in-memory fixture."""
    if not args.start:
        raise common.UsageError("--start is needed with --prometheus")
    start, end = inputs.live_range(args, time.time())
    step = inputs.duration_arg(args.step, "--step")
    symptom = inputs.symptom_arg(args.symptom, kb)
    with TerminalProgress(sys.stderr, "prometheus") as progress:
        prometheus, cat, options = sourceargs.live_source(args, end, end - start, progress=progress)
        frame, _ = fetch_frame(prometheus, cat, options, end, end - start, step)
    doc = frame_to_fixture(
        frame,
        Path(args.output).stem,
        f"captured from {prometheus.url}",
        symptom=symptom if symptom not in (None, AUTO) else None,
    )
    return fixture_from_document(parse_yaml(dump_fixture(doc), f"{prometheus.url} (capture)"))


def cmd_report(args: argparse.Namespace, out: TextIO) -> int:
    if bool(args.fixture) == bool(args.prometheus):
        raise common.UsageError("give either a FIXTURE or --prometheus URL with --start and --end")
    suffix = Path(args.output).suffix.lower()
    if suffix not in (".html", ".htm", ".md", ".markdown"):
        raise common.UsageError(f"-o {args.output}: the report is .html or .md")
    fmt: Literal["html", "md"] = "html" if suffix in (".html", ".htm") else "md"
    templates = Path(args.templates) if args.templates else None
    if templates is not None and not templates.is_dir():
        raise common.UsageError(f"--templates: {templates} is not a folder")
    graph = inputs.graph_from_args(args)
    if args.fixture:
        fixture = inputs.load_checked_fixture(args.fixture, graph.knowledge, args.catalog)
    else:
        fixture = _live_fixture(args, graph.knowledge)
    every = inputs.duration_arg(args.every, "--every")
    if every < fixture.interval:
        raise common.UsageError(
            f"--every: {args.every} is shorter than the data's step ({format_duration(fixture.interval)})"
        )
    report = build_report(graph, fixture, every, generated_at=time.time())
    try:
        text = render_report(report, fmt, templates)
    except jinja2.TemplateError as exc:
        where = f"{exc.filename}:{exc.lineno}: " if isinstance(exc, jinja2.TemplateSyntaxError) else ""
        raise common.UsageError(f"--templates: {where}{exc}") from None
    common.write_output(args.output, text, "-o")
    out.write(f"wrote {args.output} ({len(text.encode()) / 1e6:.2f} MB)\n")
    return common.EXIT_OK
