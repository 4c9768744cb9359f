"""No module of the three packages is over the size a newcomer can hold.

A module that must be longer says so in its docstring, in a sentence that starts
"Longer than 500 lines because"; this test holds every other one to 500.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
LIMIT = 500
EXCUSE = "Longer than 500 lines because"
MODULES = sorted(p for package in ("triage", "signals", "tui") for p in (ROOT / package).rglob("*.py"))


def test_the_packages_have_modules() -> None:
    assert len(MODULES) > 50


@pytest.mark.parametrize("path", MODULES, ids=lambda p: str(p.relative_to(ROOT)))
def test_a_module_is_at_most_500_lines_or_says_why(path: Path) -> None:
    text = path.read_text(encoding="utf-8")
    lines = text.count("\n")
    if lines <= LIMIT:
        return
    docstring = ast.get_docstring(ast.parse(text)) or ""
    where = path.relative_to(ROOT)
    assert EXCUSE in docstring, f"{where} has {lines} lines and its docstring does not say why"
