"""What every `triage` command shares: exit codes, usage errors, and reading the common arguments.

The commands live one to a module; what two of them need lives here, so a command's
module holds only what that command does. Every input problem surfaces as
`UsageError` (or an `InputError` naming file and line), which `main` turns into one
line on stderr and exit code 2.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TextIO, TypeAlias

from signals.catalog import load_catalog
from signals.errors import InputError, InputErrors
from signals.fixture import Fixture, is_offset, load_fixture
from signals.rawreplay import replay_raw
from signals.timeparse import parse_duration, parse_instant
from signals.vocabulary import suggest
from triage.core.graph import TriageGraph, build_graph
from triage.core.model import AUTO
from triage.core.playbook import Knowledge
from triage.sources import load_playbooks

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_USAGE = 2
EXIT_UNAVAILABLE = 3
EXIT_INTERNAL = 70
EXIT_INTERRUPTED = 130


class UsageError(Exception):
    """A command-line value that cannot be used; printed as one line, exit 2."""


class MissingSubcommand(Exception):
    """A command group (`signals`, `playbooks`) run without its subcommand; main prints the group's help."""


Subparsers: TypeAlias = "argparse._SubParsersAction[argparse.ArgumentParser]"


@dataclass(frozen=True)
class Command:
    """One `triage` subcommand: how it adds its parser, and what runs when it is chosen.

    Each command module holds one, so a command's arguments, help and handler live
    together and main only has to list them.
    """

    name: str
    add: Callable[[Subparsers], None]
    run: Callable[[argparse.Namespace, TextIO], int]


def add_playbook_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--playbooks",
        type=Path,
        default=None,
        metavar="DIR",
        help="playbook folder (default: $TRIAGE_PLAYBOOKS, ./playbooks, or the bundled one)",
    )


def graph_from_args(args: argparse.Namespace) -> TriageGraph:
    return build_graph(load_playbooks(args.playbooks))


def _fixture_problems(fixture: Fixture, kb: Knowledge) -> list[InputError]:
    """Ids in a fixture that the playbooks do not know, located in the fixture."""
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
    fixture = load_fixture(path)
    problems = _fixture_problems(fixture, kb)
    if problems:
        raise InputErrors(problems)
    if fixture.level == "raw":
        fixture, _ = replay_raw(fixture, load_catalog(catalog_files))
    return fixture


def symptom_arg(value: str | None, kb: Knowledge) -> str | None:
    if value is None:
        return None
    if value != AUTO and value not in kb.symptoms:
        choices = [*sorted(kb.symptoms), AUTO]
        raise UsageError(
            f"--symptom: unknown symptom '{value}'{suggest(value, choices)}; "
            f"choose one of {', '.join(choices)}"
        )
    return value


def use_color(stream: TextIO) -> bool:
    """Colour on a terminal, unless NO_COLOR is set (https://no-color.org) or TERM is dumb."""
    if os.environ.get("NO_COLOR"):
        return False
    if os.environ.get("TERM") == "dumb":
        return False
    isatty = getattr(stream, "isatty", None)
    return bool(isatty and isatty())


def live_moment(value: str | None, now: float, flag: str) -> float:
    """An RFC 3339 time, an epoch, or a duration meaning that long before now."""
    if value is None or value == "now":
        return now
    try:
        return now - parse_duration(value) if is_offset(value) else parse_instant(value)
    except ValueError as exc:
        raise UsageError(f"{flag}: {exc}") from None


def live_range(args: argparse.Namespace, now: float) -> tuple[float, float]:
    """`--start` and `--end` of a capture, read against `now`; the end must come after the start."""
    start = live_moment(args.start, now, "--start")
    end = live_moment(args.end, now, "--end")
    if end <= start:
        raise UsageError("--end must be after --start")
    return start, end


def write_output(path: str, text: str, flag: str) -> None:
    try:
        Path(path).write_text(text, encoding="utf-8")
    except OSError as exc:
        raise UsageError(f"{flag} {path}: {exc.strerror}") from None
