"""The command line: formats, exit codes, and one clear line for every bad input."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from promserver import require_prometheus_binaries

from triage.cli.common import EXIT_FAILED, EXIT_OK, EXIT_USAGE
from triage.cli.main import main

ROOT = Path(__file__).resolve().parents[2]
KV = str(ROOT / "fixtures" / "kv-pressure-long-context.yaml")


def run(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "triage.cli.main", *args],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env={**os.environ, **(env or {})},
        timeout=120,
    )


def test_diagnose_text_is_plain_when_piped() -> None:
    result = run("diagnose", "--fixture", KV)
    assert result.returncode == EXIT_OK, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0].startswith("VERDICT  kv_pressure (resource)")
    assert lines[1].startswith("TPOT SLOW")
    assert "\x1b[" not in result.stdout
    assert "✗ scale_out" in result.stdout and "FIRST ACTIONS" in result.stdout
    assert result.stderr == ""


def test_diagnose_json_contract(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["diagnose", "--fixture", KV, "--format", "json"]) == EXIT_OK
    data = json.loads(capsys.readouterr().out)
    assert set(data) >= {"symptom", "at", "causes", "first_actions", "forbidden", "missing_signals"}
    assert data["symptom"] == "tpot_slow" and data["at"].endswith("Z")
    top = data["causes"][0]
    assert top["cause"] == "kv_pressure" and top["layer"] == "resource" and 0 < top["score"] <= 1
    kv = next(e for e in top["evidence"] if e["signal"] == "kv_usage_ratio")
    assert kv["holds"] is True and kv["value"] >= 0.95 and kv["baseline"] < 0.7
    assert {"signal", "value", "baseline", "check", "holds"} <= set(kv)
    assert {f["action"] for f in data["forbidden"]} >= {"scale_out", "raise_gpu_memory_utilization"}
    assert all(f["reason"] for f in data["forbidden"])
    assert all({"id", "text"} <= set(a) for a in data["first_actions"])


def test_diagnose_markdown(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["diagnose", "--fixture", KV, "--format", "markdown"]) == EXIT_OK
    out = capsys.readouterr().out
    assert out.startswith("## Triage: tpot_slow → **kv_pressure**")
    assert "### First actions" in out and "**scale_out**" in out and "| requires: `kv_usage_ratio" in out


def test_symptom_and_at_override(capsys: pytest.CaptureFixture[str]) -> None:
    assert (
        main(["diagnose", "--fixture", KV, "--format", "json", "--symptom", "ttft_slow", "--at", "30m"]) == 0
    )
    data = json.loads(capsys.readouterr().out)
    assert data["symptom"] == "ttft_slow" and data["at"] == "2026-10-14T13:30:00Z"
    assert data["causes"] == []  # thirty minutes in, nothing had happened yet


@pytest.mark.parametrize(
    ("args", "fragment"),
    [
        (["diagnose", "--fixture", "nope.yaml"], "nope.yaml:0: (file): no such file"),
        (
            ["diagnose", "--fixture", KV, "--symptom", "ttft_slw"],
            "unknown symptom 'ttft_slw' (did you mean ttft_slow?)",
        ),
        (["diagnose", "--fixture", KV, "--at", "9h"], "--at: 2026-10-14T22:00:00Z is outside the data"),
        (["diagnose", "--fixture", KV, "--at", "noon"], "--at:"),
        (["replay", KV, "--every", "5s"], "shorter than the fixture's interval"),
        (["replay", KV, "--every", "often"], "--every:"),
        (["test", "no/such/dir"], "no such file or folder"),
        (["test", KV, "--jobs", "0"], "--jobs: must be at least 1, got 0"),
        (["diagnose", "--fixture", KV, "--playbooks", "/nonexistent"], "no such playbook folder"),
    ],
)
def test_bad_usage_is_one_line_and_exit_2(
    args: list[str], fragment: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(args) == EXIT_USAGE
    captured = capsys.readouterr()
    assert fragment in captured.err
    assert "Traceback" not in captured.err and captured.out == ""


def test_argparse_errors_exit_2() -> None:
    result = run("diagnose")
    assert result.returncode == EXIT_USAGE and "--fixture" in result.stderr
    result = run("diagnose", "--fixture", KV, "--format", "yaml")
    assert result.returncode == EXIT_USAGE and "invalid choice" in result.stderr


def test_bad_fixture_is_located(tmp_path: Path) -> None:
    text = Path(KV).read_text().replace("symptom: tpot_slow", "symptom: tpot_slo")
    bad = tmp_path / "bad.yaml"
    bad.write_text(text)
    result = run("diagnose", "--fixture", str(bad))
    line = text.splitlines().index("symptom: tpot_slo") + 1
    assert result.returncode == EXIT_USAGE
    assert result.stderr.strip() == (
        f"triage: {bad}:{line}: symptom: unknown symptom 'tpot_slo' (did you mean tpot_slow?)"
    )


def test_alias_bomb_fixture_exits_2(tmp_path: Path) -> None:
    lines = ["a0: &a0 [x, x, x, x, x, x, x, x, x, x]"]
    lines += [f"a{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * 10) + "]" for i in range(1, 9)]
    bomb = tmp_path / "bomb.yaml"
    bomb.write_text("\n".join(lines))
    result = run("diagnose", "--fixture", str(bomb))
    assert (
        result.returncode == EXIT_USAGE and "alias bomb" in result.stderr and "Traceback" not in result.stderr
    )


def test_replay_text_and_json(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["replay", KV, "--every", "5m"]) == EXIT_OK
    out = capsys.readouterr().out
    assert out.splitlines()[0].startswith("kv-pressure-long-context: ")
    assert "final: kv_pressure; first on top at +" in out and "after the onset" in out
    assert main(["replay", KV, "--every", "5m", "--format", "json"]) == EXIT_OK
    data = json.loads(capsys.readouterr().out)
    assert data["summary"]["top_cause"] == "kv_pressure"
    assert data["summary"]["onset_to_settled_seconds"] > 0
    assert data["steps"][0]["causes"] == [] and data["steps"][-1]["causes"][0]["cause"] == "kv_pressure"


def test_test_command_passes_and_fails(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["test", KV]) == EXIT_OK
    assert "1 passed, 0 failed" in capsys.readouterr().out
    wrong = tmp_path / "wrong.yaml"
    wrong.write_text(
        Path(KV)
        .read_text()
        .replace("cause: kv_pressure", "cause: routing_imbalance")
        .replace("name: kv-pressure-long-context", "name: wrong-expectation")
    )
    assert main(["test", KV, str(wrong)]) == EXIT_FAILED
    out = capsys.readouterr().out
    assert (
        f"FAIL  {wrong}" in out
        and "expected top cause routing_imbalance (not ranked), got kv_pressure" in out
    )
    assert "1 passed, 1 failed" in out


def test_test_command_reports_the_same_whatever_the_jobs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Fixtures load in several processes and are reported in path order all the same: from the
    command line (forked) and called in a process that runs threads (from a fork server). The
    scorecard, whose timelines the loading processes replay, is the same too."""
    require_prometheus_binaries()
    folder = tmp_path / "corpus"
    folder.mkdir()
    (folder / "a-kv.yaml").write_text(Path(KV).read_text())
    (folder / "b-raw.yaml").write_text((ROOT / "fixtures" / "stack-triton-raw.yaml").read_text())
    (folder / "c-broken.yaml").write_text("name: broken\nlevel: [\n")
    (folder / "d-wrong.yaml").write_text(
        Path(KV)
        .read_text()
        .replace("cause: kv_pressure", "cause: routing_imbalance")
        .replace("name: kv-pressure-long-context", "name: wrong-expectation")
    )
    (folder / "e-twice.yaml").write_text(Path(KV).read_text())

    def lines(out: str) -> list[str]:
        """The report without its time and its scorecard's lines (`scorecard written`, totals)."""
        return [
            line
            for line in out.splitlines()
            if not line.endswith("s)") and not line.startswith(("scorecard written", "  overall", "  corpus"))
        ]

    def card(path: Path) -> list[str]:
        return [line for line in path.read_text().splitlines() if "generated" not in line]

    cards = tmp_path / "one.md", tmp_path / "two.md"
    one = run("test", str(folder), "--jobs", "1", "--scorecard", str(cards[0]))
    two = run("test", str(folder), "--jobs", "2", "--scorecard", str(cards[1]))
    assert one.returncode == two.returncode == EXIT_FAILED, one.stderr + two.stderr
    assert lines(two.stdout) == lines(one.stdout)
    assert card(cards[1]) == card(cards[0])
    kv = next(line for line in card(cards[0]) if line.startswith("| kv-pressure-long-context |"))
    assert re.search(r"\| \d+m?\d*s? \| pass \|$", kv), kv  # its time to the right answer, replayed
    marks = [line.split()[0] for line in one.stdout.splitlines() if line[:1].isupper()]
    assert marks == ["PASS", "PASS", "ERROR", "FAIL", "ERROR"], one.stdout
    assert "b-raw.yaml  " in one.stdout and "is also used by" in one.stdout
    assert "2 passed, 3 failed, 0 skipped" in one.stdout
    sleeper = threading.Thread(target=time.sleep, args=(0.5,))
    sleeper.start()
    assert main(["test", str(folder), "--jobs", "2"]) == EXIT_FAILED
    sleeper.join()
    assert lines(capsys.readouterr().out) == lines(one.stdout)


