"""Python's cyclic garbage collector, paused while a live read turns replies into arrays.

A reply is parsed into a list of `[time, "value"]` lists per series before its samples
become arrays: a fleet's round creates millions of short-lived lists, each of which counts
towards the collector's next pass, and every pass walks every tracked object the process
holds. None of them is ever part of a cycle; reference counting frees them all. Measured in
turns with and without the pause (docs/benchmarks.md): a diagnosis of 1,000 replicas with
`triage rules` loaded took 9.2 s and 4.7 s, one of 32 replicas read raw 1.1 s and 0.82 s.

The pause is process-wide (the collector has one switch) and counted, so reads in several
threads at once (the webhook service's) resume collecting only when the last one ends, and
only if it was on before the first began. Reads that keep overlapping would keep it off for
good, so a read that ends while others go on collects once itself when the collector has
been off for longer than `LONGEST_PAUSE_S`.
"""

from __future__ import annotations

import gc
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

LONGEST_PAUSE_S = 30.0
"""How long overlapping reads may keep the collector off before one of them collects."""

_lock = threading.Lock()
_depth = 0
_resume = False
_since = 0.0


@contextmanager
def collection_paused() -> Iterator[None]:
    """No cyclic garbage collection while the block runs (in any thread of the process)."""
    global _depth, _resume, _since
    with _lock:
        if _depth == 0:
            _resume = gc.isenabled()
            _since = time.monotonic()
            gc.disable()
        _depth += 1
    try:
        yield
    finally:
        overdue = False
        with _lock:
            _depth -= 1
            if _depth == 0 and _resume:
                gc.enable()
            elif _depth > 0 and _resume and time.monotonic() - _since > LONGEST_PAUSE_S:
                overdue, _since = True, time.monotonic()
        if overdue:
            gc.collect()
