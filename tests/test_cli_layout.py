"""The command line stays one small module per command, and one handler module per command.

A command's arguments and help live in its own module (light: `--help` imports nothing
heavy), and its handler in `triage.cli.handlers`, named by the command and imported when it
runs; these fail when a module outgrows that, when a command is registered twice or from
nowhere a reader would look, or when a handler it names does not exist.
"""

from __future__ import annotations

import argparse
import importlib
import pkgutil
import re
from collections import Counter
from pathlib import Path
from types import ModuleType

import pytest

import triage.cli
from triage.cli import main as core
from triage.cli.common import Command

CLI_DIR = Path(triage.cli.__file__).resolve().parent
MAX_LINES = 300


def test_no_cli_module_is_over_300_lines() -> None:
    sizes = {
        str(p.relative_to(CLI_DIR)): len(p.read_text(encoding="utf-8").splitlines())
        for p in sorted(CLI_DIR.rglob("*.py"))
    }
    assert "main.py" in sizes and len(sizes) > 20
    too_long = {name: n for name, n in sizes.items() if n > MAX_LINES}
    assert too_long == {}, f"over {MAX_LINES} lines: {too_long}"


def _help_commands(capsys: pytest.CaptureFixture[str]) -> list[str]:
    """The subcommands `triage --help` lists, read from its text as a user sees it."""
    with pytest.raises(SystemExit) as done:
        core.main(["--help"])
    assert done.value.code == 0
    text = capsys.readouterr().out
    section = text.split("\n  COMMAND\n", 1)[1].split("\n\n", 1)[0]
    return re.findall(r"^    ([a-z][a-z-]*)", section, flags=re.M)


def _command_modules() -> list[ModuleType]:
    names = [f"triage.cli.{m.name}" for m in pkgutil.iter_modules([str(CLI_DIR)])]
    return [importlib.import_module(n) for n in sorted(names)]


def _owned_commands(module: ModuleType) -> list[Command]:
    """The commands the module declares (a module-level record, not one it merely lists)."""
    return [value for name, value in vars(module).items() if isinstance(value, Command) and name.isupper()]


def _registered_names(command: Command) -> list[str]:
    parser = argparse.ArgumentParser(prog="triage")
    sub = parser.add_subparsers(dest="command")
    command.add(sub)
    return list(sub.choices)


def test_every_listed_command_is_registered_by_exactly_one_module(
    capsys: pytest.CaptureFixture[str],
) -> None:
    listed = _help_commands(capsys)
    assert {"diagnose", "replay", "test", "signals", "playbooks", "serve", "tui"} <= set(listed)
    assert len(listed) == len(set(listed))

    registrars: dict[str, list[str]] = {}
    for module in _command_modules():
        for command in _owned_commands(module):
            names = _registered_names(command)
            assert names == [command.name], f"{module.__name__} registers {names} as {command.name!r}"
            registrars.setdefault(command.name, []).append(module.__name__)

    assert sorted(registrars) == sorted(listed)
    twice = {name: mods for name, mods in registrars.items() if len(mods) != 1}
    assert twice == {}
    per_module = Counter(mods[0] for mods in registrars.values())
    assert all(n == 1 for n in per_module.values()), per_module
    assert [c.name for c in core.COMMANDS] == listed
    assert all(registrars[c.name][0].startswith("triage.cli.") for c in core.COMMANDS)


@pytest.mark.parametrize("command", core.COMMANDS, ids=lambda c: c.name)
def test_every_command_names_a_handler_that_exists(command: Command) -> None:
    module, _, function = command.handler.partition(":")
    assert function, f"{command.name}: the handler is named as module:function"
    if command.name not in ("serve", "tui"):  # their handlers are their own rooms' (service, TUI)
        assert module == f"triage.cli.handlers.{module.rsplit('.', 1)[1]}"
    handler = command.load()
    assert callable(handler) and handler.__module__ == module and handler.__name__ == function