def test_test_command_reports_duplicate_names(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    copy = tmp_path / "copy.yaml"
    copy.write_text(Path(KV).read_text())
    assert main(["test", KV, str(copy)]) == EXIT_FAILED
    assert "is also used by" in capsys.readouterr().out


def test_playbooks_check(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["playbooks", "check", "--playbooks", str(ROOT / "playbooks")]) == EXIT_OK
    assert "ok: 6 symptoms" in capsys.readouterr().out
    for f in (ROOT / "playbooks").glob("*.yaml"):
        (tmp_path / f.name).write_text(f.read_text())
    broken = tmp_path / "actions.yaml"
    broken.write_text(broken.read_text().replace("  compare_replicas:", "  compare_replica:"))
    assert main(["playbooks", "check", "--playbooks", str(tmp_path)]) == EXIT_FAILED
    captured = capsys.readouterr()
    lines = captured.out.strip().splitlines()
    assert len(lines) >= 2 and all(": unknown action 'compare_replicas'" in line for line in lines)
    assert "problems in" in captured.err


def test_help_teaches() -> None:
    result = run("--help")
    assert result.returncode == 0 and "examples:" in result.stdout and "exit codes:" in result.stdout
    result = run("diagnose", "--help")
    assert "--at" in result.stdout and "offset" in result.stdout


def test_color_only_on_a_terminal_and_never_with_no_color() -> None:
    from triage.cli.common import use_color

    class Tty:
        def isatty(self) -> bool:
            return True

    env = dict(os.environ)
    try:
        os.environ.pop("NO_COLOR", None)
        os.environ["TERM"] = "xterm"
        assert use_color(Tty()) is True  # type: ignore[arg-type]
        os.environ["NO_COLOR"] = "1"
        assert use_color(Tty()) is False  # type: ignore[arg-type]
    finally:
        os.environ.clear()
        os.environ.update(env)


BAD_FIXTURES = {
    "malformed": ("name: x\ninput_series: [\n", "malformed YAML"),
    "unknown-key": (
        "name: x\nstart: 2026-10-14T14:00:00Z\nsymptoms: ttft_slow\ninput_series: []\n",
        "unknown key",
    ),
    "unknown-signal": (
        "name: x\nstart: 2026-10-14T14:00:00Z\ninput_series:\n  - {series: kv_use, values: '1x3'}\n",
        "unknown signal",
    ),
    "unknown-symptom": (
        "name: x\nstart: 2026-10-14T14:00:00Z\nsymptom: slow\ninput_series:\n"
        "  - {series: request_rate, values: '1x3'}\n",
        "unknown symptom",
    ),
    "no-values": (
        "name: x\nstart: 2026-10-14T14:00:00Z\ninput_series:\n  - {series: request_rate}\n",
        "no values",
    ),
    "notation": (
        "name: x\nstart: 2026-10-14T14:00:00Z\ninput_series:\n  - {series: request_rate, values: '1x'}\n",
        "not a number",
    ),
    "nan": (
        "name: x\nstart: 2026-10-14T14:00:00Z\ninput_series:\n  - {series: request_rate, values: '1 NaN'}\n",
        "NaN and Inf",
    ),
    "no-series": ("name: x\nstart: 2026-10-14T14:00:00Z\n", "input_series: missing"),
    "at-outside": (
        "name: x\nstart: 2026-10-14T14:00:00Z\nat: 2h\ninput_series:\n"
        "  - {series: request_rate, values: '1x3'}\n",
        "outside the data",
    ),
    "deep": ("a: " + "[" * 5000 + "]" * 5000 + "\n", "nesting deeper than"),
    "unknown-cause": (
        "name: x\nstart: 2026-10-14T14:00:00Z\ninput_series:\n  - {series: request_rate, values: '1x3'}\n"
        "expect: {cause: kv_pressur}\n",
        "did you mean kv_pressure",
    ),
}


@pytest.mark.parametrize("kind", sorted(BAD_FIXTURES))
def test_every_bad_fixture_is_one_located_line_and_exit_2(
    kind: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    text, fragment = BAD_FIXTURES[kind]
    path = tmp_path / f"{kind}.yaml"
    path.write_text(text)
    assert main(["diagnose", "--fixture", str(path)]) == EXIT_USAGE
    err = capsys.readouterr().err
    assert err.startswith(f"triage: {path}:"), err
    assert fragment in err and "Traceback" not in err
    assert len(err.strip().splitlines()) == 1


def test_rules_to_stdout_and_to_a_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    import shutil

    assert main(["rules", "--selector", '{namespace="llm"}', "--replica-label", "pod"]) == EXIT_OK
    text = capsys.readouterr().out
    assert "\ngroups:" in text and "alert: TTFTP99High" in text and "alert: TPOTP99High" in text
    assert 'namespace="llm"' in text and "by (pod" in text
    target = tmp_path / "rules.yml"
    assert main(["rules", "-o", str(target)]) == EXIT_OK
    assert (
        f"wrote 77 rules to {target}" in capsys.readouterr().err or target.read_text().count("- record:") > 0
    )
    promtool = shutil.which("promtool")
    if promtool:
        result = subprocess.run(
            [promtool, "check", "rules", str(target)], capture_output=True, text=True, timeout=60
        )
        assert result.returncode == 0, result.stdout + result.stderr
    assert main(["rules", "--replica-label", "9bad"]) == EXIT_USAGE
    assert "--replica-label" in capsys.readouterr().err


def test_test_command_writes_junit_and_scorecard(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    import xml.etree.ElementTree as ET

    wrong = tmp_path / "wrong.yaml"
    wrong.write_text(
        Path(KV)
        .read_text()
        .replace("cause: kv_pressure", "cause: routing_imbalance")
        .replace("name: kv-pressure-long-context", "name: wrong-expectation")
    )
    junit, card = tmp_path / "junit.xml", tmp_path / "card.html"
    code = main(["test", KV, str(wrong), "--junit", str(junit), "--scorecard", str(card)])
    assert code == EXIT_FAILED
    capsys.readouterr()
    suite = ET.parse(junit).getroot().find("testsuite")
    assert suite is not None and suite.get("tests") == "2" and suite.get("failures") == "1"
    failure = suite.find("testcase[@name='wrong-expectation']/failure")
    assert failure is not None and "expected top cause routing_imbalance" in (failure.get("message") or "")
    html = card.read_text()
    assert "<table" in html and "50.0%" in html and "wrong-expectation" in html
    assert main(["test", KV, "--scorecard", str(tmp_path / "card.txt")]) == EXIT_USAGE
    assert "--scorecard" in capsys.readouterr().err


def test_report_command(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    html, md = tmp_path / "r.html", tmp_path / "r.md"
    assert main(["report", KV, "-o", str(html), "--every", "5m"]) == EXIT_OK
    assert main(["report", KV, "-o", str(md)]) == EXIT_OK
    assert "wrote" in capsys.readouterr().out
    page = html.read_text()
    assert page.lstrip().lower().startswith("<!doctype html>") and 'class="chart"' in page
    assert "kv_pressure" in page and "http://" not in page.split("<body", 1)[1].split('xmlns="http://')[0]
    assert md.read_text().startswith("# Postmortem: kv-pressure-long-context")
    assert main(["report", KV, "-o", str(tmp_path / "r.pdf")]) == EXIT_USAGE
    assert ".html or .md" in capsys.readouterr().err
    assert main(["report", KV, "-o", str(html), "--every", "5s"]) == EXIT_USAGE
    assert "--every" in capsys.readouterr().err
    bad = tmp_path / "templates"
    bad.mkdir()
    (bad / "report.md.j2").write_text("{{ nope.missing }}")
    assert main(["report", KV, "-o", str(md), "--templates", str(bad)]) == EXIT_USAGE
    assert "--templates" in capsys.readouterr().err


def test_capacity_command(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    args = [
        "capacity",
        "--model",
        "llama-3.1-8b",
        "--gpu",
        "h100-80gb",
        "--peak-rate",
        "30",
        "--per-replica-rate",
        "4",
        "--format",
        "json",
    ]
    assert main(args) == EXIT_OK
    data = json.loads(capsys.readouterr().out)
    text = json.dumps(data)
    assert "131072" in text  # KV bytes per token of Llama 3.1 8B at 16 bits
    assert main([*args[:-2], "--redundancy", "2"]) == EXIT_OK
    assert "= 10 replicas" in capsys.readouterr().out  # the chapter's 30 / 4 -> 8, plus 2
    assert main(["capacity", "--list-presets"]) == EXIT_OK
    assert "mixtral-8x7b" in capsys.readouterr().out
    assert main(["capacity", "--model", "llama-3.1-8x", "--gpu", "h100-80gb"]) == EXIT_USAGE
    assert "did you mean llama-3.1-8b" in capsys.readouterr().err
