"""glibc's malloc arenas are capped for the process (`signals.malloc`), and the user's own setting wins;
the pages a read frees are handed back to the system.

Each case runs in a fresh interpreter, since an arena, once made, lives as long as its
process: eight threads allocate at once while all are alive, and glibc's own account of its
arenas (`malloc_info`, one `<heap>` per arena) is counted.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from signals.malloc import ARENAS, _glibc, cap_arenas

ROOT = Path(__file__).resolve().parents[2]

ARENA_COUNT = r"""
import ctypes, re, sys, tempfile, threading
from signals.malloc import cap_arenas
capped = cap_arenas() if sys.argv[1] == "cap" else None
barrier = threading.Barrier(8)
held = []
def work():
    barrier.wait()
    # 100 kB: under glibc's mmap threshold, so it comes from the thread's arena
    held.append([bytearray(100_000) for _ in range(20)])
    barrier.wait()
threads = [threading.Thread(target=work) for _ in range(8)]
for t in threads: t.start()
for t in threads: t.join()
libc = ctypes.CDLL("libc.so.6")
libc.fopen.restype = ctypes.c_void_p
libc.fopen.argtypes = [ctypes.c_char_p, ctypes.c_char_p]
libc.malloc_info.argtypes = [ctypes.c_int, ctypes.c_void_p]
libc.fclose.argtypes = [ctypes.c_void_p]
with tempfile.NamedTemporaryFile(suffix=".xml") as out:
    stream = libc.fopen(out.name.encode(), b"w")
    assert libc.malloc_info(0, stream) == 0
    libc.fclose(stream)
    heaps = len(re.findall(r"<heap nr=", open(out.name).read()))
print(capped, heaps)
"""

needs_glibc = pytest.mark.skipif(not _glibc(), reason="the arena cap is glibc's; this C library is not")


def arenas_used(mode: str, env: dict[str, str] | None = None) -> tuple[str, int]:
    environment = {k: v for k, v in os.environ.items() if k != "MALLOC_ARENA_MAX"}
    environment.update(env or {})
    environment["PYTHONPATH"] = str(ROOT)
    done = subprocess.run(
        [sys.executable, "-c", ARENA_COUNT, mode],
        capture_output=True,
        text=True,
        check=True,
        env=environment,
        timeout=60,
    )
    capped, heaps = done.stdout.split()
    return capped, int(heaps)


@needs_glibc
def test_threads_share_the_capped_arenas() -> None:
    capped, heaps = arenas_used("cap")
    assert capped == "True"
    assert heaps <= ARENAS


@needs_glibc
def test_without_the_cap_each_thread_takes_an_arena() -> None:
    """The measure can fail: left to glibc, eight threads allocating at once make more arenas."""
    capped, heaps = arenas_used("leave")
    assert capped == "None"
    assert heaps > ARENAS


@needs_glibc
def test_the_users_malloc_arena_max_wins() -> None:
    capped, heaps = arenas_used("cap", {"MALLOC_ARENA_MAX": "4"})
    assert capped == "False"
    assert ARENAS < heaps <= 4


def test_a_cap_below_one_arena_is_refused() -> None:
    with pytest.raises(ValueError, match="at least 1"):
        cap_arenas(0)


def test_a_command_caps_the_arenas_and_help_does_not(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Capped once the arguments are parsed, before the command runs; `--help` never loads it."""
    import signals.malloc
    import triage.cli.main as cli

    called: list[int] = []
    monkeypatch.setattr(signals.malloc, "cap_arenas", lambda: called.append(1) or True)
    with pytest.raises(SystemExit):
        cli.main(["--help"])
    assert called == []
    assert cli.main(["test", str(tmp_path)]) == cli.EXIT_USAGE  # no fixture there: a usage error
    assert called == [1]
    assert "no fixture files found" in capsys.readouterr().err


FREED_PAGES = r"""
import sys
from signals.malloc import trim
def rss_mb():
    for line in open("/proc/self/status"):
        if line.startswith("VmRSS"):
            return int(line.split()[1]) // 1024
# 200 MB in 2 kB chunks from glibc's heap (a round's rows), one in fifty kept, scattered
held = [bytearray(2000) for _ in range(100_000)]
kept = held[::50]
del held
before = rss_mb()
done = trim() if sys.argv[1] == "trim" else None
print(done, before, rss_mb())
"""


def rss_after_freeing(mode: str) -> tuple[str, int, int]:
    done = subprocess.run(
        [sys.executable, "-c", FREED_PAGES, mode],
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        timeout=60,
    )
    trimmed, before, after = done.stdout.split()
    return trimmed, int(before), int(after)


@needs_glibc
def test_trim_hands_the_freed_pages_back() -> None:
    trimmed, before, after = rss_after_freeing("trim")
    assert trimmed == "True"
    assert before - after > 100  # most of the 196 MB freed among what is kept


@needs_glibc
def test_without_trim_the_freed_pages_stay_resident() -> None:
    """The measure can fail: freed among what is kept, glibc's pages stay with the process."""
    trimmed, before, after = rss_after_freeing("leave")
    assert trimmed == "None"
    assert before - after < 20
