"""How well triage does on its fixtures: one outcome per fixture, JUnit XML and a scorecard.

`triage test` says pass or fail; this says how right: the rank of the expected cause,
the forbidden-action checks, and how long after the onset the answer became right and
stayed right. The same outcomes feed two renderings: JUnit XML, because every CI system
reads it and shows one test case per fixture, and a Markdown or HTML scorecard, the
project's public accuracy table (docs/scorecard.md, written by `python -m tools.scorecard`).

Everything here is computation on already-loaded fixtures; loading (and replaying raw
fixtures through Prometheus) stays with the caller, so the CLI and the tool share it.
"""

from __future__ import annotations

import re
import statistics
import xml.etree.ElementTree as ET
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import jinja2

from signals.fixture import Fixture
from signals.timeparse import format_duration, format_instant
from triage.core.escape import escape_md
from triage.core.graph import TriageGraph
from triage.core.model import Diagnosis
from triage.replay import Step, check_expect, fixture_symptom, timeline

NO_CAUSE = "none"
"""The expected cause of a `cause: none` fixture: no cause may be ranked."""

TIMELINE_EVERY = 60.0
"""Seconds between replay steps when timing the diagnosis; a minute is how often a person
would re-read the tool during an incident, and it keeps a full replay to about a second."""


def corpus_name(folder: Path) -> str:
    """The corpus a folder stands for: its name as given (`.` and the like: the real folder's)."""
    if folder.name in ("", ".", ".."):
        return folder.resolve().name or str(folder.resolve())
    return folder.name


@dataclass(frozen=True)
class FixtureOutcome:
    """What one fixture's replay concluded against its expect block.

    `expected` is the expected top cause, "none" for `cause: none`, or None when the
    expect block says nothing about the top cause (or the fixture did not load).
    `rank` is the 1-based rank of the expected cause (None if not ranked or not expected).
    `onset` is the onset the tool reported at the step where the answer became right for
    good (it re-estimates the onset as data arrives, so this is the onset a person reading
    the right answer saw); when never right, the onset of the checked diagnosis.
    `time_to_right` is seconds from that onset to that step: None if never right, for
    `cause: none` fixtures, and when no timeline was replayed.
    `corpus` names the set the fixture belongs to: the folder it was found in as given on
    the command line (`fixtures`, `generality_hard`); left empty, the name of its own folder.
    """

    path: str
    name: str
    symptom: str | None
    expected: str | None
    diagnosed: str | None
    rank: int | None
    forbidden_passed: int
    forbidden_total: int
    passed: bool
    problems: tuple[str, ...]
    error: str | None
    onset: float | None
    time_to_right: float | None
    elapsed: float
    corpus: str = ""
    verdict: str | None = None
    """The verdict the diagnosis reached (`cause`, `ambiguous`, `unexplained`, `no_incident`)."""
    expected_verdict: str | None = None
    """The verdict the expect block asks for, if it names one."""

    @property
    def verdict_right(self) -> bool | None:
        """Whether the verdict is the expected one; None when none is expected."""
        if self.expected_verdict is None:
            return None
        return self.error is None and self.verdict == self.expected_verdict

    def __post_init__(self) -> None:
        if not self.corpus:
            object.__setattr__(self, "corpus", corpus_name(Path(self.path).parent))

    @property
    def status(self) -> Literal["pass", "fail", "error"]:
        if self.error is not None:
            return "error"
        return "pass" if self.passed else "fail"

    @property
    def top1(self) -> bool:
        """Right on top: the expected cause first, or for `none` nothing ranked at all."""
        if self.expected == NO_CAUSE:
            return self.error is None and self.diagnosed is None
        return self.rank == 1

    @property
    def top3(self) -> bool:
        if self.expected == NO_CAUSE:
            return self.top1
        return self.rank is not None and self.rank <= 3


