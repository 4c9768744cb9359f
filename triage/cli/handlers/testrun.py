"""`triage test`: replay every fixture with an expect block and check it, like `promtool test rules`.

Fixtures are the playbooks' regression tests and this is their runner: exit 1 on any
failure for CI, JUnit XML for CI dashboards, an accuracy scorecard for people. A raw
fixture that names its fleet is replayed scoped to that fleet, and the line says which. Each
folder given is a corpus, named after the folder, that the scorecard totals on its own (a
file given directly belongs to its own folder's). The module is not named `test` so that no
test collector takes it for a test file.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Sequence
from pathlib import Path
from typing import TextIO

from signals.errors import InputError, InputErrors, SignalError
from triage.cli import common
from triage.core.walk import diagnose
from triage.inputs import arguments as inputs
from triage.replay import check_expect, fixture_symptom
from triage.report.scorecard import (
    FixtureOutcome,
    corpus_name,
    error_outcome,
    outcome_for,
    render_junit,
    render_scorecard,
    scorecard_format,
    summary_lines,
)


def fixture_paths(paths: Sequence[str]) -> list[tuple[str, str]]:
    """Each fixture file with its corpus: the folder given that it was found in, else its own folder."""
    found: list[tuple[str, str]] = []
    for raw in paths or ["fixtures"]:
        p = Path(raw)
        if p.is_dir():
            corpus = corpus_name(p)
            found.extend((str(f), corpus) for f in sorted(p.rglob("*.y*ml")) if f.suffix in (".yaml", ".yml"))
        elif p.exists():
            found.append((str(p), corpus_name(p.parent)))
        else:
            raise common.UsageError(f"{raw}: no such file or folder")
    return found


def cmd_test(args: argparse.Namespace, out: TextIO) -> int:
    graph = inputs.graph_from_args(args)
    paths = fixture_paths(args.paths)
    if not paths:
        raise common.UsageError("no fixture files found")
    fmt = None
    if args.scorecard:
        try:
            fmt = scorecard_format(args.scorecard)
        except ValueError as exc:
            raise common.UsageError(f"--scorecard: {exc}") from None
    passed = failed = skipped = 0
    names: dict[str, str] = {}
    outcomes: list[FixtureOutcome] = []
    started = time.perf_counter()
    for path, corpus in paths:
        t0 = time.perf_counter()
        try:
            fixture = inputs.load_checked_fixture(path, graph.knowledge)
        except (InputError, InputErrors, SignalError) as exc:
            failed += 1
            outcomes.append(error_outcome(path, str(exc), elapsed=time.perf_counter() - t0, corpus=corpus))
            out.write(f"ERROR {path}\n")
            for line in str(exc).splitlines():
                out.write(f"    {line}\n")
            continue
        if fixture.name in names:
            failed += 1
            problem = f"name '{fixture.name}' is also used by {names[fixture.name]}"
            outcomes.append(error_outcome(path, problem, name=fixture.name, corpus=corpus))
            out.write(f"ERROR {path}\n    {problem}\n")
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
        steps = None if fmt else ()
        took = time.perf_counter() - t0
        outcomes.append(outcome_for(graph, fixture, diagnosis, steps, elapsed=took, corpus=corpus))
        top = diagnosis.top.cause if diagnosis.top else "no cause"
        of_fleet = f"  (fleet {fixture.fleet.name})" if fixture.fleet is not None else ""
        if result.passed:
            passed += 1
            if not args.quiet:
                out.write(f"PASS  {path}  {diagnosis.symptom} -> {top}{of_fleet}\n")
        else:
            failed += 1
            out.write(f"FAIL  {path}  {diagnosis.symptom} -> {top}{of_fleet}\n")
            for problem in result.problems:
                out.write(f"    {problem}\n")
    elapsed = time.perf_counter() - started
    if args.junit:
        common.write_output(args.junit, render_junit(outcomes, elapsed), "--junit")
    if args.scorecard and fmt:
        common.write_output(args.scorecard, render_scorecard(outcomes, fmt, time.time()), "--scorecard")
    out.write(f"\n{passed} passed, {failed} failed, {skipped} skipped without expect ({elapsed:.1f}s)\n")
    if args.scorecard and outcomes:
        out.write(f"scorecard written to {args.scorecard}\n")
        out.writelines(f"  {line}\n" for line in summary_lines(outcomes))
    return common.EXIT_FAILED if failed else common.EXIT_OK
