"""A live read's progress on a terminal: one line on stderr, rewritten in place, gone when the read ends.

A thousand replicas take Prometheus twenty seconds and more to answer, and a command that
says nothing for that long looks hung. So while a read is under way the command keeps one
line on stderr: whom it reads, how many of the requests sent have been answered, and for
how long. The line shows only on a terminal that can erase it (never in a pipe, a file or
a log, and never on stdout, so `--format json` pipes as before), and only once the read has
taken longer than `DELAY_S`: a fleet read in under a second shows nothing at all. It is
erased before the command writes anything else.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable
from types import TracebackType
from typing import TYPE_CHECKING, TextIO

from triage.cli.common import is_terminal

if TYPE_CHECKING:
    from signals.prometheus import ReadProgress

DELAY_S = 1.0
"""How long a read runs silent before its line appears."""
INTERVAL_S = 0.1
"""At most this often the line is rewritten (a round of forty requests ends in a burst), but
the answer that completes a round always shows."""
_ERASE = "\r\x1b[K"


class TerminalProgress:
    """The listener a live command gives its `PrometheusSource` (`progress=`), as a context
    manager that erases the line on the way out. Called from the round's worker threads; once
    closed it writes nothing more (a worker the deadline left behind may still end later)."""

    def __init__(
        self,
        stream: TextIO,
        what: str,
        *,
        delay: float | None = None,
        interval: float | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._stream = stream
        self._on = is_terminal(stream)
        self._what = what
        self._delay = DELAY_S if delay is None else delay
        self._clock = clock
        self._start = clock()
        self._written = -math.inf
        self._shown = False
        self._interval = INTERVAL_S if interval is None else interval
        self._lock = threading.Lock()

    def __call__(self, progress: ReadProgress) -> None:
        if not self._on:
            return
        now = self._clock()
        elapsed = now - self._start
        with self._lock:
            done = progress.answered >= progress.asked  # a round's last answer is always shown
            if not self._on or elapsed < self._delay or (now - self._written < self._interval and not done):
                return
            self._written = now
            self._shown = True
            self._stream.write(
                f"{_ERASE}{self._what}: {progress.answered} of {progress.asked} "
                f"request{'s' if progress.asked != 1 else ''} answered, {elapsed:.0f} s"
            )
            self._stream.flush()

    def close(self) -> None:
        """Erase the line, if one was shown, and show nothing more."""
        with self._lock:
            self._on = False
            if self._shown:
                self._stream.write(_ERASE)
                self._stream.flush()
                self._shown = False

    def __enter__(self) -> TerminalProgress:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()
