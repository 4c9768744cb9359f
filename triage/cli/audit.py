"""`triage audit`: a live fleet checked against the deployment checklist.

Its arguments and help; what it runs is `triage.cli.handlers.audit`.
"""

from __future__ import annotations

import argparse

from triage.cli import common
from triage.inputs import options as sourceoptions


def add_parser(sub: common.Subparsers) -> None:
    au = sub.add_parser(
        "audit",
        help="check a live fleet against the deployment checklist",
        description="Every item of the deployment checklist, in its own sections, with a status: pass, "
        "fail, unknown (cannot be seen from metrics: the evidence that would settle it is named) or "
        "not_applicable. Read from the metrics and from Prometheus's rules and targets APIs.",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="exit codes: 0 no item fails, 1 some item fails, 2 bad usage, 3 Prometheus could not be read.",
    )
    au.add_argument("--format", choices=("text", "markdown", "json"), default="text")
    au.add_argument("--at", metavar="T", help="moment to audit: RFC 3339, or a duration ago (default now)")
    au.add_argument("--lookback", metavar="DURATION", default="6h", help="history to judge by (default 6h)")
    au.add_argument("--step", metavar="DURATION", default="1m", help="resolution (default 1m)")
    au.add_argument("--slo", metavar="FILE", help="SLO thresholds (as for triage rules)")
    sourceoptions.add_prometheus_options(au, required=True)


COMMAND = common.Command("audit", add_parser, "triage.cli.handlers.audit:cmd_audit")
