"""The exit codes and the two input errors every front end speaks (the command line and the TUI).

Standard library only, like everything a start of `triage` imports before its command runs.
"""

from __future__ import annotations

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_USAGE = 2
EXIT_UNAVAILABLE = 3
EXIT_INTERNAL = 70
EXIT_INTERRUPTED = 130


class UsageError(Exception):
    """A command-line value that cannot be used; printed as one line, exit 2."""


class SourceArgError(Exception):
    """A live-source option that cannot be used; the front end prints it and exits 2."""
