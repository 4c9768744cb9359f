"""`triage capture`: record a live incident as a signal-level fixture.

An incident seen once becomes a regression test: add an expect block to the written
file and `triage test` replays it from then on. With `--fleet` the file records which
fleet it is, since its series name replicas and not the fleet they serve.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path
from typing import TextIO

from signals.capture import dump_fixture, frame_to_fixture
from signals.fixturefleet import FixtureFleet
from signals.live import fetch_frame
from signals.timeparse import format_duration, format_instant
from triage.cli import common, sourceargs
from triage.core.model import AUTO
from triage.sources import load_playbooks


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
    sourceargs.add_prometheus_options(cp, required=True)


def cmd_capture(args: argparse.Namespace, out: TextIO) -> int:
    now = time.time()
    start, end = common.live_range(args, now)
    step = sourceargs.duration_arg(args.step, "--step")
    if (end - start) / step > 11_000:
        raise common.UsageError(
            "--step: Prometheus answers at most 11,000 points per series; use a larger step"
        )
    kb = load_playbooks(args.playbooks)
    symptom = common.symptom_arg(args.symptom, kb)
    prometheus, cat, options, fleet = sourceargs.live_fleet_source(args, end, end - start)
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


COMMAND = common.Command("capture", add_parser, cmd_capture)
