"""`triage --help` and every command's `--help` start without the heavy libraries.

The parsers are built from light modules; a command's handler, with the libraries it
needs (numpy, networkx, pydantic, the Prometheus client, Textual, ...), is imported only
when the command runs. Each case runs the installed `triage` console script's entry
point in a fresh interpreter and lists what the help brought in: the check is on
imports, not on time (bench/startup.py times them), and on the help still being whole.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from triage.cli.main import build_parser

ROOT = Path(__file__).resolve().parent.parent
COLUMNS = "100"
"""The terminal width argparse wraps to, the same in the child and here."""

NEVER_FOR_HELP = (
    "pandas",
    "networkx",
    "textual",
    "numpy",
    "pydantic",
    "yaml",
    "jinja2",
    "rich",
    "requests",
    "prometheus_api_client",
    "promql_parser",
    "fastapi",
    "starlette",
    "uvicorn",
    "mcp",
    "mcp_types",
    "anyio",
)
"""Libraries no help may import (nor any of their submodules)."""

CHILD = r"""
import contextlib, io, json, sys
from importlib.metadata import entry_points

(entry,) = [e for e in entry_points(group="console_scripts") if e.name == "triage"]
main = entry.load()
argv = json.loads(sys.argv[1])
sys.argv = ["triage", *argv]
text = io.StringIO()
code = None
with contextlib.redirect_stdout(text):
    try:
        code = main(argv)
    except SystemExit as done:
        code = done.code
found = {"code": code, "help": text.getvalue(), "entry": entry.value, "modules": sorted(sys.modules)}
print(json.dumps(found))
"""


def _subparsers(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    actions = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    return dict(actions[0].choices) if actions else {}


def _help_cases() -> dict[str, tuple[list[str], argparse.ArgumentParser]]:
    """Every help a user can ask for: the top level, each command, each command of a group."""
    top = build_parser()
    cases = {"triage --help": (["--help"], top)}
    for name, parser in _subparsers(top).items():
        cases[f"triage {name} --help"] = ([name, "--help"], parser)
        for inner, inner_parser in _subparsers(parser).items():
            cases[f"triage {name} {inner} --help"] = ([name, inner, "--help"], inner_parser)
    return cases


CASES = _help_cases()


def _run_help(argv: list[str]) -> dict[str, object]:
    result = subprocess.run(
        [sys.executable, "-c", CHILD, json.dumps(argv)],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env={**os.environ, "COLUMNS": COLUMNS},
        timeout=60,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    data: dict[str, object] = json.loads(result.stdout.strip().splitlines()[-1])
    return data


def test_every_command_and_group_has_a_help_case() -> None:
    names = set(CASES)
    assert {"triage --help", "triage diagnose --help", "triage tui --help", "triage serve --help"} <= names
    assert {"triage signals check --help", "triage playbooks check --help", "triage mcp --help"} <= names
    assert len(names) >= 16


@pytest.mark.parametrize("case", sorted(CASES))
def test_help_imports_no_heavy_library_and_is_whole(case: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", COLUMNS)
    argv, parser = CASES[case]
    data = _run_help(argv)
    assert data["entry"] == "triage.cli.main:main"
    assert data["code"] == 0
    modules = data["modules"]
    assert isinstance(modules, list)
    heavy = sorted(m for m in modules if m.split(".")[0] in NEVER_FOR_HELP)
    assert heavy == [], f"{case} imports {sorted({m.split('.')[0] for m in heavy})}"
    text = str(data["help"])
    assert text.startswith("usage: triage"), text[:200]
    assert text == parser.format_help(), "the help printed is not the parser's whole help"
    for action in parser._actions:
        for option in action.option_strings:
            assert option in text, f"{case}: {option} missing from the help"
