"""glibc's malloc arenas, capped for a process that reads Prometheus from threads, and the
pages a read frees handed back to the system (`trim`).

glibc gives every thread that allocates while the others hold their arenas an arena of its
own, up to eight per core. A live read's round parses each reply in a worker thread
(`signals.prometheus.rounds`): megabytes of JSON and arrays per reply, freed into that
thread's arena when the round ends and rarely handed back to the system. A diagnosis of
200 replicas in a fresh process peaked at 340 MB with glibc's default and at 274 MB with
two arenas, in the same 4.9 s; once replies were read as they stream in, one of 1,000
replicas peaked at 295-298 MB with one arena and 309-348 MB with two, in the same 23 s
(docs/benchmarks.md). The values read are the same either way: only where the memory comes
from changes.

Set once as a process starts, before its first worker thread. A user's own
`MALLOC_ARENA_MAX` wins, and where the C library is not glibc nothing is done.
"""

from __future__ import annotations

import ctypes
import functools
import os

ARENAS = 1
"""The arenas a process may use: one, shared by the main thread and the round's workers (the
workers parse under the GIL, so they seldom wait for it)."""
M_ARENA_MAX = -8
"""glibc's `mallopt` parameter for the arena limit (malloc.h)."""


def cap_arenas(arenas: int = ARENAS) -> bool:
    """Cap glibc's malloc arenas at `arenas`; True when the cap was set.

    False, changing nothing, when the environment sets `MALLOC_ARENA_MAX` (glibc read it at
    start) or the C library is not glibc.
    """
    if arenas < 1:
        raise ValueError(f"arenas must be at least 1, got {arenas}")
    libc = None if os.environ.get("MALLOC_ARENA_MAX") else _libc()
    return libc is not None and bool(libc.mallopt(ctypes.c_int(M_ARENA_MAX), ctypes.c_int(arenas)))


def trim() -> bool:
    """Hand the free pages of glibc's heap back to the system (`malloc_trim(0)`); True when some
    were. A read frees far more than it keeps (replies, buckets, placed rows), scattered among
    what it keeps, so its freed pages would stay resident: after a live read of 1,000
    replicas, 60-90 MB of them. Nothing is done where the C library is not glibc."""
    libc = _libc()
    return libc is not None and bool(libc.malloc_trim(ctypes.c_size_t(0)))


@functools.cache
def _libc() -> ctypes.CDLL | None:
    """glibc, loaded once (a read trims after every round); None where the C library is not glibc."""
    if not _glibc():
        return None
    try:
        return ctypes.CDLL("libc.so.6")
    except OSError:
        return None


def _glibc() -> bool:
    """True when the C library is glibc (asked of the library itself, not read from a binary)."""
    try:
        version = os.confstr("CS_GNU_LIBC_VERSION")
    except (ValueError, OSError):
        return False
    return bool(version) and str(version).startswith("glibc")
