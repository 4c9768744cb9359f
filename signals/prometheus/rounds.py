"""The round: all the queries of one refresh on a thread pool under ONE deadline, with retries.

Retries happen here, where the deadline is known: only transient failures, at most
`max_retries`, exponential backoff with jitter that never runs past the deadline.
Kept apart from the reads so the concurrency and timing rules live in one place.
"""

from __future__ import annotations

import logging
import random
import threading
import time
from collections.abc import Callable, Mapping
from concurrent.futures import Future, ThreadPoolExecutor, wait
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

import requests
from prometheus_api_client.exceptions import PrometheusApiClientException
from prometheus_api_client.prometheus_connect import PrometheusConnect

from signals.gcpause import collection_paused
from signals.prometheus.errors import PrometheusBadReply, PrometheusError, PrometheusUnavailable
from signals.prometheus.replies import _strings, _warnings
from signals.prometheus.streamed import read_reply
from signals.prometheus.transport import (
    _connection_reason,
    _DeadlineSession,
    _envelope,
    _Failure,
    _is_read_timeout,
    _Tally,
    _tls_reason,
)

_LOG = logging.getLogger("signals.prometheus")
"""One logger for the whole seam, named after it, whichever module logs."""

_BACKOFF_BASE_S = 0.1
_BACKOFF_CAP_S = 1.0
_MIN_ATTEMPT_S = 0.05
"""Below this much time left, another attempt cannot succeed; fail with what we know."""
_GRACE_S = 0.05
"""How long the round waits past the deadline for a worker's own, more precise, error."""

R = TypeVar("R")


@dataclass(frozen=True)
class ReadProgress:
    """How far a source's reads have come: requests answered (or failed) of those sent.

    Counted across rounds, over the source's life for the constructor's listener and over one
    load for `PrometheusSource.reading`'s, so a read that sends a second round (the recorded
    views found stale, read raw) shows one count that grows rather than two."""

    answered: int
    asked: int


Progress = Callable[[ReadProgress], None]
"""Called from the round's worker threads as each request of a round ends: it must be quick
and safe to call from several threads at once."""


class _Counts:
    """One listener's `ReadProgress`, counted under a lock and handed to it one call at a time
    and in order (a count never goes back)."""

    def __init__(self, listener: Progress) -> None:
        self._listener = listener
        self._lock = threading.Lock()
        self._answered = 0
        self._asked = 0

    def asked(self, count: int) -> None:
        self._tell(0, count)

    def answered(self) -> None:
        self._tell(1, 0)

    def _tell(self, answered: int, asked: int) -> None:
        with self._lock:  # held while the listener hears, so it hears the counts in order
            self._answered += answered
            self._asked += asked
            try:
                self._listener(ReadProgress(self._answered, self._asked))
            except Exception:  # a display must never fail a read
                _LOG.debug("progress listener failed", exc_info=True)


@dataclass(frozen=True)
class _Outcome(Generic[R]):
    value: R | None
    failure: _Failure | None
    http_requests: int
    warnings: list[str]
    infos: list[str]


@dataclass(frozen=True)
class _Job(Generic[R]):
    fetch: Callable[[PrometheusConnect], object]
    parse: Callable[[object], R]


