"""Diagnosing processes: the intake's GIL kept free of number crunching, at a lower priority.

`ProcessRunner` hands each work item to a process of a pool it starts with the service
(`warm`). A diagnosing process lowers its own priority, and exits as soon as the
service that started it is gone, however it died, so a crashed service leaves no
process behind.
"""

from __future__ import annotations

import contextlib
import logging
import multiprocessing
import os
import signal
import threading
import time
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from contextlib import AbstractContextManager

from signals.prometheus import PrometheusSource
from triage.service.store import WorkItem, WorkResult
from triage.service.worker import Diagnoser, DiagnoserSpec, run_safely

_LOG = logging.getLogger("triage.service")

_CHILD: tuple[Diagnoser, PrometheusSource] | None = None


def _child_init(spec: DiagnoserSpec, rounds: AbstractContextManager[object], parent: int) -> None:
    global _CHILD
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent decides when to stop
    _lower_priority()
    threading.Thread(
        target=_exit_with_parent, args=(parent,), name="triage-parent-watch", daemon=True
    ).start()
    _CHILD = (spec.diagnoser(rounds), spec.source())


DIAGNOSIS_NICENESS = 10
"""How much lower the diagnosing processes run than the intake (`nice`)."""


def _lower_priority() -> None:
    """Let the intake have the CPU first: it must answer Alertmanager in milliseconds, and a
    diagnosis that waits a few milliseconds more loses nothing. On a machine the storm keeps
    busy, diagnoses at the same priority as the intake make its tail latency grow several-fold
    (docs/benchmarks.md, "Two replicas on PostgreSQL")."""
    with contextlib.suppress(OSError):  # not permitted here: the same priority, as before
        os.nice(DIAGNOSIS_NICENESS)


def _exit_with_parent(parent: int, every: float = 0.5) -> None:
    """Exit as soon as the service that started this process is gone, however it died.

    A SIGKILLed service leaves its diagnosing processes to init, blocked for good on a
    pipe nobody writes to; each crash would leave one more. Reparenting changes the
    parent's pid, which this watch sees within `every` seconds.
    """
    while os.getppid() == parent:
        time.sleep(every)
    os._exit(1)


def _child_ready() -> None:
    """Nothing: submitted to make the pool start its processes (`ProcessRunner.warm`)."""


def _child_run(item: WorkItem) -> WorkResult:
    assert _CHILD is not None
    return run_safely(_CHILD[0], item, _CHILD[1])


class ProcessRunner:
    """Diagnoses in separate processes, so number crunching never holds the intake's GIL.

    The intake must answer in milliseconds while diagnoses parse Prometheus replies
    and walk the graph; in one process they compete for the GIL and the intake's
    tail latency grows tenfold. Processes are started with `spawn` (forking a
    threaded server is unsafe) and each keeps its own frame cache and source; they
    share one semaphore that bounds the fetch rounds in flight. A new pool gets a new
    semaphore, since a process that died holding the old one never gives it back.
    """

    def __init__(self, spec: DiagnoserSpec, processes: int) -> None:
        self._spec = spec
        self._processes = processes
        self._lock = threading.Lock()
        self._pool = self._new_pool()

    def _new_pool(self) -> ProcessPoolExecutor:
        context = multiprocessing.get_context("spawn")
        rounds = context.BoundedSemaphore(self._spec.fetch.max_concurrent)
        return ProcessPoolExecutor(
            max_workers=self._processes,
            mp_context=context,
            initializer=_child_init,
            initargs=(self._spec, rounds, os.getpid()),
        )

    def warm(self) -> None:
        """Start every diagnosing process now, not at the first alert.

        A process spends a second or two of CPU importing what it diagnoses with, before it
        can lower its priority; paid during a storm's first notifications, that is the
        intake's tail latency (docs/benchmarks.md, "Two replicas on PostgreSQL").
        """
        with self._lock:
            pool = self._pool
        for _ in range(self._processes):
            pool.submit(_child_ready)

    def run(self, item: WorkItem) -> WorkResult:
        with self._lock:
            pool = self._pool
        try:
            return pool.submit(_child_run, item).result()
        except BrokenProcessPool as exc:
            # A diagnosing process died (killed, out of memory): start new ones; the
            # item is stored as unavailable and retried like any other failure.
            _LOG.error("a diagnosis process died; starting new ones")
            with self._lock:
                if self._pool is pool:
                    self._pool = self._new_pool()
            reason = f"internal error: {type(exc).__name__}"
            return WorkResult(
                "unavailable", item.symptom, None, None, f"diagnosis failed ({reason})", reason, reason, 0
            )

    def close(self) -> None:
        with self._lock:
            pool = self._pool
        pool.shutdown(wait=True, cancel_futures=True)
