"""The scorecard and JUnit report: totals that match hand counts, XML that CI systems parse back,
escaping that survives hostile fixture names, an end-to-end run on bundled fixtures, the corpus
each row comes from with totals per corpus, and the tool that regenerates docs/scorecard.md."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from dataclasses import replace
from pathlib import Path

import pytest

from signals.fixture import Expect, Fixture, load_fixture
from triage.core.graph import TriageGraph
from triage.core.model import CauseFinding, Diagnosis, Forbidden
from triage.core.walk import diagnose
from triage.replay import Step, check_expect, fixture_symptom
from triage.report.scorecard import (
    FixtureOutcome,
    error_outcome,
    outcome_for,
    render_junit,
    render_scorecard,
    scorecard_format,
    totals,
)

ROOT = Path(__file__).resolve().parents[2]
GENERATED = 1_790_000_000.0  # 2026-09-21T...Z; any fixed instant


def outcome(
    name: str,
    expected: str | None,
    diagnosed: str | None,
    rank: int | None,
    forbidden: tuple[int, int] = (0, 0),
    problems: tuple[str, ...] = (),
    time_to_right: float | None = None,
) -> FixtureOutcome:
    return FixtureOutcome(
        path=f"fixtures/{name}.yaml",
        name=name,
        symptom="ttft_slow",
        expected=expected,
        diagnosed=diagnosed,
        rank=rank,
        forbidden_passed=forbidden[0],
        forbidden_total=forbidden[1],
        passed=not problems,
        problems=problems,
        error=None,
        onset=1_760_000_000.0,
        time_to_right=time_to_right,
        elapsed=0.25,
    )


PROBLEMS = (
    "expected top cause replica_down (ranked #2), got kv_pressure",
    "expected scale_out flagged forbidden; it is not",
)
SYNTHETIC = [
    outcome("a", "kv_pressure", "kv_pressure", 1, (2, 2), time_to_right=45.0),
    outcome("b", "replica_down", "kv_pressure", 2, (1, 2), problems=PROBLEMS),
    outcome("c", "none", None, None, (1, 1)),
    error_outcome("fixtures/d.yaml", "fixtures/d.yaml:3: start: missing"),
    outcome("e", "gpu_fault", "gpu_fault", 1, time_to_right=180.0),
    outcome("f", "traffic_burst", "traffic_burst", 1, (2, 2), time_to_right=90.0),
]


def test_totals_match_hand_counts() -> None:
    t = totals(SYNTHETIC)
    # Scored: all six (d counts as wrong). Top-1: a, c (nothing ranked), e, f. Top-3 adds b.
    assert (t.fixtures, t.passed, t.failed, t.errors, t.scored) == (6, 4, 1, 1, 6)
    assert (t.top1, t.top3) == (4, 5)
    assert (t.forbidden_passed, t.forbidden_total) == (6, 7)
    # Timeable: a, b, e, f (a real cause expected, loaded); b never right; median of 45, 90, 180.
    assert (t.timed, t.timeable, t.median_time_to_right) == (3, 4, 90.0)


def test_a_none_fixture_with_a_cause_ranked_is_wrong_on_top1_and_top3() -> None:
    wrong = outcome(
        "quiet", "none", "traffic_burst", None, problems=("expected no cause, got traffic_burst",)
    )
    t = totals([wrong])
    assert (t.top1, t.top3, t.timeable, t.median_time_to_right) == (0, 0, 0, None)


def test_junit_parses_back_with_counts_and_messages() -> None:
    root = ET.fromstring(render_junit(SYNTHETIC, elapsed=12.3456))
    suite = root.find("testsuite")
    assert suite is not None
    for node in (root, suite):
        assert node.get("tests") == "6" and node.get("failures") == "1" and node.get("errors") == "1"
        assert node.get("time") == "12.346"
    cases = {c.get("name"): c for c in suite.findall("testcase")}
    assert list(cases) == ["a", "b", "c", "d", "e", "f"]
    assert cases["a"].get("classname") == "fixtures" and cases["a"].get("time") == "0.250"
    failure = cases["b"].find("failure")
    assert failure is not None and failure.get("message") == "; ".join(PROBLEMS)
    assert failure.text is not None and failure.text.splitlines()[:2] == list(PROBLEMS)
    error = cases["d"].find("error")
    assert error is not None and error.get("message") == "fixtures/d.yaml:3: start: missing"
    assert cases["a"].find("failure") is None and cases["a"].find("error") is None


def test_junit_survives_a_hostile_name() -> None:
    name = 'x<y & "z"\x01\x1b]'
    hostile = replace(SYNTHETIC[1], name=name, problems=("a\nb < c & d",))
    root = ET.fromstring(render_junit([hostile], elapsed=1.0))
    case = root.find("testsuite/testcase")
    assert case is not None and case.get("name") == 'x<y & "z"\ufffd\ufffd]'
    failure = case.find("failure")
    assert failure is not None and failure.get("message") == "a\nb < c & d"


def test_markdown_scorecard_totals_and_rows() -> None:
    md = render_scorecard(SYNTHETIC, "md", GENERATED)
    assert "| top-1 accuracy | 66.7% (4 of 6) |" in md
    assert "| top-3 accuracy | 83.3% (5 of 6) |" in md
    assert "| forbidden-action accuracy | 85.7% (6 of 7 checks) |" in md
    assert "| median time to a right diagnosis | 1m30s (3 of 4 fixtures with a cause) |" in md
    rows = [line for line in md.splitlines() if re.match(r"\| [a-f] \|", line)]
    assert len(rows) == 6
    assert rows[1].endswith("| 2 | — | 1/2 | never | **FAIL** |")
    assert rows[2].endswith("| none | no cause | — | — | 1/1 | n/a | pass |")
    assert rows[3].endswith("| — | — | n/a | **ERROR** |")
    assert "## Problems" in md and "start: missing" in md


def test_markdown_keeps_a_hostile_name_in_its_cell() -> None:
    hostile = replace(SYNTHETIC[0], name="a | b <img src=x> *c*\nd")
    md = render_scorecard([hostile], "md", GENERATED)
    row = next(line for line in md.splitlines() if line.startswith("| a "))
    assert row.count(" | ") == 9  # ten cells: the | in the name is escaped
    assert "<img" not in md and r"a \| b &lt;img src=x&gt; \*c\* d" in row
    assert "kv_pressure" in row  # ids inside words are not escaped


def test_html_scorecard_autoescapes() -> None:
    hostile = replace(
        SYNTHETIC[1], name='<script>alert("x")</script>', path='fixtures/"><b>.yaml', problems=("<i>no</i>",)
    )
    page = render_scorecard([hostile, SYNTHETIC[0]], "html", GENERATED)
    assert "<script>" not in page and "<b>" not in page and "<i>" not in page
    assert "&lt;script&gt;alert(&#34;x&#34;)&lt;/script&gt;" in page
    assert 'title="fixtures/&#34;&gt;&lt;b&gt;.yaml"' in page
    assert "<td>50.0% (1 of 2)</td>" in page  # top-1: a right, b wrong


def test_scorecard_format_from_the_file_name() -> None:
    assert scorecard_format("docs/scorecard.md") == "md"
    assert scorecard_format("out/Score.HTML") == "html"
    with pytest.raises(ValueError):
        scorecard_format("scorecard.txt")
    with pytest.raises(ValueError):
        render_scorecard(SYNTHETIC, "txt", GENERATED)  # type: ignore[arg-type]


def _diagnosis(at: float, onset: float | None, *causes: str, forbidden: tuple[str, ...] = ()) -> Diagnosis:
    return Diagnosis(
        symptom="ttft_slow",
        symptom_source="fixture",
        at=at,
        onset=onset,
        baseline_window=None,
        causes=tuple(CauseFinding(c, "supply", c, "ranked", 0.9, ()) for c in causes),
        first_actions=(),
        forbidden=tuple(Forbidden(a, "because") for a in forbidden),
        missing_signals=(),
    )


@pytest.fixture(scope="module")
def quiet() -> Fixture:
    return load_fixture(str(ROOT / "fixtures" / "version-change.yaml"))


def test_time_to_right_runs_from_the_onset_seen_when_the_answer_settled(
    graph: TriageGraph, quiet: Fixture
) -> None:
    fixture = replace(quiet, expect=Expect("replica_down", forbidden=("scale_out",), not_forbidden=("x",)))
    tops: list[tuple[str, ...]] = [
        (),
        ("replica_down",),
        ("kv_pressure",),
        ("replica_down",),
        ("replica_down",),
    ]
    steps = [
        Step(1000.0 + 60 * i, _diagnosis(1000.0 + 60 * i, 1000.0 + 30 * i, *t)) for i, t in enumerate(tops)
    ]
    final = _diagnosis(1240.0, 1150.0, "replica_down", "kv_pressure", forbidden=("scale_out",))
    o = outcome_for(graph, fixture, final, steps, elapsed=0.5)
    # Right for good from step 3 (at 1180), whose diagnosis put the onset at 1090.
    assert (o.onset, o.time_to_right) == (1090.0, 90.0)
    assert (o.expected, o.diagnosed, o.rank, o.passed, o.status) == (
        "replica_down",
        "replica_down",
        1,
        True,
        "pass",
    )
    assert (o.forbidden_passed, o.forbidden_total, o.elapsed) == (2, 2, 0.5)

    wrong = _diagnosis(1240.0, 1150.0, "kv_pressure", "replica_down")
    o = outcome_for(graph, fixture, wrong, [*steps, Step(1240.0, wrong)])
    assert (o.rank, o.time_to_right, o.onset, o.passed, o.forbidden_passed) == (2, None, 1150.0, False, 1)
    assert o.problems == check_expect(wrong, fixture.expect or Expect(None)).problems
    assert outcome_for(graph, fixture, final, ()).time_to_right is None  # no timeline, no time

    none = replace(quiet, expect=Expect(None, no_cause=True))
    o = outcome_for(graph, none, _diagnosis(1240.0, None), steps)
    assert (o.expected, o.diagnosed, o.rank, o.time_to_right, o.top1, o.top3) == (
        "none",
        None,
        None,
        None,
        True,
        True,
    )
    with pytest.raises(ValueError):
        outcome_for(graph, replace(quiet, expect=None), final, steps)


# Signal-level fixtures (no Prometheus needed), small and quick to replay.
E2E = ("price-change", "version-change", "healthy-fleet-no-incident")


def test_end_to_end_on_bundled_fixtures(graph: TriageGraph, tmp_path: Path) -> None:
    outcomes = []
    for stem in E2E:
        fixture = load_fixture(str(ROOT / "fixtures" / f"{stem}.yaml"))
        assert fixture.level == "signal" and fixture.expect is not None
        if stem == "version-change":  # made to fail: demand a cause it does not reach
            fixture = replace(fixture, expect=replace(fixture.expect, cause="price_change"))
        symptom, source = fixture_symptom(fixture, None, graph.knowledge)
        diagnosis = diagnose(graph, fixture.frame, symptom, fixture.at, source=source)
        outcomes.append(outcome_for(graph, fixture, diagnosis))
    price, version, healthy = outcomes
    assert (price.status, price.diagnosed, price.rank, price.forbidden_passed, price.forbidden_total) == (
        "pass",
        "price_change",
        1,
        1,
        1,
    )
    assert price.time_to_right == 45.0
    assert (version.status, version.diagnosed, version.rank, version.time_to_right) == (
        "fail",
        "version_change",
        None,
        None,
    )
    assert (healthy.status, healthy.expected, healthy.diagnosed, healthy.time_to_right) == (
        "pass",
        "none",
        None,
        None,
    )

    root = ET.fromstring(render_junit(outcomes, elapsed=2.0))
    assert (root.get("tests"), root.get("failures"), root.get("errors")) == ("3", "1", "0")
    failing = [c for c in root.iter("testcase") if c.find("failure") is not None]
    assert [c.get("name") for c in failing] == ["version-change"]
    failure = failing[0].find("failure")
    assert failure is not None
    assert failure.get("message") == "expected top cause price_change (not ranked), got version_change"

    # By hand: top-1 and top-3 are price-change and healthy (nothing ranked) of 3; forbidden checks:
    # price-change 1 of 1, version-change 1 of 1 (tune_sampling forbidden), healthy 1 of 1;
    # time: only price-change (45s) of the two expecting a cause.
    t = totals(outcomes)
    assert (t.top1, t.top3, t.scored, t.forbidden_passed, t.forbidden_total) == (2, 2, 3, 3, 3)
    assert (t.timed, t.timeable, t.median_time_to_right) == (1, 2, 45.0)
    md = render_scorecard(outcomes, "md", GENERATED)
    assert "| top-1 accuracy | 66.7% (2 of 3) |" in md and "| top-3 accuracy | 66.7% (2 of 3) |" in md
    assert "| forbidden-action accuracy | 100.0% (3 of 3 checks) |" in md
    assert "| median time to a right diagnosis | 45s (1 of 2 fixtures with a cause) |" in md
    assert (
        "| version-change | fixtures | quality_down | price_change | version_change | — | cause | 1/1 "
        "| never | **FAIL** |" in md
    )


def test_triage_test_writes_an_html_scorecard(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from triage.cli.main import main

    out = tmp_path / "card.html"
    assert main(["test", "-q", str(ROOT / "fixtures" / "price-change.yaml"), "--scorecard", str(out)]) == 0
    capsys.readouterr()
    page = out.read_text(encoding="utf-8")
    assert page.startswith("<!DOCTYPE html>") and ">price-change</td>" in page
    assert "price-change.yaml" in page


def _copy(stem: str, to: Path, **replacements: str) -> Path:
    """A bundled fixture copied to `to`, each `old` in its text replaced by `new`."""
    text = (ROOT / "fixtures" / f"{stem}.yaml").read_text(encoding="utf-8")
    for old, new in replacements.items():
        assert old in text, old
        text = text.replace(old, new)
    to.parent.mkdir(parents=True, exist_ok=True)
    to.write_text(text, encoding="utf-8")
    return to


def test_each_row_names_its_corpus_and_each_corpus_has_totals(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from triage.cli.main import main

    alpha, beta = tmp_path / "alpha", tmp_path / "beta"
    _copy("price-change", alpha / "price-change.yaml")
    # Found in a subfolder of alpha, so of corpus alpha; made to fail: a cause it does not reach.
    _copy(
        "version-change",
        alpha / "nested" / "version-change.yaml",
        **{"cause: version_change": "cause: price_change"},
    )
    _copy("healthy-fleet-no-incident", beta / "healthy.yaml")
    (beta / "broken.yaml").write_text("name: broken\n", encoding="utf-8")
    # Given as a file: of its own folder's corpus, gamma. Right cause, wrong forbidden check.
    direct = _copy(
        "price-change",
        tmp_path / "gamma" / "price-again.yaml",
        **{
            "name: price-change": "name: price-again",
            "  forbidden:\n  - scale_out": "  not_forbidden:\n  - scale_out",
        },
    )
    card, junit = tmp_path / "card.md", tmp_path / "junit.xml"
    argv = ["test", "-q", str(alpha), str(beta), str(direct), "--scorecard", str(card), "--junit", str(junit)]
    assert main(argv) == 1
    printed = capsys.readouterr().out
    md = card.read_text(encoding="utf-8")

    assert "*5 fixtures in 3 corpora (alpha, beta, gamma) replayed" in md
    rows = {line.split(" | ")[0][2:]: line for line in md.splitlines() if line.count(" | ") == 9}
    assert rows["price-change"].startswith(
        "| price-change | alpha | cost_up | price_change | price_change | 1 |"
    )
    assert rows["version-change"].startswith("| version-change | alpha | quality_down | price_change |")
    assert rows["version-change"].endswith("| 1/1 | never | **FAIL** |")
    assert rows["healthy-fleet-no-incident"].startswith("| healthy-fleet-no-incident | beta | none | none |")
    assert rows["broken"].startswith("| broken | beta | — |") and rows["broken"].endswith("| **ERROR** |")
    assert rows["price-again"].startswith(
        "| price-again | gamma | cost_up | price_change | price_change | 1 | cause | 0/1 |"
    )

    # By hand. alpha: price-change right, version-change wrong; forbidden checks 1/1 each.
    # beta: healthy right (nothing ranked), broken counts wrong; forbidden 1/1 (healthy).
    # gamma: right cause, its one forbidden check fails, so its expect block fails.
    # Overall: top-1 and top-3 3 of 5, forbidden 3 of 4, passed 2 of 5.
    assert "| top-1 accuracy | 60.0% (3 of 5) |" in md and "| top-3 accuracy | 60.0% (3 of 5) |" in md
    assert "| forbidden-action accuracy | 75.0% (3 of 4 checks) |" in md
    assert "| expect blocks passed | 40.0% (2 of 5); 1 could not be replayed |" in md
    per_corpus = md.split("## Per corpus\n\n", 1)[1].split("\n\n", 1)[0].splitlines()[2:]
    assert per_corpus == [
        "| alpha | 2 | 50.0% (1 of 2) | 50.0% (1 of 2) | 100.0% (2 of 2 checks) | — | 50.0% (1 of 2) |",
        "| beta | 2 | 50.0% (1 of 2) | 50.0% (1 of 2) | 100.0% (1 of 1 checks) | — "
        "| 50.0% (1 of 2); 1 could not be replayed |",
        "| gamma | 1 | 100.0% (1 of 1) | 100.0% (1 of 1) | 0.0% (0 of 1 checks) | — | 0.0% (0 of 1) |",
    ]
    assert (
        "  gamma    top-1 100.0% (1 of 1) · top-3 100.0% (1 of 1) · forbidden 0.0% (0 of 1 checks)" in printed
    )
    assert f"scorecard written to {card}" in printed

    classes = {c.get("name"): c.get("classname") for c in ET.parse(junit).getroot().iter("testcase")}
    assert classes == {
        "price-change": "alpha",
        "version-change": "alpha",
        "broken": "beta",
        "healthy-fleet-no-incident": "beta",
        "price-again": "gamma",
    }


def test_an_outcome_without_a_corpus_takes_its_folders_name(tmp_path: Path) -> None:
    from triage.report.scorecard import corpus_name

    assert SYNTHETIC[0].corpus == "fixtures" and SYNTHETIC[3].corpus == "fixtures"
    assert replace(SYNTHETIC[0], corpus="generality_hard").corpus == "generality_hard"
    assert corpus_name(Path("bench/generality_field/")) == "generality_field"
    (tmp_path / "here").mkdir()
    assert corpus_name(tmp_path / "here" / ".") == "here"
    assert corpus_name(tmp_path / "here" / "..") == tmp_path.name


def test_the_scorecard_tool_names_each_corpus_after_its_folder(tmp_path: Path) -> None:
    from tools import scorecard as tool

    work = tmp_path / "work"
    assert tool.corpus_folders(work) == {
        "fixtures": work / "fixtures",
        "generality": work / "generality",
        "generality_hard": work / "generality_hard",
        "generality_indep": work / "generality_indep",
        "generality_field": work / "generality_field",
        "generality_verdict": work / "generality_verdict",
    }
    # The run itself on a small stand-in: one bundled fixture, one field incident, no generators.
    bundled = tmp_path / "bundled"
    _copy("price-change", bundled / "price-change.yaml")
    work.mkdir()
    assert tool.generate(work, corpora=(), fixtures=bundled) == ["fixtures"]
    _copy("version-change", work / "generality_field" / "v.yaml", **{"cause: version_change": "cause: none"})
    out = tmp_path / "scorecard.md"
    assert tool.replay(work, ["fixtures", "generality_field"], out) == 1
    md = out.read_text(encoding="utf-8")
    assert "| price-change | fixtures | cost_up |" in md and "| version-change | generality_field |" in md
    assert "(`generality_field/v.yaml`)" in md  # paths as the scorecard's reader would regenerate them
    assert str(tmp_path) not in md


def test_verdict_accuracy_counts_only_fixtures_that_name_a_verdict() -> None:
    named = [
        replace(SYNTHETIC[0], verdict="cause", expected_verdict="cause"),
        replace(SYNTHETIC[1], verdict="ambiguous", expected_verdict="cause"),
        replace(SYNTHETIC[2], verdict="no_incident", expected_verdict=None),
    ]
    t = totals(named)
    assert (t.verdicts_right, t.verdicts_expected) == (1, 2)
    md = render_scorecard(named, "md", GENERATED)
    assert "| verdict accuracy | 50.0% (1 of 2) |" in md
    assert "| ambiguous (expected cause) |" in md
    assert "| no_incident |" in md
