"""Reads of Prometheus shared between diagnoses: one fetch in flight per key, a breaker for outages.

Two things are read per moment and shared: the fleets (one discovery per moment, whatever
the groups) and the signal frames (one per fleet and moment: every group about the same
fleet at the same moment reads the same frame). In a storm that is one fetch per fleet
and moment instead of one per alert group. Entries live `ttl` seconds (a recent window
can still gain late samples) and at most `size` are kept.

A failure of Prometheus itself (unreachable, timing out, refusing, answering something
else than Prometheus) is remembered for `hold` seconds by a `Breaker` that both reads
share, and given to every diagnosis in that time without asking again: otherwise a
blackholed Prometheus would cost each waiting group a full timeout, one after another. A
failure that belongs to one key (no series in that window) is not shared.

`rounds` is held around each fetch: a semaphore shared by every reader of the service
(across processes too), so at most its value of fetches reach Prometheus at once. The
breaker is checked again once it is held, so diagnoses queued behind a failing fetch do
not each wait for their own.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Hashable
from contextlib import AbstractContextManager
from typing import Generic, TypeVar

from signals.errors import SignalError
from signals.prometheus import PrometheusError

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")


class Remembered(SignalError):
    """A recent Prometheus failure, given again without asking Prometheus."""

    def __init__(self, failure: PrometheusError) -> None:
        super().__init__(str(failure))
        self.kind = failure.kind


class Breaker:
    """The last failure of Prometheus itself, for `hold` seconds."""

    def __init__(self, hold: float = 5.0) -> None:
        self.hold = hold
        self._lock = threading.Lock()
        self._failure: tuple[float, PrometheusError] | None = None

    def check(self) -> None:
        """Raise the remembered failure while it is recent."""
        with self._lock:
            failure = self._failure
        if failure is not None and time.monotonic() - failure[0] <= self.hold:
            raise Remembered(failure[1])

    def failed(self, exc: PrometheusError) -> None:
        with self._lock:
            self._failure = (time.monotonic(), exc)

    def recovered(self) -> None:
        with self._lock:
            self._failure = None


class SharedFetches(Generic[K, V]):
    """Values by key, one fetch in flight per key, behind a shared breaker and round semaphore."""

    def __init__(
        self,
        breaker: Breaker,
        rounds: AbstractContextManager[object],
        size: int = 16,
        ttl: float = 60.0,
    ) -> None:
        self.breaker = breaker
        self.size = size
        self.ttl = ttl
        self._rounds = rounds
        self._lock = threading.Lock()
        self._values: dict[K, tuple[float, V]] = {}
        self._inflight: dict[K, threading.Lock] = {}

    def get(self, key: K, fetch: Callable[[], V]) -> tuple[V, bool]:
        """(value, fetched): `fetched` is False when a value another diagnosis fetched was reused."""
        with self._lock:
            gate = self._inflight.setdefault(key, threading.Lock())
        with gate:
            with self._lock:
                hit = self._values.get(key)
            if hit is not None and time.monotonic() - hit[0] <= self.ttl:
                return hit[1], False
            self.breaker.check()
            try:
                with self._rounds:
                    self.breaker.check()
                    value = fetch()
            except PrometheusError as exc:
                self.breaker.failed(exc)
                raise
            finally:
                with self._lock:
                    self._inflight.pop(key, None)
            self.breaker.recovered()
            with self._lock:
                self._values[key] = (time.monotonic(), value)
                for old in sorted(self._values, key=lambda k: self._values[k][0])[: -self.size]:
                    del self._values[old]
            return value, True


__all__ = ["Breaker", "Remembered", "SharedFetches"]
