"""The one seam over prometheus-api-client: bounded, retried, classified Prometheus reads.

The triage answer is only useful within seconds, and prometheus-api-client 0.7.2 is
unsafe by default (see shared/reference/reliability.md §2.3): no timeout, a urllib3
`Retry` that turns a 503 into `RetryError` after ~6 s and obeys `Retry-After: 20` for a
minute, stalls that take `(retries+1) × timeout`, `JSONDecodeError` on an HTML 200 from
an auth proxy, and Prometheus's `warnings` (partial data) silently dropped.

So `PrometheusSource` owns the transport and uses the library where it is safe:

- It hands `PrometheusConnect` a `requests.Session` of its own (`_DeadlineSession`)
  whose every send gets `timeout = what is left of the round's deadline`, is counted,
  and keeps the raw `Response`. The adapter the library mounts with its own urllib3
  `Retry` is replaced by one with no retries at all, so retrying is done here, where
  the deadline is known. Replies are always read from that raw response, because the
  library reports HTTP errors as a repr of the body and raises on an HTML 200.
- `metric_names` goes through `PrometheusConnect.get_label_values`.
- Queries (`/api/v1/query`, `/api/v1/query_range`) do NOT go through
  `custom_query`/`custom_query_range`, but through the same Session directly: those
  return only `data.result`, dropping `warnings`, `infos` and `resultType`, and
  `custom_query_range` rounds start and end to whole seconds. Reading the envelope
  from the captured response as well would parse every reply twice: measured 4.1 s
  instead of 2.3 s for a round of 20 queries × 64 series × 1440 points.
- A *round* (all the queries of one refresh) runs on a thread pool under ONE deadline;
  the caller gets its answer by `timeout` (plus a few milliseconds) whatever the server
  does, and queries still unanswered then come back as `timeout after …`.
- Retries: only transient failures (connection refused/reset, timeouts, HTTP
  502/503/504), at most `max_retries`, exponential backoff with jitter that never runs
  past the deadline. A `Retry-After` longer than what is left is not waited for: the
  query fails at once saying so. 4xx and `status: error` replies (bad_data,
  execution, …) are final, and so is a 503 whose errorType is `timeout` (the server
  already spent its query timeout; asking again only doubles the load).

Everything that goes wrong becomes a `PrometheusError` (a `SignalError`) or, for
queries, `QueryResult.error`: one line a person can act on. Credentials are never
logged or put in messages: URLs are shown without user info and without the query.
"""

from __future__ import annotations

import email.utils
import json
import logging
import math
import random
import re
import ssl
import threading
import time
from collections.abc import Callable, Mapping
from concurrent.futures import Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from datetime import UTC, datetime
from os import PathLike
from typing import Any, Generic, TypeVar, cast
from urllib.parse import urlsplit, urlunsplit

import numpy as np
import numpy.typing as npt
import requests
import urllib3.exceptions
from prometheus_api_client.exceptions import PrometheusApiClientException
from prometheus_api_client.prometheus_connect import PrometheusConnect
from requests.adapters import HTTPAdapter
from urllib3.util.retry import Retry

from signals.errors import SignalError

_LOG = logging.getLogger(__name__)

FloatArray = npt.NDArray[np.float64]
SeriesData = tuple[dict[str, str], FloatArray, FloatArray]
"""(labels including `__name__` when present, sample times in epoch seconds, values)."""

TRANSIENT_STATUS = frozenset({502, 503, 504})
_BACKOFF_BASE_S = 0.1
_BACKOFF_CAP_S = 1.0
_MIN_ATTEMPT_S = 0.05
"""Below this much time left, another attempt cannot succeed; fail with what we know."""
_GRACE_S = 0.05
"""How long the round waits past the deadline for a worker's own, more precise, error."""
_MESSAGE_MAX = 300


class PrometheusError(SignalError):
    """A Prometheus read failed. `kind` says how, for callers that branch on it.

    Kinds: `timeout`, `unreachable`, `tls`, `auth`, `http_<code>`, `not_json`,
    `malformed`, `request`, `bug` (ours), or Prometheus's own errorType (`bad_data`, `execution`,
    `timeout`, `canceled`, `internal`, `unavailable`, …).
    """

    def __init__(self, message: str, *, kind: str) -> None:
        super().__init__(message)
        self.kind = kind


class PrometheusUnavailable(PrometheusError):
    """Prometheus could not be reached or did not answer in time (worth trying again later)."""


