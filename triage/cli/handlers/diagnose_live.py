"""`triage diagnose --prometheus`: the diagnosis at one moment from a live Prometheus, per fleet.

With several fleets on the server and no `--fleet`, each one in breach gets its own
answer and the quiet ones are named in one line. While the server answers, a terminal
shows how far the read has come (`triage.cli.progress`); a large fleet read from raw
series gets a one-line hint on stderr that `triage rules` would make it cheaper.
"""

from __future__ import annotations

import argparse
import sys
import time
from dataclasses import replace

from signals.fleets import Fleet
from signals.fleets.scope import scoped_options
from signals.live import FetchReport, fetch_frame
from triage.cli import common
from triage.cli.handlers.alertfile import AlertStart
from triage.cli.handlers.diagnose import FleetDiagnoses
from triage.cli.progress import TerminalProgress
from triage.core.graph import TriageGraph
from triage.core.model import AUTO, Diagnosis
from triage.core.reads import replica_reads
from triage.core.walk import diagnose
from triage.inputs import arguments as inputs
from triage.inputs import sources as sourceargs


def diagnose_live(
    args: argparse.Namespace,
    graph: TriageGraph,
    symptom: str | None,
    source: str,
    alert: AlertStart | None,
) -> Diagnosis | FleetDiagnoses:
    """The moment (now, `--at`, or the alert's startsAt) read from the server, for each fleet
    the arguments or the alert name; `symptom` None means auto."""
    now = time.time()
    at = inputs.live_moment(args.at, now, "--at")
    if args.at is None and alert is not None and alert.starts_at is not None:
        at = alert.starts_at
    lookback = inputs.duration_arg(args.lookback, "--lookback")
    step = inputs.duration_arg(args.step, "--step")
    with TerminalProgress(sys.stderr, "prometheus") as progress:
        found, hints = _read_and_diagnose(args, graph, symptom, source, alert, at, lookback, step, progress)
    for hint in hints:
        sys.stderr.write(f"{hint}\n")
    return found


def rules_hint(report: FetchReport, seconds: float) -> str | None:
    """The line that tells a large fleet's on-call that `triage rules` would make this read cheaper."""
    if not report.recording_would_pay():
        return None
    return (
        f"hint: {report.replicas:,} replicas read from raw series in {seconds:.1f} s; the series "
        "`triage rules` records make this read about ten times cheaper for Prometheus "
        "(see `triage rules --help`)"
    )


def _read_and_diagnose(
    args: argparse.Namespace,
    graph: TriageGraph,
    symptom: str | None,
    source: str,
    alert: AlertStart | None,
    at: float,
    lookback: float,
    step: float,
    progress: TerminalProgress,
) -> tuple[Diagnosis | FleetDiagnoses, list[str]]:
    prometheus, cat, options = sourceargs.live_source(args, at, lookback, scope=False, progress=progress)
    fleets = sourceargs.fleets_to_diagnose(prometheus, args, at, lookback, alert.labels if alert else None)
    if len(fleets) > 1 and symptom is not None:
        listing = "\n".join(f"  {f.name}" for f in fleets)
        raise common.UsageError(
            f"{prometheus.url} holds {len(fleets)} fleets; name one with --fleet (or use --symptom auto "
            f"to diagnose each one in breach):\n{listing}"
        )

    hints: list[str] = []

    def one(fleet: Fleet | None) -> Diagnosis:
        scoped = scoped_options(fleet, options) if fleet is not None else options
        began = time.monotonic()
        frame, report = fetch_frame(
            prometheus, cat, scoped, at, lookback, step, replica_reads(graph.knowledge)
        )
        hint = rules_hint(report, time.monotonic() - began)
        if hint and not hints:
            hints.append(hint)
        found = diagnose(graph, frame, symptom or AUTO, frame.end, source=source)
        return replace(
            found,
            signal_problems=tuple(sorted(report.problems().items())),
            fleet=fleet.identity if fleet is not None else (),
        )

    if len(fleets) <= 1:
        return one(fleets[0] if fleets else None), hints
    return FleetDiagnoses(prometheus.url, tuple((f, one(f)) for f in fleets)), hints
