"""`triage test`: replay every fixture with an expect block and check it, like `promtool test rules`.

Fixtures are the playbooks' regression tests and this is their runner: exit 1 on any
failure for CI, JUnit XML for CI dashboards, an accuracy scorecard for people. A raw
fixture that names its fleet is replayed scoped to that fleet, and the line says which. Each
folder given is a corpus, named after the folder, that the scorecard totals on its own (a
file given directly belongs to its own folder's). The module is not named `test` so that no
test collector takes it for a test file.

Fixtures are loaded (a raw one replayed through its own temporary Prometheus) by `--jobs`
processes at once: a load is mostly Python (the YAML, the series written into Prometheus,
its answers read back) and threads would take turns on one interpreter. With `--scorecard`,
the same processes also replay each fixture's timeline (a diagnosis every minute up to its
moment, for the time to the right answer), which is most of a scorecard's cost. Fixtures
are checked and reported one by one, in path order, in this process, so the output is the
same whatever the number of jobs. The loading processes are forked from this one when it
runs no other thread (the command line), which costs nothing; else (a test calling it in
its own process) they come from a fresh fork server, since forking a process with threads
can deadlock.
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import threading
import time
from collections.abc import Iterator, Sequence
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass, field
from pathlib import Path
from typing import TextIO

from signals.errors import InputError, InputErrors, SignalError
from signals.fixture import Fixture
from triage.cli import common
from triage.core.graph import TriageGraph
from triage.core.walk import diagnose
from triage.inputs import arguments as inputs
from triage.replay import Step, check_expect, fixture_symptom
from triage.report.scorecard import (
    FixtureOutcome,
    corpus_name,
    error_outcome,
    fixture_timeline,
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


def default_jobs() -> int:
    """As many fixtures at once as there are CPUs, at most four (each raw one runs a Prometheus)."""
    return max(1, min(4, os.cpu_count() or 1))


_graph: TriageGraph | None = None
"""The command's decision graph in a loading process (its playbooks' ids check each fixture),
set once as it starts (`_adopt`), not sent per fixture."""
_timelines = False
"""Whether the loading process also replays each fixture's timeline (for the scorecard)."""

Loaded = tuple[Fixture | str, float, list[Step] | None]
"""A fixture or what is wrong with it, how long it took, and its timeline if one was replayed."""


def _adopt(graph: TriageGraph, timelines: bool = False) -> None:
    global _graph, _timelines
    _graph, _timelines = graph, timelines


def _loaded(path: str) -> Loaded:
    """The checked (and, if raw, replayed) fixture, or what is wrong with it as text (which
    crosses a process boundary where some error classes would not), how long loading it took,
    and, for the scorecard, its timeline (None when not asked for, or not a test)."""
    assert _graph is not None, "_adopt() first"
    t0 = time.perf_counter()
    try:
        found: Fixture | str = inputs.load_checked_fixture(path, _graph.knowledge)
    except (InputError, InputErrors, SignalError) as exc:
        found = str(exc)
    took = time.perf_counter() - t0
    steps = None
    if _timelines and isinstance(found, Fixture) and found.expect is not None:
        steps = fixture_timeline(_graph, found)
    return found, took, steps


def _load_all(paths: Sequence[str], graph: TriageGraph, jobs: int, timelines: bool) -> Iterator[Loaded]:
    """`_loaded` of every path, in order: here when `jobs` is 1 (or there is one path), else in
    that many processes."""
    if jobs == 1 or len(paths) == 1:
        _adopt(graph, timelines)
        yield from map(_loaded, paths)
        return
    context = multiprocessing.get_context("fork" if threading.active_count() == 1 else "forkserver")
    workers = min(jobs, len(paths))
    with ProcessPoolExecutor(
        workers, mp_context=context, initializer=_adopt, initargs=(graph, timelines)
    ) as pool:
        try:
            yield from pool.map(_loaded, paths)
        except BrokenProcessPool:
            raise SignalError(
                "a process loading fixtures ended unexpectedly (out of memory, or killed); "
                "run with --jobs 1 to see which fixture"
            ) from None


