"""The verdict corpus writer (`tools.generality_verdict`): deterministic, loadable, complete.

It does not replay the fixtures through the triage: they measure the triage, and a test that
tuned them to pass would measure nothing. It checks what the writer promises: the same bytes
on every run, files the fixture loader accepts, an expected verdict in each, unique names,
and every verdict present.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

from signals.fixture import load_fixture
from tools.generality_verdict import main

VERDICTS = ("cause", "ambiguous", "unexplained", "no_incident")


def _write(out: Path) -> dict[str, bytes]:
    assert main(["--out", str(out)]) == 0
    return {p.name: p.read_bytes() for p in sorted(out.glob("*.yaml"))}


def test_the_corpus_is_deterministic_loadable_and_complete(tmp_path: Path) -> None:
    first = _write(tmp_path / "a")
    second = _write(tmp_path / "b")
    assert first == second, "a rerun must write byte-identical files"
    assert len(first) >= 30

    names: list[str] = []
    verdicts: Counter[str] = Counter()
    for filename in first:
        fixture = load_fixture(str(tmp_path / "a" / filename))
        assert fixture.expect is not None, f"{filename}: no expect block"
        assert fixture.expect.verdict in VERDICTS, f"{filename}: no verdict"
        assert fixture.at - fixture.start >= 2 * 3600, f"{filename}: less than 2 h before `at`"
        if fixture.expect.verdict == "cause":
            assert fixture.expect.cause, f"{filename}: verdict cause names no cause"
        if fixture.expect.verdict in ("no_incident", "unexplained"):
            assert fixture.expect.no_cause, f"{filename}: {fixture.expect.verdict} must say cause: none"
        if fixture.expect.verdict == "ambiguous":
            assert fixture.expect.cause is None and not fixture.expect.no_cause, filename
        if fixture.expect.verdict != "no_incident":
            assert "tune_sampling" in fixture.expect.forbidden, f"{filename}: tune_sampling not forbidden"
        names.append(fixture.name)
        verdicts[fixture.expect.verdict] += 1

    assert len(names) == len(set(names)), "fixture names must be unique"
    assert set(verdicts) == set(VERDICTS), f"every verdict must be covered: {dict(verdicts)}"
