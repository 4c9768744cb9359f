"""The `triage` command line: validate input, build sources, call the core, print.

Stdout carries the product (the diagnosis, the timeline, the test report); stderr
carries diagnostics. Every input problem is one `file:line: key: message` line and exit
code 2; nothing reaches the user as a traceback (set TRIAGE_DEBUG=1 to see one).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
import traceback
from collections.abc import Sequence
from pathlib import Path
from typing import TextIO

from signals.errors import InputError, InputErrors
from signals.fixture import Fixture, is_offset, load_fixture
from signals.timeparse import format_duration, format_instant, parse_duration, parse_instant
from triage import __version__
from triage.graph import TriageGraph, build_graph
from triage.model import AUTO
from triage.playbook import Knowledge, _did_you_mean
from triage.render import to_json, to_markdown, to_text
from triage.replay import check_expect, fixture_symptom, summarise, timeline
from triage.sources import default_playbook_dir, load_playbooks
from triage.walk import diagnose

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_USAGE = 2
EXIT_UNAVAILABLE = 3
EXIT_INTERNAL = 70

EPILOG = """\
examples:
  triage diagnose --fixture fixtures/kv-pressure-long-context.yaml
  triage diagnose --fixture F --symptom ttft_slow --at 40m --format json | jq .causes[0]
  triage replay fixtures/replica-down-queue-growth.yaml --every 1m
  triage test                      # replay every fixture with an expect block
  triage playbooks check           # validate the knowledge