def fixture_timeline(graph: TriageGraph, fixture: Fixture) -> list[Step]:
    """The fixture re-diagnosed every minute (or every sample, if coarser) up to its `at`.

    It ends at `at`, the moment the expect block is checked, so "stayed right" means
    right through to the answer `triage test` judges.
    """
    symptom, source = fixture_symptom(fixture, None, graph.knowledge)
    every = max(TIMELINE_EVERY, fixture.interval)
    return timeline(graph, fixture.frame, symptom, every, end=fixture.at, source=source)


def _settled_step(steps: Sequence[Step], cause: str) -> Step | None:
    """The first step from which `cause` is on top at every later step, if the last one has it."""
    settled: Step | None = None
    for step in reversed(steps):
        if step.top != cause:
            break
        settled = step
    return settled


def outcome_for(
    graph: TriageGraph,
    fixture: Fixture,
    diagnosis: Diagnosis,
    steps: Sequence[Step] | None = None,
    elapsed: float = 0.0,
    corpus: str = "",
) -> FixtureOutcome:
    """Score one fixture's diagnosis (the one at `fixture.at`) against its expect block.

    `steps` is the fixture's timeline; None replays it here (`fixture_timeline`), an
    empty sequence skips the timing (time_to_right None) for callers that only need
    pass/fail and not the extra second per fixture. `corpus` as in FixtureOutcome. A
    fixture without an expect block is not a test, so it has no outcome: ValueError.
    """
    expect = fixture.expect
    if expect is None:
        raise ValueError(f"{fixture.path}: no expect block, nothing to score")
    if steps is None:
        steps = fixture_timeline(graph, fixture)
    result = check_expect(diagnosis, expect)
    ranked = [c.cause for c in diagnosis.causes]
    flagged = {f.action for f in diagnosis.forbidden}
    expected = NO_CAUSE if expect.no_cause else expect.cause
    rank = ranked.index(expected) + 1 if expected is not None and expected in ranked else None
    forbidden_passed = sum(a in flagged for a in expect.forbidden) + sum(
        a not in flagged for a in expect.not_forbidden
    )
    onset = diagnosis.onset
    time_to_right: float | None = None
    if expect.cause is not None and steps:
        settled = _settled_step(steps, expect.cause)
        if settled is not None:
            onset = settled.diagnosis.onset if settled.diagnosis.onset is not None else onset
            time_to_right = settled.at - onset if onset is not None else None
    return FixtureOutcome(
        path=fixture.path,
        name=fixture.name,
        symptom=diagnosis.symptom,
        expected=expected,
        diagnosed=ranked[0] if ranked else None,
        rank=rank,
        forbidden_passed=forbidden_passed,
        forbidden_total=len(expect.forbidden) + len(expect.not_forbidden),
        passed=result.passed,
        problems=result.problems,
        error=None,
        onset=onset,
        time_to_right=time_to_right,
        elapsed=elapsed,
        corpus=corpus,
        verdict=diagnosis.verdict,
        expected_verdict=expect.verdict,
    )


def error_outcome(
    path: str, error: str, name: str | None = None, elapsed: float = 0.0, corpus: str = ""
) -> FixtureOutcome:
    """A fixture that could not be replayed (bad input, a duplicate name, no Prometheus).

    It stays in the table and counts as wrong in every accuracy: a fixture that breaks
    must not make the scorecard look better by dropping out of it.
    """
    return FixtureOutcome(
        path=path,
        name=name or Path(path).stem,
        symptom=None,
        expected=None,
        diagnosed=None,
        rank=None,
        forbidden_passed=0,
        forbidden_total=0,
        passed=False,
        problems=(),
        error=error,
        onset=None,
        time_to_right=None,
        elapsed=elapsed,
        corpus=corpus,
    )


@dataclass(frozen=True)
class Totals:
    """The scorecard's headline figures.

    Accuracies are over `scored` fixtures: those expecting a top cause (or none) plus
    those that failed to load. Forbidden-action accuracy is over individual checks
    (`forbidden` and `not_forbidden` entries). The median time to a right diagnosis is
    over the fixtures that expect a real cause and settled on it (`timed` of `timeable`).
    """

    fixtures: int
    passed: int
    failed: int
    errors: int
    scored: int
    top1: int
    top3: int
    forbidden_passed: int
    forbidden_total: int
    timed: int
    timeable: int
    median_time_to_right: float | None
    verdicts_right: int = 0
    verdicts_expected: int = 0


