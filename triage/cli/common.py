"""What every `triage` command shares: exit codes, usage errors (both from `triage.inputs`, which
the TUI reads too), and the command record.

This module and every command's own module (its arguments and help) are what each start
of `triage` imports, so they use the standard library only: `triage --help` and each
command's `--help` start without numpy, networkx, pydantic or any client. What a command
needs to run lives in its handler, under `triage.cli.handlers`, imported when it runs.
Every input problem surfaces as `UsageError` (or an `InputError` naming file and line),
which `main` turns into one line on stderr and exit code 2.
"""

from __future__ import annotations

import argparse
import gc
import importlib
import os
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TextIO, TypeAlias

from triage.inputs.errors import (
    EXIT_FAILED,
    EXIT_INTERNAL,
    EXIT_INTERRUPTED,
    EXIT_OK,
    EXIT_UNAVAILABLE,
    EXIT_USAGE,
    SourceArgError,
    UsageError,
)
from triage.inputs.options import add_playbook_option


class MissingSubcommand(Exception):
    """A command group (`signals`, `playbooks`) run without its subcommand; main prints the group's help."""


Subparsers: TypeAlias = "argparse._SubParsersAction[argparse.ArgumentParser]"
Handler: TypeAlias = Callable[[argparse.Namespace, TextIO], int]


@dataclass(frozen=True)
class Command:
    """One `triage` subcommand: how it adds its parser, and where its handler lives.

    Each command module holds one, so a command's arguments and help live together and
    main only has to list them. The handler is named as `module:function` and imported
    when the command runs: building every parser (for `--help`, or to pick the command)
    costs no more than argparse.
    """

    name: str
    add: Callable[[Subparsers], None]
    handler: str

    def load(self) -> Handler:
        """The handler function, its module imported now.

        The cyclic collector pauses while the handler's libraries load: what they allocate
        (modules, classes, schemas) lives as long as the process, and collecting while it
        grows only walks it again and again, a tenth of a fixture diagnosis's start. It is
        then frozen out of later collections.
        """
        module, _, function = self.handler.partition(":")
        loaded = sys.modules.get(module)
        if loaded is None:
            collecting = gc.isenabled()
            gc.disable()
            try:
                loaded = importlib.import_module(module)
            finally:
                if collecting:
                    gc.freeze()
                    gc.enable()
        handler: Handler = getattr(loaded, function)
        return handler

    def run(self, args: argparse.Namespace, out: TextIO) -> int:
        return self.load()(args, out)


def is_terminal(stream: TextIO) -> bool:
    """A terminal that understands escape codes: not a pipe or a file, and not TERM=dumb."""
    if os.environ.get("TERM") == "dumb":
        return False
    isatty = getattr(stream, "isatty", None)
    return bool(isatty and isatty())


def use_color(stream: TextIO) -> bool:
    """Colour on a terminal, unless NO_COLOR is set (https://no-color.org) or TERM is dumb."""
    return not os.environ.get("NO_COLOR") and is_terminal(stream)


def write_output(path: str, text: str, flag: str) -> None:
    try:
        Path(path).write_text(text, encoding="utf-8")
    except OSError as exc:
        raise UsageError(f"{flag} {path}: {exc.strerror}") from None


__all__ = [
    "EXIT_FAILED",
    "EXIT_INTERNAL",
    "EXIT_INTERRUPTED",
    "EXIT_OK",
    "EXIT_UNAVAILABLE",
    "EXIT_USAGE",
    "Command",
    "Handler",
    "MissingSubcommand",
    "SourceArgError",
    "Subparsers",
    "UsageError",
    "add_playbook_option",
    "is_terminal",
    "use_color",
    "write_output",
]
