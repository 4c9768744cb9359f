"""The errors that cross the signals boundary.

Everything that reads human-written input raises `InputError`, which always knows
the file, line and key it is about, so the CLI can print one line a person can act on
instead of a traceback. Several problems can be collected and reported together.
"""

from __future__ import annotations


class InputError(Exception):
    """A problem in some input, located as `file:line: key: message`."""

    def __init__(self, source: str, line: int, key: str, message: str) -> None:
        super().__init__(f"{source}:{line}: {key}: {message}")
        self.source = source
        self.line = line
        self.key = key
        self.message = message

    def __str__(self) -> str:
        return f"{self.source}:{self.line}: {self.key}: {self.message}"


class InputErrors(Exception):
    """Several input problems found in one pass, in file and line order."""

    def __init__(self, problems: list[InputError]) -> None:
        self.problems = sorted(problems, key=lambda p: (p.source, p.line, p.key, p.message))
        super().__init__("\n".join(str(p) for p in self.problems))


class SignalError(Exception):
    """A signal source could not answer (unreachable, refused, malformed reply)."""