exit codes: 0 diagnosis made (also when no cause is found), 1 tests or checks failed,
2 bad usage or bad input, 70 internal error.
"""


class UsageError(Exception):
    """A command-line value that cannot be used; printed as one line, exit 2."""


def _add_common(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--playbooks",
        type=Path,
        default=None,
        metavar="DIR",
        help="playbook folder (default: $TRIAGE_PLAYBOOKS, ./playbooks, or the bundled one)",
    )


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="triage",
        description="Incident triage for LLM inference services: walk from the symptom to ranked causes, "
        "first actions, and the actions that would be wrong now.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"llm-triage {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    d = sub.add_parser(
        "diagnose",
        help="diagnose an incident at one moment",
        description="Diagnose an incident recorded as a fixture at one moment.",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="--at takes an offset from the fixture's start (40m, 1h30m) or an RFC 3339 time.\n"
        "--symptom auto detects the symptom from the signals (the worst breach wins).",
    )
    d.add_argument("--fixture", required=True, metavar="PATH", help="incident fixture (YAML)")
    d.add_argument(
        "--symptom",
        metavar="ID",
        help="where to start: ttft_slow, tpot_slow, errors, rejected, "
        "cost_up, quality_down or auto (default: the fixture's, else auto)",
    )
    d.add_argument(
        "--at", metavar="T", help="moment to diagnose (default: the fixture's at, else the last sample)"
    )
    d.add_argument("--format", choices=("text", "markdown", "json"), default="text")
    d.add_argument("-v", "--verbose", action="store_true", help="show every check, also the ruled-out causes")
    _add_common(d)

    r = sub.add_parser(
        "replay",
        help="the diagnosis at every step through an incident",
        description="Replay an incident: the diagnosis as it would have read at each step, when "
        "the top cause first appeared, when it settled, how long after the onset.",
    )
    r.add_argument("fixture", metavar="PATH")
    r.add_argument("--every", default="1m", metavar="DURATION", help="step between diagnoses (default 1m)")
    r.add_argument("--symptom", metavar="ID")
    r.add_argument("--format", choices=("text", "json"), default="text")
    _add_common(r)

    t = sub.add_parser(
        "test",
        help="replay fixtures and check their expect blocks",
        description="Replay every fixture that has an expect block and check it, like promtool "
        "test rules. Exit 1 on any failure.",
    )
    t.add_argument("paths", nargs="*", metavar="PATH", help="fixture files or folders (default: fixtures/)")
    t.add_argument("-q", "--quiet", action="store_true", help="print failures and the summary only")
    _add_common(t)

    p = sub.add_parser("playbooks", help="work with the playbooks")
    psub = p.add_subparsers(dest="playbooks_command", metavar="SUBCOMMAND")
    pc = psub.add_parser(
        "check",
        help="validate every playbook file, print every problem",
        description="Validate the playbooks: schema, references across files, reachability. "
        "Prints every problem as file:line: key: message; exit 1 if any.",
    )
    pc.add_argument("--first", action="store_true", help="stop at the first problem")
    _add_common(pc)
    return parser


def _graph(args: argparse.Namespace) -> TriageGraph:
    return build_graph(load_playbooks(args.playbooks))


def _fixture_problems(fixture: Fixture, kb: Knowledge) -> list[InputError]:
    """Ids in a fixture that the playbooks do not know, located in the fixture."""
    doc = fixture.document
    out = []
    symptoms = [*kb.symptoms, AUTO]
    if fixture.symptom is not None and fixture.symptom not in symptoms:
        out.append(
            doc.error(
                ("symptom",), f"unknown symptom '{fixture.symptom}'{_did_you_mean(fixture.symptom, symptoms)}"
            )
        )
    if fixture.expect is not None:
        e = fixture.expect
        if e.cause is not None and e.cause not in kb.causes:
            out.append(
                doc.error(
                    ("expect", "cause"), f"unknown cause '{e.cause}'{_did_you_mean(e.cause, kb.causes)}"
                )
            )
        for i, cause in enumerate(e.also):
            if cause not in kb.causes:
                out.append(
                    doc.error(
                        ("expect", "also", i), f"unknown cause '{cause}'{_did_you_mean(cause, kb.causes)}"
                    )
                )
        for key, ids in (("forbidden", e.forbidden), ("not_forbidden", e.not_forbidden)):
            for i, action in enumerate(ids):
                if action not in kb.forbidden:
                    out.append(
                        doc.error(
                            ("expect", key, i),
                            f"unknown forbidden action '{action}'{_did_you_mean(action, kb.forbidden)}",
                        )
                    )
    return out


def _load_checked_fixture(path: str, kb: Knowledge) -> Fixture:
    fixture = load_fixture(path)
    problems = _fixture_problems(fixture, kb)
    if problems:
        raise InputErrors(problems)
    return fixture


def _symptom_arg(value: str | None, kb: Knowledge) -> str | None:
    if value is None:
        return None
    if value != AUTO and value not in kb.symptoms:
        choices = [*sorted(kb.symptoms), AUTO]
        raise UsageError(
            f"--symptom: unknown symptom '{value}'{_did_you_mean(value, choices)}; "
            f"choose one of {', '.join(choices)}"
        )
    return value


def _at_arg(value: str | None, fixture: Fixture) -> float:
    if value is None:
        return fixture.at
    try:
        at = fixture.start + parse_duration(value) if is_offset(value) else parse_instant(value)
    except ValueError as exc:
        raise UsageError(f"--at: {exc}") from None
    if not fixture.frame.start <= at <= fixture.frame.end:
        raise UsageError(
            f"--at: {format_instant(at)} is outside the data "
            f"({format_instant(fixture.frame.start)} to {format_instant(fixture.frame.end)})"
        )
    return at


def use_color(stream: TextIO) -> bool:
    """Colour on a terminal, unless NO_COLOR is set (https://no-color.org) or TERM is dumb."""
    if os.environ.get("NO_COLOR"):
        return False
    if os.environ.get("TERM") == "dumb":
        return False
    isatty = getattr(stream, "isatty", None)
    return bool(isatty and isatty())


def cmd_diagnose(args: argparse.Namespace, out: TextIO) -> int:
    graph = _graph(args)
    fixture = _load_checked_fixture(args.fixture, graph.knowledge)
    symptom = _symptom_arg(args.symptom, graph.knowledge)
    at = _at_arg(args.at, fixture)
    chosen, source = fixture_symptom(fixture, symptom, graph.knowledge)
    diagnosis = diagnose(graph, fixture.frame, chosen, at, source=source)
    if args.format == "json":
        out.write(to_json(diagnosis) + "\n")
    elif args.format == "markdown":
        out.write(to_markdown(diagnosis))
    else:
        out.write(to_text(diagnosis, color=use_color(out), verbose=args.verbose))
    return EXIT_OK


def cmd_replay(args: argparse.Namespace, out: TextIO) -> int:
    graph = _graph(args)
    fixture = _load_checked_fixture(args.fixture, graph.knowledge)
    symptom, source = fixture_symptom(fixture, _symptom_arg(args.symptom, graph.knowledge), graph.knowledge)
    try:
        every = parse_duration(args.every)
    except ValueError as exc:
        raise UsageError(f"--every: {exc}") from None
    if every < fixture.interval:
        raise UsageError(
            f"--every: {args.every} is shorter than the fixture's interval "
            f"({format_duration(fixture.interval)})"
        )
    steps = timeline(graph, fixture.frame, symptom, every, source=source)
    summary = summarise(steps)
    if args.format == "json":
        payload = {
            "fixture": fixture.name,
            "symptom": symptom,
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
                for s in steps
            ],
        }
        out.write(json.dumps(payload, indent=2) + "\n")
        return EXIT_OK
    out.write(f"{fixture.name}: {len(steps)} steps every {format_duration(every)}, symptom {symptom}\n")
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
    return EXIT_OK