def totals(outcomes: Sequence[FixtureOutcome]) -> Totals:
    scored = [o for o in outcomes if o.error is not None or o.expected is not None]
    timeable = [o for o in outcomes if o.error is None and o.expected not in (None, NO_CAUSE)]
    times = [o.time_to_right for o in timeable if o.time_to_right is not None]
    return Totals(
        fixtures=len(outcomes),
        passed=sum(o.status == "pass" for o in outcomes),
        failed=sum(o.status == "fail" for o in outcomes),
        errors=sum(o.status == "error" for o in outcomes),
        scored=len(scored),
        top1=sum(o.top1 for o in scored),
        top3=sum(o.top3 for o in scored),
        forbidden_passed=sum(o.forbidden_passed for o in outcomes),
        forbidden_total=sum(o.forbidden_total for o in outcomes),
        timed=len(times),
        timeable=len(timeable),
        median_time_to_right=statistics.median(times) if times else None,
        verdicts_right=sum(o.verdict_right is True for o in outcomes),
        verdicts_expected=sum(o.verdict_right is not None for o in outcomes),
    )


def corpus_totals(outcomes: Sequence[FixtureOutcome]) -> list[tuple[str, Totals]]:
    """Totals per corpus, the corpora in the order their first fixture came."""
    by_corpus: dict[str, list[FixtureOutcome]] = {}
    for o in outcomes:
        by_corpus.setdefault(o.corpus, []).append(o)
    return [(corpus, totals(group)) for corpus, group in by_corpus.items()]


# XML 1.0 cannot carry most control characters, escaped or not; ElementTree writes them
# as they are, and the CI system then rejects the whole report. A fixture name or an
# error message can hold anything, so they are replaced.
_XML_INVALID = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ufffe\uffff\ud800-\udfff]")


def _xml_text(value: str) -> str:
    return _XML_INVALID.sub("\ufffd", value)


def _summary_line(o: FixtureOutcome) -> str:
    line = f"{o.symptom} -> {o.diagnosed or 'no cause'}; expected {o.expected or 'no expectation'}"
    if o.expected not in (None, NO_CAUSE):
        line += f" (rank {o.rank})" if o.rank is not None else " (not ranked)"
    if o.forbidden_total:
        line += f"; forbidden checks {o.forbidden_passed}/{o.forbidden_total}"
    if o.time_to_right is not None:
        line += f"; right {format_duration(o.time_to_right)} after the onset"
    return line


def render_junit(outcomes: Sequence[FixtureOutcome], elapsed: float) -> str:
    """JUnit XML with one test case per fixture, in the form Jenkins, GitLab and GitHub read.

    A fixture whose expect block fails is a <failure> whose message lists the problems; one
    that could not be replayed is an <error>. The class name is the fixture's corpus, so
    test identity (class + name) is stable across runs for CI history.
    """
    t = totals(outcomes)
    counts = {
        "tests": str(t.fixtures),
        "failures": str(t.failed),
        "errors": str(t.errors),
        "skipped": "0",
        "time": f"{elapsed:.3f}",
    }
    root = ET.Element("testsuites", {"name": "triage test", **counts})
    suite = ET.SubElement(root, "testsuite", {"name": "triage test", **counts})
    for o in outcomes:
        case = ET.SubElement(
            suite,
            "testcase",
            {
                "name": _xml_text(o.name),
                "classname": _xml_text(o.corpus),
                "file": _xml_text(o.path),
                "time": f"{o.elapsed:.3f}",
            },
        )
        if o.error is not None:
            first = o.error.strip().splitlines()[0] if o.error.strip() else "could not replay"
            error = ET.SubElement(case, "error", {"message": _xml_text(first), "type": "InputError"})
            error.text = _xml_text(o.error)
        elif not o.passed:
            failure = ET.SubElement(
                case, "failure", {"message": _xml_text("; ".join(o.problems)), "type": "ExpectationFailed"}
            )
            failure.text = _xml_text("\n".join([*o.problems, _summary_line(o)]))
        if o.error is None:
            ET.SubElement(case, "system-out").text = _xml_text(_summary_line(o))
    ET.indent(root)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(root, encoding="unicode") + "\n"


