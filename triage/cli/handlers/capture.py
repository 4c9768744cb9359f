"""`triage capture`: record a live incident as a signal-level fixture.

An incident seen once becomes a regression test: add an expect block to the written
file and `triage test` replays it from then on. With `--fleet` the file records which
fleet it is, since its series name replicas and not the fleet they serve.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import TextIO

from signals.capture import dump_fixture, frame_to_fixture
from signals.fixturefleet import FixtureFleet
from signals.live import fetch_frame
from signals.timeparse import format_duration, format_instant
from triage.cli import common
from triage.cli.progress import TerminalProgress
from triage.core.model import AUTO
from triage.inputs import arguments as inputs
from triage.inputs import sources as sourceargs
from triage.sources import load_playbooks


def cmd_capture(args: argparse.Namespace, out: TextIO) -> int:
    now = time.time()
    start, end = inputs.live_range(args, now)
    step = inputs.duration_arg(args.step, "--step")
    if (end - start) / step > 11_000:
        raise common.UsageError(
            "--step: Prometheus answers at most 11,000 points per series; use a larger step"
        )
    kb = load_playbooks(args.playbooks)
    symptom = inputs.symptom_arg(args.symptom, kb)
    with TerminalProgress(sys.stderr, "prometheus") as progress:
        prometheus, cat, options, fleet = sourceargs.live_fleet_source(
            args, end, end - start, progress=progress
        )
        frame, report = fetch_frame(prometheus, cat, options, end, end - start, step)
    name = Path(args.output).stem
    record = FixtureFleet.of(fleet) if fleet is not None else None
    doc = frame_to_fixture(
        frame,
        name,
        f"captured from {prometheus.url} at {format_instant(now)}",
        symptom=symptom if symptom != AUTO else None,
        fleet=record,
    )
    try:
        Path(args.output).write_text(dump_fixture(doc), encoding="utf-8")
    except OSError as exc:
        raise common.UsageError(f"--output: cannot write {args.output}: {exc.strerror}") from None
    blind = sorted(s for s, st in report.statuses.items() if st.blind)
    of_fleet = f", fleet {record.name}" if record is not None else ""
    out.write(
        f"wrote {args.output}: {len(frame.series)} series of {len(frame.signals())} signals, "
        f"{len(frame.times)} steps of {format_duration(step)}{of_fleet}\n"
    )
    for signal, reason in sorted(report.problems().items()):
        out.write(f"  unreadable: {signal}: {reason}\n")
    if blind:
        out.write(f"  blind: {', '.join(blind)}\n")
    out.write("add an expect block to make it a regression test\n")
    return common.EXIT_OK
