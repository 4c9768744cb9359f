"""`triage capture`: record a live incident as a signal-level fixture.

Its arguments and help; what it runs is `triage.cli.handlers.capture`.
"""

from __future__ import annotations

from triage.cli import common
from triage.inputs import options as sourceoptions


def add_parser(sub: common.Subparsers) -> None:
    cp = sub.add_parser(
        "capture",
        help="record a live incident as a fixture",
        description="Fetch every signal over [start, end] and write a signal-level fixture (promtool "
        "notation, runs compressed). Add an expect block and it is a regression test.",
    )
    cp.add_argument("--start", required=True, metavar="T", help="RFC 3339 time, or a duration ago (2h)")
    cp.add_argument("--end", metavar="T", help="RFC 3339 time, or a duration ago (default now)")
    cp.add_argument("--step", metavar="DURATION", default="15s", help="resolution (default 15s)")
    cp.add_argument("--symptom", metavar="ID", help="symptom to record in the fixture")
    cp.add_argument("-o", "--output", required=True, metavar="FILE", help="fixture file to write")
    common.add_playbook_option(cp)
    sourceoptions.add_prometheus_options(cp, required=True)


COMMAND = common.Command("capture", add_parser, "triage.cli.handlers.capture:cmd_capture")