class PrometheusRejected(PrometheusError):
    """Prometheus (or a proxy in front of it) refused the request: auth, 4xx, query errors."""


class PrometheusBadReply(PrometheusError):
    """Something answered, but not like a Prometheus HTTP API (HTML page, broken JSON)."""


@dataclass(frozen=True)
class QueryResult:
    """The answer to one query of a round, successful or not.

    `series` holds `(labels, times, values)` with NaN/±Inf parsed from Prometheus's
    `"NaN"`/`"+Inf"` strings; an empty list means "no series", which is *absent*, not 0.
    Non-empty `warnings` mean the data may be partial. `error` is one line or None;
    `error_kind` is the matching `PrometheusError.kind`. `http_requests` counts the
    attempts this query made, retries included.
    """

    query: str
    series: list[SeriesData] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    error: str | None = None
    http_requests: int = 0
    error_kind: str | None = None
    infos: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return self.error is None

    @property
    def partial(self) -> bool:
        return bool(self.warnings)


@dataclass(frozen=True)
class ApiReply:
    """The `data` object of a JSON API reply, or the one-line reason there is none."""

    data: Mapping[str, Any] | None
    error: str | None


class _Failure(Exception):
    """One failed attempt, classified; becomes a `PrometheusError` or `QueryResult.error`."""

    def __init__(
        self,
        message: str,
        *,
        kind: str,
        family: type[PrometheusError],
        transient: bool = False,
        retry_after: float | None = None,
    ) -> None:
        super().__init__(_one_line(message))
        self.message = _one_line(message)
        self.kind = kind
        self.family = family
        self.transient = transient
        self.retry_after = retry_after

    def noted(self, note: str) -> _Failure:
        return _Failure(f"{self.message} ({note})", kind=self.kind, family=self.family)

    def as_error(self) -> PrometheusError:
        return self.family(self.message, kind=self.kind)


class _Tally:
    """Attempts made for one job; read by the round even if the job is still running."""

    def __init__(self) -> None:
        self.sent = 0


class _DeadlineSession(requests.Session):
    """A Session that bounds every send by the calling thread's deadline, counts and captures it.

    `PrometheusConnect` passes its own `timeout` (None by default) to every call, and
    some of its methods take no timeout at all; overriding `send` is the one place
    where every request, redirects included, goes through.

    `forced_verify` is an explicit CA bundle (or False): requests lets the
    `REQUESTS_CA_BUNDLE`/`CURL_CA_BUNDLE` environment override `Session.verify`
    (psf/requests#3829), which would silently ignore the bundle the user configured.
    """

    def __init__(self, default_timeout: float) -> None:
        super().__init__()
        self.forced_verify: str | bool | None = None
        self._default_timeout = default_timeout
        self._local = threading.local()
        self._lock = threading.Lock()
        self.total_sent = 0

    def bind(self, deadline: float, tally: _Tally) -> None:
        self._local.deadline = deadline
        self._local.tally = tally
        self._local.response = None

    def remaining(self) -> float:
        deadline: float | None = getattr(self._local, "deadline", None)
        if deadline is None:
            return self._default_timeout
        return deadline - time.monotonic()

    def forget_response(self) -> None:
        self._local.response = None

    def captured(self) -> requests.Response | None:
        response: requests.Response | None = getattr(self._local, "response", None)
        return response

    def send(self, request: requests.PreparedRequest, **kwargs: Any) -> requests.Response:
        remaining = self.remaining()
        if remaining <= 0:
            raise requests.Timeout("deadline reached before sending")
        kwargs["timeout"] = remaining
        if self.forced_verify is not None:
            kwargs["verify"] = self.forced_verify
        with self._lock:
            self.total_sent += 1
        tally: _Tally | None = getattr(self._local, "tally", None)
        if tally is not None:
            tally.sent += 1
        response = super().send(request, **kwargs)
        self._local.response = response
        return response


R = TypeVar("R")


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


