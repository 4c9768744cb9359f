"""`triage replay`: the diagnosis as it would have read at each step through a recorded incident.

For postmortems and for tuning the playbooks: it shows when the top cause first came
out on top and when it settled, so a change to the knowledge is judged by how much
sooner after the onset the right answer appears.
"""

from __future__ import annotations

import argparse
import json
from dataclasses import dataclass
from typing import Any, TextIO

from signals.fixture import Fixture
from signals.timeparse import format_duration, format_instant, parse_duration
from triage.cli import common
from triage.inputs import arguments as inputs
from triage.replay import Step, TimelineSummary, fixture_symptom, summarise, timeline


@dataclass(frozen=True)
class Replayed:
    """A fixture diagnosed at every step, and what the steps add up to."""

    fixture: Fixture
    symptom: str
    every: float
    steps: list[Step]
    summary: TimelineSummary

    def to_json(self) -> dict[str, Any]:
        """The JSON contract of `triage replay --format json`."""
        summary = self.summary
        return {
            "fixture": self.fixture.name,
            "symptom": self.symptom,
            "summary": {
                "top_cause": summary.final_top,
                "onset": format_instant(summary.onset) if summary.onset is not None else None,
                "first_seen": format_instant(summary.first_seen) if summary.first_seen is not None else None,
                "settled": format_instant(summary.settled) if summary.settled is not None else None,
                "onset_to_settled_seconds": summary.onset_to_settled,
            },
            "steps": [
                {
                    "at": format_instant(s.at),
                    "symptom": s.diagnosis.symptom,
                    "causes": [
                        {"cause": c.cause, "score": round(c.score, 3)} for c in s.diagnosis.causes[:3]
                    ],
                }
                for s in self.steps
            ],
        }


def replayed(args: argparse.Namespace) -> Replayed:
    """The fixture `args` names, diagnosed every `--every` from its start to its end."""
    graph = inputs.graph_from_args(args)
    fixture = inputs.load_checked_fixture(args.fixture, graph.knowledge)
    symptom, source = fixture_symptom(
        fixture, inputs.symptom_arg(args.symptom, graph.knowledge), graph.knowledge
    )
    try:
        every = parse_duration(args.every)
    except ValueError as exc:
        raise common.UsageError(f"--every: {exc}") from None
    if every < fixture.interval:
        raise common.UsageError(
            f"--every: {args.every} is shorter than the fixture's interval "
            f"({format_duration(fixture.interval)})"
        )
    steps = timeline(graph, fixture.frame, symptom, every, source=source)
    return Replayed(fixture, symptom, every, steps, summarise(steps))


def cmd_replay(args: argparse.Namespace, out: TextIO) -> int:
    found = replayed(args)
    if args.format == "json":
        out.write(json.dumps(found.to_json(), indent=2) + "\n")
        return common.EXIT_OK
    fixture, steps, summary = found.fixture, found.steps, found.summary
    out.write(
        f"{fixture.name}: {len(steps)} steps every {format_duration(found.every)}, symptom {found.symptom}\n"
    )
    previous: tuple[str, ...] | None = None
    for s in steps:
        top3 = tuple(c.cause for c in s.diagnosis.causes[:3])
        if top3 == previous:
            continue
        previous = top3
        offset = format_duration(s.at - fixture.start)
        shown = ", ".join(f"{c.cause} {c.score:.2f}" for c in s.diagnosis.causes[:3]) or "no cause"
        out.write(f"  +{offset:>7}  {format_instant(s.at)[11:]}  {shown}\n")
    if summary.final_top is None:
        out.write("final: no cause ranked\n")
    else:
        line = f"final: {summary.final_top}"
        if summary.first_seen is not None:
            line += f"; first on top at +{format_duration(summary.first_seen - fixture.start)}"
        if summary.settled is not None:
            line += f", settled at +{format_duration(summary.settled - fixture.start)}"
        if summary.onset_to_settled is not None:
            line += f", {format_duration(summary.onset_to_settled)} after the onset"
        out.write(line + "\n")
    return common.EXIT_OK
