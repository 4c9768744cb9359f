"""`PrometheusSource`: the reads callers make (names, range and instant queries, API lists, checks).

It owns the configuration (URL, credentials, TLS, limits) and builds each read as a job
for the round; how a round runs, how a reply is checked and how a failure is named
live in the package's other modules.
"""

from __future__ import annotations

import logging
import math
import threading
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from os import PathLike
from typing import Any, cast
from urllib.parse import urlsplit

from prometheus_api_client.prometheus_connect import PrometheusConnect
from requests.adapters import HTTPAdapter
from urllib3.util.retry import Retry

from signals.prometheus.errors import PrometheusBadReply, PrometheusError
from signals.prometheus.replies import (
    ApiReply,
    QueryResult,
    SeriesData,
    _malformed,
    _parse_capped,
    _parse_names,
    _parse_series,
    capped_warning,
)
from signals.prometheus.rounds import Progress, Rounds, _Counts, _Job, _Outcome
from signals.prometheus.transport import _DeadlineSession, _num, _redact
from signals.vocabulary import DEFAULT_MAX_SERIES

_LOG = logging.getLogger("signals.prometheus")
"""One logger for the whole seam, named after it, whichever module logs."""


class PrometheusSource(Rounds):
    """Reads from a Prometheus-compatible HTTP API within a deadline; the only user of the client.

    `timeout` is the total deadline of one round (`range_queries`, `instant_query`,
    `metric_names`, `check`), not per request. `bearer_token` and `basic_auth` are
    mutually exclusive; `headers` are added to every request (e.g. `X-Scope-OrgID` for
    Mimir). `ca_bundle` is a CA file for a private CA; `verify=False` disables TLS
    checks and says so in the log, because it must never happen silently. Replies are asked
    for uncompressed unless `compress` (see the constructor). `max_series` caps the series
    of one range query's answer (`signals.vocabulary.DEFAULT_MAX_SERIES`; 0 or None: no cap), saying
    so in its warnings; instant queries (fleet discovery reads every fleet at once) are not
    capped. `progress`, when given, hears how many of the requests sent have ended, as each
    one ends (`ReadProgress`): what a terminal shows while a large fleet is read.
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
        compress: bool = False,
        max_series: int | None = DEFAULT_MAX_SERIES,
        progress: Progress | None = None,
    ) -> None:
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"not an http(s) URL: {_redact(url)!r}")
        if not (timeout > 0 and math.isfinite(timeout)):
            raise ValueError(f"timeout must be a positive number of seconds, got {timeout!r}")
        if max_retries < 0 or max_workers < 1:
            raise ValueError("max_retries must be >= 0 and max_workers >= 1")
        if max_series is not None and max_series < 0:
            raise ValueError(f"max_series must be >= 0 (0: no cap), got {max_series!r}")
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
        self.max_series = max_series or None
        self._listening = (_Counts(progress),) if progress is not None else ()
        self._listeners_lock = threading.Lock()

        session = _DeadlineSession(self.timeout)
        session.headers["Accept"] = "application/json"
        # Uncompressed unless asked: gzip costs Prometheus about as much CPU as encoding the
        # JSON it compresses (measured in docs/benchmarks.md), and a diagnosis runs when
        # Prometheus is needed most. Across a slow link, `compress=True` trades it for bytes.
        session.headers["Accept-Encoding"] = "gzip" if compress else "identity"
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

    @contextmanager
    def reading(self, progress: Progress) -> Iterator[None]:
        """`progress` also hears the requests of the rounds sent meanwhile, counted from zero:
        one load of a front end that reads again and again (the TUI). Loads may overlap; each
        hears the rounds sent while it was inside."""
        counts = _Counts(progress)
        with self._listeners_lock:
            self._listening = (*self._listening, counts)
        try:
            yield
        finally:
            with self._listeners_lock:
                self._listening = tuple(c for c in self._listening if c is not counts)

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

    def metric_names(
        self, start: float | None = None, end: float | None = None, match: str | None = None
    ) -> set[str]:
        """Every metric name Prometheus knows (`/api/v1/label/__name__/values`), or only those
        with series between `start` and `end` (epoch seconds) when given, and only those of
        series matching the selector `match` (`{namespace="llm",pod=~"..."}`) when given.

        Used to pick the catalog's PromQL variant that matches the exporters present. A
        diagnosis gives its window: without one, Prometheus answers from all it holds, but
        later VictoriaMetrics releases only from the last few minutes, which would leave last
        week's incident without any metric. Raises `PrometheusError` on any failure.
        """
        key = "names"
        return self.metric_names_matching({key: match}, start, end)[key]

    def metric_names_matching(
        self, matches: Mapping[str, str | None], start: float | None = None, end: float | None = None
    ) -> dict[str, set[str]]:
        """`metric_names` for several selectors (keys as given; None is every series) in one
        round: the reads go out together under one deadline, one not waiting for another.
        Raises `PrometheusError` on a failure, the first one in the given order."""
        base = {"start": _num(start)} if start is not None else {}
        if end is not None:
            base["end"] = _num(end)

        def job(match: str | None) -> _Job[set[str]]:
            params = base if match is None else {**base, "match[]": match}
            return _Job(lambda client: client.get_label_values("__name__", params=params), _parse_names)

        outcomes = self._round({key: job(match) for key, match in matches.items()})
        out = {}
        for key in matches:
            outcome = outcomes[key]
            if outcome.failure is not None:
                raise outcome.failure.as_error()
            assert outcome.value is not None
            out[key] = outcome.value
        return out

    def range_queries(
        self,
        queries: Mapping[str, str],
        start: float,
        end: float,
        step: float,
        digest: Mapping[str, Callable[[list[SeriesData]], list[SeriesData]]] | None = None,
    ) -> dict[str, QueryResult]:
        """Run every query over `[start, end]` at `step` seconds, concurrently, within one deadline.

        Keys are the caller's names (signal names); each gets a `QueryResult`, failed
        queries included, so one bad query never hides the others. `digest` maps some of the
        names to what the caller makes of that answer's series (capped already): it runs as
        the answer arrives, so a round holds a large answer only until it is digested.
        """
        if not (step > 0 and math.isfinite(step)):
            raise ValueError(f"step must be a positive number of seconds, got {step!r}")
        if not (math.isfinite(start) and math.isfinite(end)) or end < start:
            raise ValueError(f"bad range: start={start!r} end={end!r}")
        cap = self.max_series

        def parser(name: str) -> Callable[[object], tuple[list[SeriesData], int, int]]:
            then = (digest or {}).get(name)

            def parse(data: object) -> tuple[list[SeriesData], int, int]:
                series, kept, total = _parse_capped(data, cap)
                return (then(series) if then is not None else series), kept, total

            return parse

        jobs: dict[str, _Job[tuple[list[SeriesData], int, int]]] = {
            name: _Job(self._range_fetch(query, start, end, step), parser(name))
            for name, query in queries.items()
        }
        outcomes = self._round(jobs)
        return {name: _capped_result(queries[name], outcomes[name]) for name in queries}

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

    # ---------------------------------------------------------------- jobs for the round

    def _range_fetch(
        self, query: str, start: float, end: float, step: float
    ) -> Callable[[PrometheusConnect], object]:
        def fetch(_: PrometheusConnect) -> object:
            # `timeout` lets the server stop work we gave up on. `nocache=1` keeps
            # VictoriaMetrics from moving start and end to multiples of the step (its response
            # cache does), so the points land on the grid asked for; Prometheus ignores it.
            params = {
                "query": query,
                "start": _num(start),
                "end": _num(end),
                "step": _num(step),
                "timeout": self._server_timeout(),
                "nocache": "1",
            }
            return self._session.get(f"{self._base_url}/api/v1/query_range", params=params, stream=True)

        return fetch

    def _instant_fetch(self, query: str, at: float | None) -> Callable[[PrometheusConnect], object]:
        def fetch(_: PrometheusConnect) -> object:
            # `nocache=1`: VictoriaMetrics would otherwise move a `time` within its latency
            # offset (30 s) of now back by that offset.
            params = {"query": query, "timeout": self._server_timeout(), "nocache": "1"}
            if at is not None:
                params["time"] = _num(at)
            return self._session.get(f"{self._base_url}/api/v1/query", params=params, stream=True)

        return fetch

    def _server_timeout(self) -> str:
        return _num(max(self._session.remaining(), 0.001))


def _capped_result(query: str, outcome: _Outcome[tuple[list[SeriesData], int, int]]) -> QueryResult:
    """A range query's result; a capped answer says so in its warnings (it is partial data)."""
    if outcome.failure is not None or outcome.value is None:
        return _to_result(query, _Outcome(None, outcome.failure, outcome.http_requests, [], []))
    series, kept, total = outcome.value
    warnings = [*outcome.warnings, *([capped_warning(kept, total)] if kept < total else [])]
    return _to_result(query, _Outcome(series, None, outcome.http_requests, warnings, outcome.infos))


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
