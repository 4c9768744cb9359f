"""A live read's progress line (`triage.cli.progress`): shown on a terminal only, only once the
read has run past its delay, rewritten no faster than its interval (but a round's last
answer always), erased at the end, and silent after that."""

from __future__ import annotations

import io
import threading

import pytest

from signals.prometheus import ReadProgress
from triage.cli.progress import TerminalProgress

ERASE = "\r\x1b[K"


class Terminal(io.StringIO):
    """A stream that says it is a terminal, as stderr on one does."""

    def isatty(self) -> bool:
        return True


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture(autouse=True)
def _a_capable_terminal(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TERM", "xterm-256color")


def test_nothing_shows_before_the_delay_then_the_count_does() -> None:
    stream, clock = Terminal(), Clock()
    progress = TerminalProgress(stream, "prometheus", delay=1.0, interval=0.1, clock=clock)
    clock.now += 0.5
    progress(ReadProgress(3, 40))
    assert stream.getvalue() == ""  # a read under a second shows nothing at all
    clock.now += 1.0
    progress(ReadProgress(4, 40))
    assert stream.getvalue() == f"{ERASE}prometheus: 4 of 40 requests answered, 2 s"


def test_a_burst_is_written_once_an_interval_but_a_rounds_last_answer_always() -> None:
    stream, clock = Terminal(), Clock()
    progress = TerminalProgress(stream, "prometheus", delay=0.0, interval=0.1, clock=clock)
    for answered in range(1, 40):
        progress(ReadProgress(answered, 40))  # all in the same instant
    assert stream.getvalue().count(ERASE) == 1
    progress(ReadProgress(40, 40))
    assert stream.getvalue().endswith("40 of 40 requests answered, 0 s")
    clock.now += 0.2
    progress(ReadProgress(41, 45))  # a second round, sent after the first
    assert stream.getvalue().endswith("41 of 45 requests answered, 0 s")


def test_the_line_is_erased_at_the_end_and_nothing_is_written_after() -> None:
    stream, clock = Terminal(), Clock()
    with TerminalProgress(stream, "prometheus", delay=0.0, interval=0.0, clock=clock) as progress:
        progress(ReadProgress(1, 1))
    assert stream.getvalue().endswith(ERASE)
    written = stream.getvalue()
    progress(ReadProgress(2, 2))  # a worker the deadline left behind, ending late
    assert stream.getvalue() == written


def test_a_read_that_never_showed_erases_nothing() -> None:
    stream, clock = Terminal(), Clock()
    with TerminalProgress(stream, "prometheus", delay=5.0, clock=clock) as progress:
        progress(ReadProgress(1, 2))
    assert stream.getvalue() == ""


@pytest.mark.parametrize("where", ["pipe", "dumb terminal"])
def test_a_pipe_or_a_dumb_terminal_gets_nothing(where: str, monkeypatch: pytest.MonkeyPatch) -> None:
    stream: io.StringIO = io.StringIO() if where == "pipe" else Terminal()
    if where == "dumb terminal":
        monkeypatch.setenv("TERM", "dumb")
    with TerminalProgress(stream, "prometheus", delay=0.0, interval=0.0) as progress:
        progress(ReadProgress(1, 2))
        progress(ReadProgress(2, 2))
    assert stream.getvalue() == ""


def test_threads_never_interleave_inside_a_line() -> None:
    stream = Terminal()
    progress = TerminalProgress(stream, "prometheus", delay=0.0, interval=0.0)
    threads = [
        threading.Thread(target=lambda: [progress(ReadProgress(i, 1000)) for i in range(200)])
        for _ in range(8)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    lines = stream.getvalue().split(ERASE)[1:]
    assert len(lines) == 1600
    assert all(line.startswith("prometheus: ") and line.endswith(" s") for line in lines)
