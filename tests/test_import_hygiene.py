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


CLIENTS = ["prometheus_api_client", "requests", "urllib3", "http.client", "sqlite3"]
WEB = ["uvicorn", "starlette", "fastapi"]
PRODUCTS = ["triage.audit", "triage.capacity", "triage.report", "triage.service"]
ABOVE = [*WEB, "textual", "tui", "triage.cli"]


def _others(room: str) -> list[str]:
    return [product for product in PRODUCTS if product != room]


ROOMS: dict[str, list[str]] = {
    # The core is pure: no client, no web stack, no TUI, nothing above it.
    "triage.core": [
        *CLIENTS,
        *WEB,
        "textual",
        "tui",
        "triage.cli",
        *PRODUCTS,
        "triage.rules",
        "triage.replay",
        "triage.sources",
        "signals.prometheus",
        "signals.fixture",
    ],
    # Products build on the core and the shared edges, never on each other or on what is above.
    "triage.audit": [*ABOVE, *_others("triage.audit")],
    "triage.capacity": [*ABOVE, *_others("triage.capacity")],
    "triage.report": [*ABOVE, *_others("triage.report")],
    "triage.service": ["textual", "tui", "triage.cli", *_others("triage.service")],
    "triage.rules": [*ABOVE, *PRODUCTS],
    "triage.cli": [*WEB, "textual", "tui"],
    # `triage mcp`'s server: the MCP SDK loads Starlette and uvicorn for its HTTP transports (the
    # server speaks stdio), so only that module may bring them in; never the webhook service.
    "triage.cli.handlers.mcp": ["fastapi", "textual", "tui", "triage.service"],
}
"""Each room, and what importing every one of its modules must never bring in."""

APART = {"triage.cli": ["triage.cli.handlers.mcp"]}
"""Modules of a room checked as a room of their own, with what they alone may bring in."""


@pytest.mark.parametrize("room", sorted(ROOMS))
def test_a_room_imports_only_its_floors(room: str) -> None:
    """Import every module of the room in a fresh interpreter and list what must not be there."""
    code = (
        "import importlib, pkgutil, sys\n"
        f"room = importlib.import_module({room!r})\n"
        "names = [room.__name__]\n"
        "if hasattr(room, '__path__'):\n"
        "    names += [m.name for m in pkgutil.walk_packages(room.__path__, room.__name__ + '.')]\n"
        f"names = [n for n in names if n not in {APART.get(room, [])!r}]\n"
        "for name in names: importlib.import_module(name)\n"
        f"bad = sorted(m for m in {ROOMS[room]!r} if m in sys.modules)\n"
        "print(len(names), ','.join(bad))\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=60
    )
    assert result.returncode == 0, result.stderr
    count, _, bad = result.stdout.strip().partition(" ")
    assert int(count) >= 1
    assert bad == "", f"{room} brings in {bad}"


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
