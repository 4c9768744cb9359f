"""Write a SignalFrame as a signal-level fixture: a live incident becomes a regression test.

Values go out in promtool's notation with runs compressed (`axn`) and gaps as `_`, to six
significant digits; reading the file back gives the same frame up to that rounding, so a
capture replayed at a moment gives the diagnosis the live run gave at that moment.

A capture scoped to one fleet (`--fleet`) records which fleet it is (`fleet:` at the top,
its labels and workload): the series alone name replicas, not the fleet they belong to.
"""

from __future__ import annotations

from typing import Any

import yaml

from signals.fixturefleet import FixtureFleet
from signals.frame import SignalFrame
from signals.notation import compress
from signals.timeparse import format_duration, format_instant


def _selector(signal: str, labels: tuple[tuple[str, str], ...]) -> str:
    if not labels:
        return signal
    escaped = ",".join(
        f'{k}="{v.replace(chr(92), chr(92) * 2).replace(chr(34), chr(92) + chr(34))}"' for k, v in labels
    )
    return f"{signal}{{{escaped}}}"


def frame_to_fixture(
    frame: SignalFrame,
    name: str,
    description: str,
    symptom: str | None = None,
    at: float | None = None,
    fleet: FixtureFleet | None = None,
) -> dict[str, Any]:
    """The fixture document for a frame (no `expect` block: a person adds it after the postmortem)."""
    doc: dict[str, Any] = {"name": name, "description": description}
    if fleet is not None:
        doc["fleet"] = fleet.document()
    doc["interval"] = format_duration(frame.step)
    doc["start"] = format_instant(frame.start)
    if at is not None:
        doc["at"] = format_instant(at)
    if symptom is not None:
        doc["symptom"] = symptom
    items = []
    for signal in frame.signals():
        for s in frame.rows(signal):
            items.append({"series": _selector(signal, s.labels), "values": compress(s.values)})
    doc["input_series"] = items
    return doc


def dump_fixture(doc: dict[str, Any]) -> str:
    return yaml.safe_dump(doc, sort_keys=False, width=100_000, allow_unicode=True)
