"""Imports point one way, the core stays pure, and the modules come from this repository.

`triage`, `signals` and `tui` are also names of unrelated packages on the index; a
stray install of one of them must not shadow ours. import-linter checks the contracts
statically (pyproject.toml); this checks what actually gets imported at run time.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.parametrize("package", ["triage", "signals", "tui"])
def test_packages_come_from_this_repo(package: str) -> None:
    module = __import__(package)
    assert Path(module.__file__).resolve().parent == ROOT / package


CORE = [
    "triage.core.model",
    "triage.core.playbook",
    "triage.core.graph",
    "triage.core.checks",
    "triage.core.windows",
    "triage.core.walk",
    "triage.core.render",
]
NEVER_IN_CORE = [
    "prometheus_api_client",
    "requests",
    "urllib3",
    "textual",
    "http.client",
    "tui",
    "triage.cli.main",
    "uvicorn",
    "starlette",
    "fastapi",
    "triage.service",
]


def test_the_core_imports_no_io_clients() -> None:
    code = (
        "import sys\n"
        f"for m in {CORE!r}: __import__(m)\n"
        f"bad = [m for m in {NEVER_IN_CORE!r} if m in sys.modules]\n"
        "print(','.join(bad))\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=60
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == ""


def test_signals_knows_nothing_of_triage() -> None:
    code = (
        "import sys\nimport signals.fixture, signals.frame\n"
        "print([m for m in sys.modules if m.startswith('triage')])"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=60
    )
    assert result.stdout.strip() == "[]", result.stdout + result.stderr


def test_import_contracts_hold() -> None:
    result = subprocess.run(
        [str(Path(sys.executable).parent / "lint-imports")],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=120,
    )
    assert result.returncode == 0, result.stdout[-2000:]
    assert "broken" in result.stdout and "0 broken" in result.stdout


def test_types_and_lint_are_clean() -> None:
    bin_dir = Path(sys.executable).parent
    mypy = subprocess.run([str(bin_dir / "mypy")], capture_output=True, text=True, cwd=ROOT, timeout=600)
    assert mypy.returncode == 0, mypy.stdout[-3000:]
    ruff = subprocess.run(
        [str(bin_dir / "ruff"), "check", "."], capture_output=True, text=True, cwd=ROOT, timeout=120
    )
    assert ruff.returncode == 0, ruff.stdout[-3000:]
