"""`triage diagnose`: the diagnosis at one moment, from a recorded fixture or a live Prometheus.

Its arguments and help; what it runs is `triage.cli.handlers.diagnose`.
"""

from __future__ import annotations

import argparse

from triage.cli import common
from triage.inputs import options as sourceoptions


def add_parser(sub: common.Subparsers) -> None:
    d = sub.add_parser(
        "diagnose",
        help="diagnose an incident at one moment, from a fixture or a live Prometheus",
        description="Diagnose an incident at one moment, from a recorded fixture or a live Prometheus.",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="--at takes an offset from the fixture's start (40m, 1h30m) or an RFC 3339 time; live, a\n"
        "duration means that long ago (--at 20m) and the default is now, or the alert's startsAt.\n"
        "--symptom auto detects the symptom from the signals (the worst breach wins).\n"
        "live, on a terminal, stderr shows how many requests Prometheus has answered while a read\n"
        "takes over a second; a fleet of 100 replicas or more read from raw series gets a hint:\n"
        "the series `triage rules` records make that read about ten times cheaper.\n"
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
    d.add_argument(
        "-v",
        "--verbose",
        action="store_true",
        help="show everything, unshortened: every check and reason, the ruled-out causes (default: a screen)",
    )
    common.add_playbook_option(d)
    sourceoptions.add_prometheus_options(d)


COMMAND = common.Command("diagnose", add_parser, "triage.cli.handlers.diagnose:cmd_diagnose")
