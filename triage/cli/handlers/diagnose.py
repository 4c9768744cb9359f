"""`triage diagnose`: the diagnosis at one moment, from a recorded fixture or a live Prometheus.

The on-call answer without the TUI, for pipes and tickets (text, Markdown, JSON). It
can start from the alert that paged, taking the alert's symptom and its startsAt. A
fixture is diagnosed here; a live Prometheus in `diagnose_live`.

What one path or one format alone needs is imported there: the fixture reader and the
replay for `--fixture`, the text rendering (rich) for text, so `--format json` from a live
server loads neither.
"""

from __future__ import annotations

import argparse
import json
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TextIO

from signals.timeparse import format_instant, parse_duration, parse_instant
from triage.cli import common
from triage.cli.handlers.alertfile import read_alert
from triage.core.escape import printable
from triage.core.model import Diagnosis
from triage.core.walk import diagnose, symptom_from_alert
from triage.inputs import arguments as inputs

if TYPE_CHECKING:
    from signals.fixture import Fixture
    from signals.fleets import Fleet


def _at_arg(value: str | None, fixture: Fixture) -> float:
    if value is None:
        return fixture.at
    from signals.fixture import is_offset

    try:
        at = fixture.start + parse_duration(value) if is_offset(value) else parse_instant(value)
    except ValueError as exc:
        raise common.UsageError(f"--at: {exc}") from None
    if not fixture.frame.start <= at <= fixture.frame.end:
        raise common.UsageError(
            f"--at: {format_instant(at)} is outside the data "
            f"({format_instant(fixture.frame.start)} to {format_instant(fixture.frame.end)})"
        )
    return at


def render(diagnosis: Diagnosis, args: argparse.Namespace, out: TextIO) -> None:
    if args.format == "json":
        from triage.core.render import to_json

        out.write(to_json(diagnosis) + "\n")
    elif args.format == "markdown":
        from triage.core.markdown import to_markdown  # jinja2, for Markdown alone

        out.write(to_markdown(diagnosis))
    else:
        from triage.core.render import to_text  # rich, for the terminal text alone

        out.write(to_text(diagnosis, color=common.use_color(out), verbose=args.verbose))


@dataclass(frozen=True)
class FleetDiagnoses:
    """A live server holding several fleets: each one's diagnosis, as the server named them."""

    server: str
    results: tuple[tuple[Fleet, Diagnosis], ...]

    def to_json(self) -> dict[str, Any]:
        """The fleets in breach, each with its own answer; the quiet ones by name."""
        return {
            "server": self.server,
            "fleets": [d.to_json() for _, d in self.results if d.symptom_visible],
            "quiet": [f.name for f, d in self.results if not d.symptom_visible],
        }

    def render_each(self, args: argparse.Namespace, out: TextIO) -> None:
        """Every fleet in breach with its own answer; the quiet ones named in one line."""
        breached = [(f, d) for f, d in self.results if d.symptom_visible]
        quiet = [f.name for f, d in self.results if not d.symptom_visible]
        out.write(f"{len(self.results)} fleets in {self.server}: {len(breached)} in breach\n")
        for fleet, diagnosis in breached:
            out.write(f"\n== FLEET {printable(fleet.name)}\n")
            render(diagnosis, args, out)
        if quiet:
            out.write(f"\nno breach: {printable(', '.join(quiet))}\n")


def diagnosis_of(args: argparse.Namespace) -> Diagnosis | FleetDiagnoses:
    """What `triage diagnose` concludes from its arguments: one diagnosis (a fixture, one fleet,
    an unscoped server), or one per fleet of a live server holding several."""
    if bool(args.fixture) == bool(args.prometheus):
        raise common.UsageError("give either --fixture PATH or --prometheus URL")
    graph = inputs.graph_from_args(args)
    symptom = inputs.symptom_arg(args.symptom, graph.knowledge)
    alert = read_alert(args.alert) if args.alert else None
    if alert is not None and symptom is None:
        symptom = symptom_from_alert(alert.labels, graph.knowledge)
        source = "alert" if symptom else "auto"
    else:
        source = "given" if symptom else "auto"
    if args.fixture:
        from triage.replay import fixture_symptom

        fixture = inputs.load_checked_fixture(args.fixture, graph.knowledge, args.catalog)
        at = _at_arg(args.at, fixture)
        if alert is not None and args.at is None and alert.starts_at is not None:
            at = _at_arg(format_instant(alert.starts_at), fixture)
        if symptom is None:
            chosen, source = fixture_symptom(fixture, None, graph.knowledge)
        else:
            chosen = symptom
        return diagnose(graph, fixture.frame, chosen, at, source=source)
    # The live path's client libraries (HTTP, the catalog, fleet discovery) load only for it.
    from triage.cli.handlers.diagnose_live import diagnose_live

    return diagnose_live(args, graph, symptom, source, alert)


def diagnosis_json(found: Diagnosis | FleetDiagnoses) -> dict[str, Any]:
    """The JSON contract of `triage diagnose --format json`: one diagnosis, or the fleets in breach."""
    return found.to_json()


def cmd_diagnose(args: argparse.Namespace, out: TextIO) -> int:
    found = diagnosis_of(args)
    if args.format == "json":
        out.write(json.dumps(diagnosis_json(found), indent=2, ensure_ascii=False) + "\n")
    elif isinstance(found, Diagnosis):
        render(found, args, out)
    else:
        found.render_each(args, out)
    return common.EXIT_OK
