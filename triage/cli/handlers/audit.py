"""`triage audit`: a live fleet checked against the deployment checklist.

Finds before an incident what the checklist would have caught; exit 1 when an item
fails, so it can gate a rollout.
"""

from __future__ import annotations

import argparse
import time
from typing import TextIO

from signals.errors import SignalError
from triage.audit import AuditReport, AuditSettings, render_audit, run_audit
from triage.cli import common
from triage.inputs import arguments as inputs
from triage.inputs import sources as sourceargs
from triage.rules import load_slo


def audit_report(args: argparse.Namespace) -> AuditReport:
    """The live fleet checked against the checklist; SignalError when nothing at all could be read."""
    at = inputs.live_moment(args.at, time.time(), "--at")
    settings = AuditSettings.from_slo(
        load_slo(args.slo),
        lookback=inputs.duration_arg(args.lookback, "--lookback"),
        step=inputs.duration_arg(args.step, "--step"),
    )
    report = run_audit(*sourceargs.live_source(args, at, settings.lookback), at, settings)
    if report.nothing_readable:
        reasons = "; ".join(f"{k}: {v}" for k, v in sorted(report.problems.items())[:3])
        raise SignalError(f"{args.prometheus}: nothing could be read ({reasons})")
    return report


def cmd_audit(args: argparse.Namespace, out: TextIO) -> int:
    report = audit_report(args)
    out.write(render_audit(report, args.format))
    return common.EXIT_FAILED if report.counts().get("fail", 0) else common.EXIT_OK
