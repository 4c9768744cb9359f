"""`triage audit`: a live fleet checked against the deployment checklist.

Finds before an incident what the checklist would have caught; exit 1 when an item
fails, so it can gate a rollout.
"""

from __future__ import annotations

import argparse
import time
from typing import TextIO

from signals.errors import SignalError
from triage.audit import AuditSettings, render_audit, run_audit
from triage.cli import common, sourceargs
from triage.rules import load_slo


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
    sourceargs.add_prometheus_options(au, required=True)


def cmd_audit(args: argparse.Namespace, out: TextIO) -> int:
    at = common.live_moment(args.at, time.time(), "--at")
    settings = AuditSettings.from_slo(
        load_slo(args.slo),
        lookback=sourceargs.duration_arg(args.lookback, "--lookback"),
        step=sourceargs.duration_arg(args.step, "--step"),
    )
    report = run_audit(*sourceargs.live_source(args, at, settings.lookback), at, settings)
    if report.nothing_readable:
        reasons = "; ".join(f"{k}: {v}" for k, v in sorted(report.problems.items())[:3])
        raise SignalError(f"{args.prometheus}: nothing could be read ({reasons})")
    out.write(render_audit(report, args.format))
    return common.EXIT_FAILED if report.counts().get("fail", 0) else common.EXIT_OK


COMMAND = common.Command("audit", add_parser, cmd_audit)
