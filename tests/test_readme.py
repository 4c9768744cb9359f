"""The README's quick-start commands are the ones CI runs, and both work."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def quick_start() -> list[str]:
    text = (ROOT / "README.md").read_text()
    section = text[text.index("## Quick start") : text.index("## A tour")]
    return re.findall(r"```sh\n(.+?)\n```", section)


def test_two_commands_and_ci_runs_the_test_one() -> None:
    commands = quick_start()
    assert len(commands) == 2
    run, test = commands
    assert "triage diagnose --fixture fixtures/" in run and "pytest" in test
    assert test in (ROOT / ".ci" / "run").read_text()


def test_the_main_job_command_diagnoses_the_bundled_incident() -> None:
    run = quick_start()[0]
    fixture = re.search(r"--fixture (\S+)", run)
    assert fixture is not None and (ROOT / fixture.group(1)).exists()
    result = subprocess.run(
        [str(Path(sys.executable).parent / "triage"), "diagnose", "--fixture", fixture.group(1)],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    assert "VERDICT  replica_down" in result.stdout