def _pct(part: int, whole: int, unit: str = "") -> str:
    if whole == 0:
        return "—"
    return f"{100 * part / whole:.1f}% ({part} of {whole}{unit})"


def _duration(seconds: float | None) -> str:
    return "—" if seconds is None else format_duration(seconds)


@dataclass(frozen=True)
class Figures:
    """One set of totals as the scorecard prints them ("97.5% (39 of 40)")."""

    name: str
    t: Totals
    top1: str
    top3: str
    forbidden: str
    passed: str
    median: str
    verdicts: str


def figures(name: str, t: Totals) -> Figures:
    return Figures(
        name=name,
        t=t,
        top1=_pct(t.top1, t.scored),
        top3=_pct(t.top3, t.scored),
        forbidden=_pct(t.forbidden_passed, t.forbidden_total, " checks"),
        passed=_pct(t.passed, t.fixtures),
        median=_duration(t.median_time_to_right),
        verdicts=_pct(t.verdicts_right, t.verdicts_expected),
    )


def summary_lines(outcomes: Sequence[FixtureOutcome]) -> list[str]:
    """The totals as plain text, overall and then one line per corpus, for a terminal."""
    rows = [figures("overall", totals(outcomes))] + [figures(c, t) for c, t in corpus_totals(outcomes)]
    width = max(len(f.name) for f in rows)
    return [
        f"{f.name:<{width}}  top-1 {f.top1} · top-3 {f.top3} · forbidden {f.forbidden} · "
        f"verdict {f.verdicts} · passed {f.passed}"
        for f in rows
    ]


def _time_cell(o: FixtureOutcome) -> str:
    """Why a time is missing matters: not applicable, never right, or not replayed."""
    if o.time_to_right is not None:
        return format_duration(o.time_to_right)
    if o.error is not None or o.expected in (None, NO_CAUSE):
        return "n/a"
    return "never" if o.diagnosed != o.expected else "—"


_ENV = jinja2.Environment(
    loader=jinja2.PackageLoader("triage.report", "templates"),
    undefined=jinja2.StrictUndefined,
    autoescape=lambda name: name is not None and name.endswith(".html.j2"),
    keep_trailing_newline=True,
)
_ENV.filters["e_md"] = escape_md
_ENV.filters["duration"] = _duration


def render_scorecard(
    outcomes: Sequence[FixtureOutcome], fmt: Literal["md", "html"], generated_at: float
) -> str:
    """The accuracy table: headline totals, totals per corpus, then one row per fixture with its problems."""
    if fmt not in ("md", "html"):
        raise ValueError(f"scorecard format must be md or html, got {fmt!r}")
    t = totals(outcomes)
    overall = figures("overall", t)
    template = _ENV.get_template(f"scorecard.{fmt}.j2")
    return template.render(
        outcomes=outcomes,
        t=t,
        generated=format_instant(generated_at),
        top1=overall.top1,
        top3=overall.top3,
        forbidden=overall.forbidden,
        passed=overall.passed,
        median=overall.median,
        verdicts=overall.verdicts,
        corpora=[figures(c, ct) for c, ct in corpus_totals(outcomes)],
        time_cell=_time_cell,
        no_cause=NO_CAUSE,
    )


def scorecard_format(path: str) -> Literal["md", "html"]:
    """The scorecard format a file name asks for: .md or .html (.htm); ValueError otherwise."""
    suffix = Path(path).suffix.lower()
    if suffix in (".md", ".markdown"):
        return "md"
    if suffix in (".html", ".htm"):
        return "html"
    raise ValueError(f"{path}: a scorecard is .md or .html")