def _fixture_paths(paths: Sequence[str]) -> list[str]:
    found: list[str] = []
    for raw in paths or ["fixtures"]:
        p = Path(raw)
        if p.is_dir():
            found.extend(str(f) for f in sorted(p.rglob("*.y*ml")) if f.suffix in (".yaml", ".yml"))
        elif p.exists():
            found.append(str(p))
        else:
            raise UsageError(f"{raw}: no such file or folder")
    return found


def cmd_test(args: argparse.Namespace, out: TextIO) -> int:
    graph = _graph(args)
    paths = _fixture_paths(args.paths)
    if not paths:
        raise UsageError("no fixture files found")
    passed = failed = skipped = 0
    names: dict[str, str] = {}
    started = time.perf_counter()
    for path in paths:
        try:
            fixture = _load_checked_fixture(path, graph.knowledge)
        except (InputError, InputErrors) as exc:
            failed += 1
            out.write(f"ERROR {path}\n")
            for line in str(exc).splitlines():
                out.write(f"    {line}\n")
            continue
        if fixture.name in names:
            failed += 1
            out.write(f"ERROR {path}\n    name '{fixture.name}' is also used by {names[fixture.name]}\n")
            continue
        names[fixture.name] = path
        if fixture.expect is None:
            skipped += 1
            if not args.quiet:
                out.write(f"SKIP  {path} (no expect block)\n")
            continue
        symptom, source = fixture_symptom(fixture, None, graph.knowledge)
        diagnosis = diagnose(graph, fixture.frame, symptom, fixture.at, source=source)
        result = check_expect(diagnosis, fixture.expect)
        top = diagnosis.top.cause if diagnosis.top else "no cause"
        if result.passed:
            passed += 1
            if not args.quiet:
                out.write(f"PASS  {path}  {diagnosis.symptom} -> {top}\n")
        else:
            failed += 1
            out.write(f"FAIL  {path}  {diagnosis.symptom} -> {top}\n")
            for problem in result.problems:
                out.write(f"    {problem}\n")
    elapsed = time.perf_counter() - started
    out.write(f"\n{passed} passed, {failed} failed, {skipped} skipped without expect ({elapsed:.1f}s)\n")
    return EXIT_FAILED if failed else EXIT_OK


def cmd_playbooks_check(args: argparse.Namespace, out: TextIO) -> int:
    directory = args.playbooks or default_playbook_dir()
    try:
        kb = load_playbooks(directory, stop_at_first=args.first)
    except InputErrors as exc:
        for problem in exc.problems:
            out.write(f"{problem}\n")
        count = len(exc.problems)
        sys.stderr.write(f"{count} problem{'s' if count != 1 else ''} in {directory}\n")
        return EXIT_FAILED
    graph = build_graph(kb)
    out.write(
        f"{directory}: ok: {len(kb.symptoms)} symptoms, {len(kb.causes)} causes, "
        f"{len(kb.actions)} actions, {len(kb.forbidden)} forbidden actions, "
        f"{graph.graph.number_of_nodes()} nodes, {graph.graph.number_of_edges()} edges\n"
    )
    return EXIT_OK


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    out = sys.stdout
    try:
        if args.command == "diagnose":
            return cmd_diagnose(args, out)
        if args.command == "replay":
            return cmd_replay(args, out)
        if args.command == "test":
            return cmd_test(args, out)
        if args.command == "playbooks" and args.playbooks_command == "check":
            return cmd_playbooks_check(args, out)
        if args.command == "playbooks":
            parser.parse_args(["playbooks", "--help"])
        parser.print_help(sys.stderr)
        return EXIT_USAGE
    except (InputError, InputErrors) as exc:
        for line in str(exc).splitlines():
            sys.stderr.write(f"triage: {line}\n")
        return EXIT_USAGE
    except UsageError as exc:
        sys.stderr.write(f"triage: {exc}\n")
        return EXIT_USAGE
    except BrokenPipeError:
        sys.stderr.close()
        return EXIT_OK
    except KeyboardInterrupt:
        sys.stderr.write("triage: interrupted\n")
        return 130
    except Exception as exc:
        if os.environ.get("TRIAGE_DEBUG"):
            traceback.print_exc()
        sys.stderr.write(
            f"triage: internal error: {type(exc).__name__}: {exc} "
            "(set TRIAGE_DEBUG=1 for details; please report it)\n"
        )
        return EXIT_INTERNAL


if __name__ == "__main__":
    sys.exit(main())