class Rounds:
    """Runs jobs under one deadline; `PrometheusSource` supplies the session, client and limits."""

    url: str
    timeout: float
    max_retries: int
    _max_workers: int
    _session: _DeadlineSession
    _client: PrometheusConnect
    _listening: tuple[_Counts, ...]
    """Who hears each request of a round end: the constructor's listener, and each load
    `PrometheusSource.reading` watches. A round tells those listening when it was sent."""

    def _round(self, jobs: Mapping[str, _Job[R]]) -> dict[str, _Outcome[R]]:
        """Run the jobs on a pool; whatever is not done at the deadline is a timeout.

        The pool is shut down without waiting: a worker still blocked in a socket read
        ends by itself, since its read timeout is what was left of this same deadline. The
        cyclic garbage collector is paused meanwhile (`signals.gcpause`): the workers parse
        replies into millions of short-lived lists.
        """
        if not jobs:
            return {}
        with collection_paused():
            return self._run_round(jobs)

    def _run_round(self, jobs: Mapping[str, _Job[R]]) -> dict[str, _Outcome[R]]:
        deadline = time.monotonic() + self.timeout
        tallies = {name: _Tally() for name in jobs}
        pool = ThreadPoolExecutor(
            max_workers=min(len(jobs), self._max_workers), thread_name_prefix="prometheus"
        )
        futures: dict[str, Future[_Outcome[R]]] = {}
        listening = self._listening
        for counts in listening:
            counts.asked(len(jobs))

        def ended(_: object) -> None:
            for counts in listening:
                counts.answered()

        try:
            for name, job in jobs.items():
                futures[name] = pool.submit(self._run_job, job, deadline, tallies[name])
                futures[name].add_done_callback(ended)
            wait(futures.values(), timeout=max(0.0, deadline - time.monotonic()) + _GRACE_S)
        finally:
            pool.shutdown(wait=False, cancel_futures=True)
        outcomes: dict[str, _Outcome[R]] = {}
        for name, future in futures.items():
            if future.done() and not future.cancelled() and future.exception() is None:
                outcomes[name] = future.result()
                continue
            if future.done() and not future.cancelled():
                failure = _Failure(
                    f"internal error: {future.exception()!r}", kind="bug", family=PrometheusError
                )
            else:
                failure = self._timeout_failure()
            outcomes[name] = _Outcome(None, failure, tallies[name].sent, [], [])
        return outcomes

    def _timeout_failure(self) -> _Failure:
        return _Failure(
            f"timeout after {self.timeout}s", kind="timeout", family=PrometheusUnavailable, transient=True
        )

    def _run_job(self, job: _Job[R], deadline: float, tally: _Tally) -> _Outcome[R]:
        """Attempts with bounded retries, then parsing; never raises."""
        self._session.bind(deadline, tally)
        attempt = 0
        while True:
            attempt += 1
            try:
                envelope = self._attempt(job.fetch)
                value = job.parse(envelope.get("data"))
            except _Failure as failure:
                final = self._retry_or_give_up(failure, attempt, deadline)
                if final is None:
                    continue
                if tally.sent > 1:
                    final = final.noted(f"{tally.sent} attempts")
                _LOG.debug("prometheus %s: %s", self.url, final.message)
                return _Outcome(None, final, tally.sent, [], [])
            return _Outcome(value, None, tally.sent, _warnings(envelope), _strings(envelope.get("infos")))

    def _retry_or_give_up(self, failure: _Failure, attempt: int, deadline: float) -> _Failure | None:
        """None after sleeping the backoff when another attempt is worth it, else the final failure."""
        if not failure.transient or attempt > self.max_retries:
            return failure
        remaining = deadline - time.monotonic()
        delay = _backoff(attempt)
        if failure.retry_after is not None:
            if failure.retry_after > remaining:
                return failure.noted(
                    f"Retry-After {failure.retry_after:g}s is beyond the {self.timeout}s deadline"
                )
            delay = max(delay, failure.retry_after)
        if delay + _MIN_ATTEMPT_S > remaining:
            if failure.kind == "timeout":
                return self._timeout_failure()
            return failure
        _LOG.debug("prometheus %s: %s; retrying in %.2fs", self.url, failure.message, delay)
        time.sleep(delay)
        return None

    def _attempt(self, fetch: Callable[[PrometheusConnect], object]) -> dict[str, Any]:
        """One HTTP request (through the library or the Session), classified from the raw response."""
        self._session.forget_response()
        try:
            fetch(self._client)
        except requests.Timeout as exc:
            raise self._timeout_failure() from exc
        except requests.exceptions.SSLError as exc:
            raise _Failure(
                f"TLS error talking to {self.url}: {_tls_reason(exc)}",
                kind="tls",
                family=PrometheusUnavailable,
            ) from exc
        except requests.ConnectionError as exc:
            raise self._connection_lost(exc, "unreachable") from exc
        except (
            PrometheusApiClientException,
            requests.RequestException,
            ValueError,
            KeyError,
            TypeError,
        ) as exc:
            # With a response captured, this is the library's view of a bad reply
            # (non-200, HTML, JSON without `data`), and the raw response says more.
            # Without one, the request itself could not be made (bad URL, bad header).
            if self._session.captured() is None:
                raise _Failure(
                    f"request to {self.url} failed: {type(exc).__name__}",
                    kind="request",
                    family=PrometheusError,
                ) from exc
        response = self._session.captured()
        if response is None:
            raise _Failure(f"no response from {self.url}", kind="malformed", family=PrometheusBadReply)
        try:
            return _envelope(response, read_reply)
        except requests.RequestException as exc:
            # A query's body is read as it streams in (`signals.prometheus.streamed`): the
            # server may stall or drop the connection partway through it.
            raise self._connection_lost(exc, "reply cut off") from exc

    def _connection_lost(self, exc: requests.RequestException, what: str) -> _Failure:
        """A read that timed out, or `what` (the server unreachable, or gone mid-reply): transient."""
        if isinstance(exc, requests.Timeout) or (
            isinstance(exc, requests.ConnectionError) and _is_read_timeout(exc)
        ):
            return self._timeout_failure()
        return _Failure(
            f"{what}: {_connection_reason(exc)} ({self.url})",
            kind="unreachable",
            family=PrometheusUnavailable,
            transient=True,
        )


def _backoff(attempt: int) -> float:
    """Exponential backoff with "equal jitter", so concurrent retries don't arrive together."""
    ceiling = min(_BACKOFF_CAP_S, _BACKOFF_BASE_S * 2.0 ** (attempt - 1))
    return ceiling / 2 + random.uniform(0, ceiling / 2)
