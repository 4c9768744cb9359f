"""Reading the arguments several commands share into what they run on: the graph, a fixture
whose ids the playbooks know, a symptom, a moment.

Every problem is a `UsageError` naming the flag, or an `InputError` naming file and line.

The fixture reader and the playbooks (their schema, the graph) are imported by the
functions that read them, so a command that reads neither (`triage fleets`) uses the
moment, duration and secret readers without loading them.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from typing import TYPE_CHECKING

from signals import secret
from signals.errors import InputError, InputErrors
from signals.timeparse import parse_duration, parse_instant
from signals.vocabulary import suggest
from triage.inputs.errors import SourceArgError, UsageError

if TYPE_CHECKING:
    from signals.fixture import Fixture
    from triage.core.graph import TriageGraph
    from triage.core.playbook import Knowledge


def graph_from_args(args: argparse.Namespace) -> TriageGraph:
    from triage.core.graph import build_graph
    from triage.sources import load_playbooks

    return build_graph(load_playbooks(args.playbooks))


def _fixture_problems(fixture: Fixture, kb: Knowledge) -> list[InputError]:
    """Ids in a fixture that the playbooks do not know, located in the fixture."""
    from triage.core.model import AUTO

    doc = fixture.document
    out = []
    symptoms = [*kb.symptoms, AUTO]
    if fixture.symptom is not None and fixture.symptom not in symptoms:
        out.append(
            doc.error(
                ("symptom",), f"unknown symptom '{fixture.symptom}'{suggest(fixture.symptom, symptoms)}"
            )
        )
    if fixture.expect is not None:
        e = fixture.expect
        if e.cause is not None and e.cause not in kb.causes:
            out.append(
                doc.error(("expect", "cause"), f"unknown cause '{e.cause}'{suggest(e.cause, kb.causes)}")
            )
        for i, cause in enumerate(e.also):
            if cause not in kb.causes:
                out.append(
                    doc.error(("expect", "also", i), f"unknown cause '{cause}'{suggest(cause, kb.causes)}")
                )
        for key, ids in (("forbidden", e.forbidden), ("not_forbidden", e.not_forbidden)):
            for i, action in enumerate(ids):
                if action not in kb.forbidden:
                    out.append(
                        doc.error(
                            ("expect", key, i),
                            f"unknown forbidden action '{action}'{suggest(action, kb.forbidden)}",
                        )
                    )
    return out


def load_checked_fixture(path: str, kb: Knowledge, catalog_files: Sequence[str] = ()) -> Fixture:
    """A fixture whose ids the playbooks know; a raw one is first replayed through a real Prometheus."""
    from signals.fixture import load_fixture

    fixture = load_fixture(path)
    problems = _fixture_problems(fixture, kb)
    if problems:
        raise InputErrors(problems)
    if fixture.level == "raw":
        # Only a raw fixture needs the catalog, a temporary Prometheus and its client.
        from signals.catalog import load_catalog
        from signals.rawreplay import replay_raw

        fixture, _ = replay_raw(fixture, load_catalog(catalog_files))
    return fixture


def symptom_arg(value: str | None, kb: Knowledge) -> str | None:
    if value is None:
        return None
    from triage.core.model import AUTO

    if value != AUTO and value not in kb.symptoms:
        choices = [*sorted(kb.symptoms), AUTO]
        raise UsageError(
            f"--symptom: unknown symptom '{value}'{suggest(value, choices)}; "
            f"choose one of {', '.join(choices)}"
        )
    return value


def live_moment(value: str | None, now: float, flag: str) -> float:
    """An RFC 3339 time, an epoch, or a duration meaning that long before now."""
    if value is None or value == "now":
        return now
    try:
        offset: float | None = parse_duration(value)
    except ValueError:
        offset = None  # not a `40m`-style offset (`signals.fixture.is_offset`): an instant
    try:
        return now - offset if offset is not None else parse_instant(value)
    except ValueError as exc:
        raise UsageError(f"{flag}: {exc}") from None


def live_range(args: argparse.Namespace, now: float) -> tuple[float, float]:
    """`--start` and `--end` of a capture, read against `now`; the end must come after the start."""
    start = live_moment(args.start, now, "--start")
    end = live_moment(args.end, now, "--end")
    if end <= start:
        raise UsageError("--end must be after --start")
    return start, end


def duration_arg(value: str, flag: str) -> float:
    try:
        seconds = parse_duration(value)
    except ValueError as exc:
        raise SourceArgError(f"{flag}: {exc}") from None
    if seconds <= 0:
        raise SourceArgError(f"{flag}: must be longer than zero")
    return seconds


def read_secret(path: str, what: str) -> str:
    """A token or password from the file given to `--what`; SourceArgError if it cannot be used."""
    try:
        return secret.read_secret(path, f"--{what}")
    except secret.SecretFileError as exc:
        raise SourceArgError(str(exc)) from None