class PrometheusSource:
    """Reads from a Prometheus-compatible HTTP API within a deadline; the only user of the client.

    `timeout` is the total deadline of one round (`range_queries`, `instant_query`,
    `metric_names`, `check`), not per request. `bearer_token` and `basic_auth` are
    mutually exclusive; `headers` are added to every request (e.g. `X-Scope-OrgID` for
    Mimir). `ca_bundle` is a CA file for a private CA; `verify=False` disables TLS
    checks and says so in the log, because it must never happen silently.
    Bad arguments (a non-http URL, step <= 0, end < start) are programming errors and
    raise `ValueError`, never echoing a credential.
    """

    def __init__(
        self,
        url: str,
        *,
        timeout: float = 5.0,
        bearer_token: str | None = None,
        basic_auth: tuple[str, str] | None = None,
        headers: Mapping[str, str] | None = None,
        ca_bundle: str | PathLike[str] | None = None,
        verify: bool = True,
        max_retries: int = 2,
        max_workers: int = 8,
    ) -> None:
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"not an http(s) URL: {_redact(url)!r}")
        if not (timeout > 0 and math.isfinite(timeout)):
            raise ValueError(f"timeout must be a positive number of seconds, got {timeout!r}")
        if max_retries < 0 or max_workers < 1:
            raise ValueError("max_retries must be >= 0 and max_workers >= 1")
        if bearer_token is not None and basic_auth is not None:
            raise ValueError("give bearer_token or basic_auth, not both")
        if bearer_token is not None and (
            not bearer_token
            or bearer_token != bearer_token.strip()
            or any(ord(c) < 32 or c == "\x7f" for c in bearer_token)
        ):
            raise ValueError("bearer_token is empty or contains whitespace or control characters")
        if ca_bundle is not None and not verify:
            raise ValueError("ca_bundle and verify=False contradict each other")
        self._base_url = url.rstrip("/")
        self.url = _redact(self._base_url)
        """The base URL without user info: safe to print, log and put in reports."""
        self.timeout = float(timeout)
        self.max_retries = max_retries
        self._max_workers = max_workers

        session = _DeadlineSession(self.timeout)
        session.headers["Accept"] = "application/json"
        session.headers.update(headers or {})
        if bearer_token is not None:
            session.headers["Authorization"] = f"Bearer {bearer_token}"
        if basic_auth is not None:
            session.auth = basic_auth
        if ca_bundle is not None:
            session.verify = session.forced_verify = str(ca_bundle)
        if not verify:
            session.verify = session.forced_verify = False
            _LOG.warning("TLS certificate verification is DISABLED for %s", self.url)
        self._session = session
        # The library mounts an adapter with its own Retry on `url`; we pass one that
        # never retries and then mount ours over it (same prefix replaces it) with a
        # pool as large as the thread pool, so concurrent queries reuse connections.
        self._client = PrometheusConnect(url=self._base_url, session=session, retry=Retry(0, read=False))
        session.mount(
            self._base_url,
            HTTPAdapter(pool_connections=1, pool_maxsize=max_workers, max_retries=Retry(0, read=False)),
        )

    def __repr__(self) -> str:
        return f"PrometheusSource({self.url!r}, timeout={self.timeout})"

    def __enter__(self) -> PrometheusSource:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Release pooled connections."""
        self._session.close()

    @property
    def http_requests(self) -> int:
        """HTTP requests sent so far by this source, retries and redirects included."""
        return self._session.total_sent

    # ---------------------------------------------------------------- public reads

    def metric_names(self) -> set[str]:
        """Every metric name Prometheus knows (`/api/v1/label/__name__/values`).

        Used to pick the catalog's PromQL variant that matches the exporters present.
        Raises `PrometheusError` on any failure.
        """
        job: _Job[set[str]] = _Job(lambda client: client.get_label_values("__name__"), _parse_names)
        outcome = self._round({"names": job})["names"]
        if outcome.failure is not None:
            raise outcome.failure.as_error()
        assert outcome.value is not None
        return outcome.value

    def range_queries(
        self, queries: Mapping[str, str], start: float, end: float, step: float
    ) -> dict[str, QueryResult]:
        """Run every query over `[start, end]` at `step` seconds, concurrently, within one deadline.

        Keys are the caller's names (signal names); each gets a `QueryResult`, failed
        queries included, so one bad query never hides the others.
        """
        if not (step > 0 and math.isfinite(step)):
            raise ValueError(f"step must be a positive number of seconds, got {step!r}")
        if not (math.isfinite(start) and math.isfinite(end)) or end < start:
            raise ValueError(f"bad range: start={start!r} end={end!r}")
        jobs: dict[str, _Job[list[SeriesData]]] = {
            name: _Job(self._range_fetch(query, start, end, step), _parse_series)
            for name, query in queries.items()
        }
        outcomes = self._round(jobs)
        return {name: _to_result(queries[name], outcomes[name]) for name in queries}

    def instant_queries(self, queries: Mapping[str, str], at: float | None = None) -> dict[str, QueryResult]:
        """Run every query at one instant, concurrently, within one deadline (keys as given)."""
        jobs: dict[str, _Job[list[SeriesData]]] = {
            name: _Job(self._instant_fetch(query, at), _parse_series) for name, query in queries.items()
        }
        outcomes = self._round(jobs)
        return {name: _to_result(queries[name], outcomes[name]) for name in queries}

    def api_lists(self, requests_: Mapping[str, tuple[str, Mapping[str, str], str]]) -> dict[str, ApiReply]:
        """GET JSON API paths (rules, targets, ...) in one round: name -> (path, params, list key).

        Each reply's `data` must hold a list under `key` (`groups` for /api/v1/rules,
        `activeTargets` for /api/v1/targets); anything else is a one-line error, like a query's.
        """

        def job(path: str, params: Mapping[str, str], key: str) -> _Job[object]:
            def fetch(_: object) -> object:
                return self._session.get(f"{self._base_url}{path}", params=dict(params))

            def parse(data: object) -> object:
                if not isinstance(data, dict) or not isinstance(data.get(key), list):
                    raise _malformed(f"{path} reply has no {key} list")
                return data

            return _Job(fetch, parse)

        outcomes = self._round({name: job(*spec) for name, spec in requests_.items()})
        out: dict[str, ApiReply] = {}
        for name, outcome in outcomes.items():
            if outcome.failure is not None:
                out[name] = ApiReply(None, outcome.failure.message)
            else:
                out[name] = ApiReply(cast(Mapping[str, Any], outcome.value), None)
        return out

    def instant_query(self, query: str, at: float | None = None) -> QueryResult:
        """One instant query at `at` (epoch seconds; None is the server's now)."""
        job: _Job[list[SeriesData]] = _Job(self._instant_fetch(query, at), _parse_series)
        return _to_result(query, self._round({"q": job})["q"])

    def check(self) -> None:
        """Raise `PrometheusError` unless the URL answers a PromQL query like Prometheus.

        Asks `vector(1)` rather than the library's `check_prometheus_connection`, which
        only GETs `/` and so calls an auth proxy's HTML login page a healthy Prometheus.
        """
        job: _Job[list[SeriesData]] = _Job(self._instant_fetch("vector(1)", None), _parse_series)
        outcome = self._round({"check": job})["check"]
        if outcome.failure is not None:
            raise outcome.failure.as_error()
        values = [float(v) for _, _, vs in outcome.value or [] for v in vs]
        if values != [1.0]:
            raise PrometheusBadReply(
                f"{self.url} does not answer like Prometheus (vector(1) gave {values[:3]})",
                kind="malformed",
            )

    def ping(self) -> bool:
        """True when `check()` passes; for status lines that only need yes or no."""
        try:
            self.check()
        except PrometheusError:
            return False
        return True

    # ---------------------------------------------------------------- the round

    def _range_fetch(
        self, query: str, start: float, end: float, step: float
    ) -> Callable[[PrometheusConnect], object]:
        def fetch(_: PrometheusConnect) -> object:
            # `timeout` lets the server stop work we gave up on.
            params = {
                "query": query,
                "start": _num(start),
                "end": _num(end),
                "step": _num(step),
                "timeout": self._server_timeout(),
            }
            return self._session.get(f"{self._base_url}/api/v1/query_range", params=params)

        return fetch

    def _instant_fetch(self, query: str, at: float | None) -> Callable[[PrometheusConnect], object]:
        def fetch(_: PrometheusConnect) -> object:
            params = {"query": query, "timeout": self._server_timeout()}
            if at is not None:
                params["time"] = _num(at)
            return self._session.get(f"{self._base_url}/api/v1/query", params=params)

        return fetch

    def _server_timeout(self) -> str:
        return _num(max(self._session.remaining(), 0.001))

    def _round(self, jobs: Mapping[str, _Job[R]]) -> dict[str, _Outcome[R]]:
        """Run the jobs on a pool; whatever is not done at the deadline is a timeout.

        The pool is shut down without waiting: a worker still blocked in a socket read
        ends by itself, since its read timeout is what was left of this same deadline.
        """
        if not jobs:
            return {}
        deadline = time.monotonic() + self.timeout
        tallies = {name: _Tally() for name in jobs}
        pool = ThreadPoolExecutor(
            max_workers=min(len(jobs), self._max_workers), thread_name_prefix="prometheus"
        )
        futures: dict[str, Future[_Outcome[R]]] = {}
        try:
            for name, job in jobs.items():
                futures[name] = pool.submit(self._run_job, job, deadline, tallies[name])
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
            return _Outcome(
                value, None, tally.sent, _strings(envelope.get("warnings")), _strings(envelope.get("infos"))
            )

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
            if _is_read_timeout(exc):
                raise self._timeout_failure() from exc
            raise _Failure(
                f"unreachable: {_connection_reason(exc)} ({self.url})",
                kind="unreachable",
                family=PrometheusUnavailable,
                transient=True,
            ) from exc
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
        return _envelope(response)


# -------------------------------------------------------------------- replies


def _envelope(response: requests.Response) -> dict[str, Any]:
    """The Prometheus JSON envelope of a response, or the `_Failure` that describes it."""
    where = _redact(response.url)
    body: object
    try:
        body = json.loads(response.content)
    except ValueError:
        body = None
    error_type, error_text = _error_fields(body)
    status = response.status_code
    if status != 200:
        detail = f": {error_type}: {error_text}" if error_type else ""
        if status in (401, 403):
            raise _Failure(
                f"HTTP {status} from {where}: not authorised (check the token or credentials)",
                kind="auth",
                family=PrometheusRejected,
            )
        if 400 <= status < 500 and error_type:
            raise _Failure(f"{error_type}: {error_text}", kind=error_type, family=PrometheusRejected)
        transient = status in TRANSIENT_STATUS and error_type != "timeout"
        raise _Failure(
            f"HTTP {status} from {where}{detail}",
            kind=error_type or f"http_{status}",
            family=PrometheusUnavailable if status >= 500 else PrometheusRejected,
            transient=transient,
            retry_after=_retry_after(response.headers.get("Retry-After")) if transient else None,
        )
    if body is None:
        content_type = response.headers.get("Content-Type", "").split(";")[0].strip() or "no content type"
        raise _Failure(f"not JSON ({content_type}) from {where}", kind="not_json", family=PrometheusBadReply)
    if not isinstance(body, dict) or body.get("status") not in ("success", "error"):
        raise _Failure(
            f"unexpected reply (no Prometheus status) from {where}",
            kind="malformed",
            family=PrometheusBadReply,
        )
    if body["status"] == "error":
        kind = error_type or "error"
        raise _Failure(f"{kind}: {error_text}", kind=kind, family=PrometheusRejected)
    return body


def _error_fields(body: object) -> tuple[str, str]:
    if isinstance(body, dict) and body.get("status") == "error":
        return str(body.get("errorType") or "error"), str(body.get("error") or "")
    return "", ""


def _parse_names(data: object) -> set[str]:
    if not isinstance(data, list) or not all(isinstance(name, str) for name in data):
        raise _malformed("label values are not a list of strings")
    return set(data)


def _parse_series(data: object) -> list[SeriesData]:
    """`data` of a query reply as `(labels, times, values)`; NaN/Inf strings become floats.

    Scalars become one series without labels. Native-histogram samples have no float
    value to give; a series made only of them is refused rather than read as empty.
    """
    if not isinstance(data, dict):
        raise _malformed("no data object")
    result_type, result = data.get("resultType"), data.get("result")
    if result_type == "scalar":
        return [({}, *_samples([result]))]
    if result_type not in ("matrix", "vector") or not isinstance(result, list):
        raise _malformed(f"unsupported result type {result_type!r}")
    key = "values" if result_type == "matrix" else "value"
    out: list[SeriesData] = []
    for item in result:
        if not isinstance(item, dict) or not isinstance(item.get("metric", {}), dict):
            raise _malformed("series without a metric object")
        if key not in item:
            what = "native histogram samples" if _has_histograms(item) else f"a series without {key!r}"
            raise _malformed(f"{what}: not supported")
        labels = {str(k): str(v) for k, v in item.get("metric", {}).items()}
        samples = item[key] if result_type == "matrix" else [item[key]]
        out.append((labels, *_samples(samples)))
    return out


def _has_histograms(item: Mapping[str, object]) -> bool:
    return "histogram" in item or "histograms" in item


def _samples(pairs: object) -> tuple[FloatArray, FloatArray]:
    if not isinstance(pairs, list):
        raise _malformed("samples are not a list")
    if not pairs:
        return np.empty(0, dtype=np.float64), np.empty(0, dtype=np.float64)
    try:
        array = np.asarray(pairs, dtype=object)
        if array.ndim != 2 or array.shape[1] != 2:
            raise ValueError("not [time, value] pairs")
        times = np.asarray(array[:, 0].astype(np.float64), dtype=np.float64)
        values = np.asarray(array[:, 1].astype(np.float64), dtype=np.float64)
    except (ValueError, TypeError) as exc:
        raise _malformed(f"bad samples: {exc}") from exc
    return times, values


def _malformed(what: str) -> _Failure:
    return _Failure(f"malformed reply: {what}", kind="malformed", family=PrometheusBadReply)


def _to_result(query: str, outcome: _Outcome[list[SeriesData]]) -> QueryResult:
    if outcome.failure is not None:
        return QueryResult(
            query,
            error=outcome.failure.message,
            error_kind=outcome.failure.kind,
            http_requests=outcome.http_requests,
        )
    return QueryResult(
        query,
        series=outcome.value or [],
        warnings=outcome.warnings,
        infos=outcome.infos,
        http_requests=outcome.http_requests,
    )


# -------------------------------------------------------------------- small helpers


def _backoff(attempt: int) -> float:
    """Exponential backoff with "equal jitter", so concurrent retries don't arrive together."""
    ceiling = min(_BACKOFF_CAP_S, _BACKOFF_BASE_S * 2.0 ** (attempt - 1))
    return ceiling / 2 + random.uniform(0, ceiling / 2)


def _retry_after(value: str | None) -> float | None:
    """Seconds from a `Retry-After` header (delta-seconds or HTTP-date); None if absent or bad."""
    if not value:
        return None
    value = value.strip()
    if value.isdigit():
        return float(value)
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return max(0.0, (when - datetime.now(UTC)).total_seconds())


def _is_read_timeout(exc: requests.ConnectionError) -> bool:
    """requests wraps a read timeout *during the body* in ConnectionError; it is still a timeout."""
    cause: object = exc.args[0] if exc.args else None
    reason = getattr(cause, "reason", cause)
    return isinstance(cause, urllib3.exceptions.ReadTimeoutError) or isinstance(
        reason, urllib3.exceptions.ReadTimeoutError
    )


def _tls_reason(exc: requests.exceptions.SSLError) -> str:
    """The certificate problem itself, not urllib3's wrapper text with the whole query URL.

    requests → MaxRetryError.reason → urllib3 SSLError → ssl.SSLError: walk down to it.
    """
    node: object = exc
    for _ in range(6):
        if isinstance(node, ssl.SSLCertVerificationError):
            return f"certificate verify failed: {node.verify_message}"
        if isinstance(node, ssl.SSLError):
            return str(node.reason or node.strerror or "handshake failed")
        reason = getattr(node, "reason", None)
        args = getattr(node, "args", ())
        node = reason if isinstance(reason, BaseException) else (args[0] if args else None)
    return "handshake failed"


def _connection_reason(exc: requests.ConnectionError) -> str:
    cause: object = exc.args[0] if exc.args else None
    reason = getattr(cause, "reason", cause)
    text = str(reason)
    if isinstance(reason, urllib3.exceptions.NameResolutionError):
        return "host name not resolved"
    if "Connection refused" in text:
        return "connection refused"
    if isinstance(reason, urllib3.exceptions.ProtocolError) or "Connection aborted" in text:
        return "connection closed by the server"
    if isinstance(reason, urllib3.exceptions.NewConnectionError):
        return "cannot connect"
    return _short(exc)


def _short(exc: BaseException) -> str:
    text = re.sub(r"\s+", " ", str(exc)).strip() or type(exc).__name__
    return text if len(text) <= 160 else text[:157] + "..."


def _one_line(text: str) -> str:
    text = re.sub(r"[\x00-\x1f\x7f]+", " ", text)
    text = re.sub(r"\s+", " ", text).strip()
    return text if len(text) <= _MESSAGE_MAX else text[: _MESSAGE_MAX - 3] + "..."


def _strings(value: object) -> list[str]:
    if not isinstance(value, list):
        return []
    return [_one_line(str(item)) for item in value]


def _redact(url: str) -> str:
    """`scheme://host[:port]/path`: no user info (a password), no query (long, maybe secret)."""
    try:
        parts = urlsplit(url)
        host = parts.hostname or ""
        if ":" in host:
            host = f"[{host}]"
        netloc = f"{host}:{parts.port}" if parts.port else host
    except ValueError:
        return "<unparseable URL>"
    return urlunsplit((parts.scheme, netloc, parts.path, "", ""))


def _num(value: float) -> str:
    """A number for a query parameter, to the millisecond, without float noise."""
    text = f"{value:.3f}".rstrip("0").rstrip(".")
    return text if text not in ("", "-0") else "0"
