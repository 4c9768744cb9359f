"""`triage report`: a postmortem report of an incident, one self-contained HTML page or Markdown.

Its arguments and help; what it runs is `triage.cli.handlers.report`.
"""

from __future__ import annotations

import argparse

from triage.cli import common
from triage.inputs import options as sourceoptions


def add_parser(sub: common.Subparsers) -> None:
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
    common.add_playbook_option(rp)
    sourceoptions.add_prometheus_options(rp)


COMMAND = common.Command("report", add_parser, "triage.cli.handlers.report:cmd_report")