@dataclass
class _Run:
    """What `triage test` has found so far, fixture by fixture in path order."""

    graph: TriageGraph
    out: TextIO
    quiet: bool
    passed: int = 0
    failed: int = 0
    skipped: int = 0
    names: dict[str, str] = field(default_factory=dict)
    outcomes: list[FixtureOutcome] = field(default_factory=list)

    def check(
        self, path: str, corpus: str, fixture: Fixture | str, took: float, steps: list[Step] | None = None
    ) -> None:
        """One fixture's line (and its problems), counted; `fixture` is what is wrong with it
        when it could not be loaded; `took` is how long loading it took; `steps` its timeline,
        replayed by the loading process for the scorecard (None: no scorecard, no timing)."""
        out = self.out
        if isinstance(fixture, str):
            self.failed += 1
            self.outcomes.append(error_outcome(path, fixture, elapsed=took, corpus=corpus))
            out.write(f"ERROR {path}\n")
            for line in fixture.splitlines():
                out.write(f"    {line}\n")
            return
        if fixture.name in self.names:
            self.failed += 1
            problem = f"name '{fixture.name}' is also used by {self.names[fixture.name]}"
            self.outcomes.append(error_outcome(path, problem, name=fixture.name, corpus=corpus))
            out.write(f"ERROR {path}\n    {problem}\n")
            return
        self.names[fixture.name] = path
        if fixture.expect is None:
            self.skipped += 1
            if not self.quiet:
                out.write(f"SKIP  {path} (no expect block)\n")
            return
        t0 = time.perf_counter()
        symptom, source = fixture_symptom(fixture, None, self.graph.knowledge)
        diagnosis = diagnose(self.graph, fixture.frame, symptom, fixture.at, source=source)
        result = check_expect(diagnosis, fixture.expect)
        timeline = steps if steps is not None else ()
        took += time.perf_counter() - t0
        self.outcomes.append(
            outcome_for(self.graph, fixture, diagnosis, timeline, elapsed=took, corpus=corpus)
        )
        top = diagnosis.top.cause if diagnosis.top else "no cause"
        of_fleet = f"  (fleet {fixture.fleet.name})" if fixture.fleet is not None else ""
        if result.passed:
            self.passed += 1
            if not self.quiet:
                out.write(f"PASS  {path}  {diagnosis.symptom} -> {top}{of_fleet}\n")
        else:
            self.failed += 1
            out.write(f"FAIL  {path}  {diagnosis.symptom} -> {top}{of_fleet}\n")
            for problem in result.problems:
                out.write(f"    {problem}\n")


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
    jobs = args.jobs if args.jobs is not None else default_jobs()
    if jobs < 1:
        raise common.UsageError(f"--jobs: must be at least 1, got {jobs}")
    run = _Run(graph, out, args.quiet)
    started = time.perf_counter()
    loaded = _load_all([path for path, _ in paths], graph, jobs, timelines=fmt is not None)
    for (path, corpus), (fixture, took, steps) in zip(paths, loaded, strict=True):
        run.check(path, corpus, fixture, took, steps)
    elapsed = time.perf_counter() - started
    outcomes = run.outcomes
    if args.junit:
        common.write_output(args.junit, render_junit(outcomes, elapsed), "--junit")
    if args.scorecard and fmt:
        common.write_output(args.scorecard, render_scorecard(outcomes, fmt, time.time()), "--scorecard")
    out.write(
        f"\n{run.passed} passed, {run.failed} failed, {run.skipped} skipped without expect ({elapsed:.1f}s)\n"
    )
    if args.scorecard and outcomes:
        out.write(f"scorecard written to {args.scorecard}\n")
        out.writelines(f"  {line}\n" for line in summary_lines(outcomes))
    return common.EXIT_FAILED if run.failed else common.EXIT_OK
