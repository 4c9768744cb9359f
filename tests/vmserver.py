"""A temporary, real single-node VictoriaMetrics fed the series a `TemporaryPrometheus` is fed.

Large fleets put VictoriaMetrics, Thanos or Mimir behind the Prometheus API, and their
query engines are not Prometheus': MetricsQL rates without extrapolation, chooses its own
lookback from the sample interval and aligns range queries to the step unless told not
to. The live tests run on this engine too, so a catalog query that answers differently
there fails a test rather than a page at 3 a.m. (docs/victoriametrics.md lists what was
found).

`TemporaryVictoriaMetrics` has the constructor shape of `signals.tempprom.TemporaryPrometheus`:
the OpenMetrics text of `to_openmetrics` in, `.url` out, a context manager. On enter it
starts `victoria-metrics` on a free 127.0.0.1 port from a private temp dir, posts the
series to `/api/v1/import/prometheus` (the Prometheus text exposition, whose timestamps
are milliseconds where OpenMetrics' are seconds), calls `/internal/force_flush` so they
are searchable at once, and waits until a query counts every sample posted. On
exit (also when entering fails) the process group gets SIGTERM, SIGKILL after
`stop_timeout`, and the temp dir is removed.

The flags, checked against `victoria-metrics -help` of 1.79.5 (Debian's package):
- `-retentionPeriod=100y`: the test data is dated months before today and would be
  dropped as outside the default one-month retention;
- `-search.latencyOffset=0s`: by default the last 30 s before *now* are hidden as
  possibly incomplete; harmless for old data, but a harness should not hide anything;
- `-search.disableCache`: no response cache, so no answer predates the import. That cache
  is also what moves range queries to multiples of the step, which the product turns off
  with `nocache=1`; the test of that starts a server with `disable_cache=False`;
- `-dedup.minScrapeInterval` is left unset: deduplication would thin the series;
- `-loggerLevel=ERROR`, and no self-scrape, so the server holds only the series given;
- `-search.maxQueueDuration=60s`: beyond `-search.maxConcurrentRequests` (twice the CPU
  cores) a query waits in a queue, and after the default 10 s is refused with a 503; on a
  busy two-core test machine the product's eight concurrent queries can wait that long,
  and the test is about the answers, not about admission control.

`lookback_delta` maps to `-search.maxStalenessInterval`, the longest gap VictoriaMetrics
bridges with the last sample: the raw replay's short lookback, so a series that stopped
disappears about when a live Prometheus would have marked it stale.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Sequence
from decimal import Decimal
from pathlib import Path

import pytest
from promserver import require_prometheus_binaries

from signals.errors import SignalError
from signals.gridseries import OpenMetricsSeries
from signals.rawreplay import pushed_prometheus
from signals.tempprom import TemporaryPrometheus, TemporaryServer, to_openmetrics

BINARIES = ("victoria-metrics", "victoria-metrics-prod")
MISSING_BINARY = "victoria-metrics not found: install the Debian package `victoria-metrics`"
_IMPORT_CHUNK = 4 << 20
_LOG_TAIL_LINES = 15
_NO_PROXY = urllib.request.build_opener(urllib.request.ProxyHandler({}))


class VictoriaMetricsNotInstalled(SignalError):
    """No `victoria-metrics` on PATH; the message names the package to install."""

    def __init__(self) -> None:
        super().__init__(MISSING_BINARY)


class TemporaryVictoriaMetricsError(SignalError):
    """Starting or feeding the temporary VictoriaMetrics failed; the message carries the log tail."""


def find_binary() -> str:
    """The path of the single-node binary (Debian's name, or upstream's), or `VictoriaMetricsNotInstalled`."""
    for name in BINARIES:
        path = shutil.which(name)
        if path is not None:
            return path
    raise VictoriaMetricsNotInstalled()


def require_victoriametrics_binary() -> None:
    """Skip loudly without `victoria-metrics`; under CI=true fail, since CI must run these tests."""
    if any(shutil.which(name) is not None for name in BINARIES):
        return
    reason = (
        "!!! victoria-metrics not on PATH: VictoriaMetrics tests NOT RUN "
        "(install the Debian package `victoria-metrics`) !!!"
    )
    if os.environ.get("CI") == "true":
        pytest.fail(reason)
    pytest.skip(reason)


def to_exposition(openmetrics: str) -> tuple[list[str], tuple[int, int] | None]:
    """OpenMetrics text of `to_openmetrics` as Prometheus exposition lines with millisecond timestamps.

    Returns the lines (one sample each) and the first and last timestamps in milliseconds
    (None without samples). Comments and `# EOF` are dropped: the import needs no TYPE. A
    sample line is `selector value seconds`; a label value may hold spaces but not an
    unescaped newline, so the last two fields are split off the right. Seconds go through
    `Decimal` so `1791000000.015` becomes exactly 1791000000015.
    """
    lines: list[str] = []
    first: int | None = None
    last: int | None = None
    for line in openmetrics.splitlines():
        if not line or line.startswith("#"):
            continue
        selector, value, seconds = line.rsplit(" ", 2)
        millis = int(Decimal(seconds) * 1000)
        lines.append(f"{selector} {value} {millis}")
        first = millis if first is None else min(first, millis)
        last = millis if last is None else max(last, millis)
    return lines, None if first is None or last is None else (first, last)


def _tail(path: Path, lines: int = _LOG_TAIL_LINES) -> str:
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return "(no log)"
    return "\n".join(text.strip().splitlines()[-lines:]) or "(empty log)"


def _request(url: str, data: bytes | None = None, timeout: float = 10.0) -> tuple[int, bytes]:
    """One HTTP request, never through an `http_proxy` from the environment (it is loopback)."""
    request = urllib.request.Request(url, data=data, method="POST" if data is not None else "GET")
    try:
        with _NO_PROXY.open(request, timeout=timeout) as response:
            return int(response.status), response.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read()


class TemporaryVictoriaMetrics(TemporaryServer):
    """A real single-node VictoriaMetrics over the given series, for one `with` block.

    `openmetrics` is the text from `signals.tempprom.to_openmetrics` (or None for an empty
    server). `disable_cache=False` leaves VictoriaMetrics' response cache, and with it the
    alignment of range queries to their step, as a production server has them. The port
    is found by binding port 0 and releasing it; if another process grabs it first, start
    is retried on a new port.
    """

    def __init__(
        self,
        openmetrics: str | None = None,
        *,
        startup_timeout: float = 30.0,
        stop_timeout: float = 10.0,
        lookback_delta: float | None = None,
        disable_cache: bool = True,
    ) -> None:
        super().__init__(startup_timeout=startup_timeout, stop_timeout=stop_timeout)
        self._openmetrics = openmetrics
        self._lookback_delta = lookback_delta
        self._disable_cache = disable_cache

    def start(self) -> None:
        """Start, import and wait until queryable; on any failure everything started so far is undone."""
        binary = find_binary()
        self._dir = Path(tempfile.mkdtemp(prefix="llm-triage-vm-"))
        try:
            self._serve(
                lambda port: self._args(binary, port),
                self._dir / "victoria-metrics.log",
                _healthy,
                TemporaryVictoriaMetricsError,
            )
            if self._openmetrics is not None:
                self._import(self._openmetrics)
        except BaseException:
            self.stop()
            raise

    def _args(self, binary: str, port: int) -> list[str]:
        assert self._dir is not None
        args = [
            binary,
            f"-storageDataPath={self._dir / 'data'}",
            f"-httpListenAddr=127.0.0.1:{port}",
            "-retentionPeriod=100y",
            "-search.latencyOffset=0s",
            "-loggerLevel=ERROR",
            "-search.maxQueueDuration=60s",
        ]
        if self._disable_cache:
            args.append("-search.disableCache")
        if self._lookback_delta is not None:
            args.append(f"-search.maxStalenessInterval={max(1, round(self._lookback_delta))}s")
        return args

    def _import(self, openmetrics: str) -> None:
        """Post the series in chunks, flush, and wait until a query counts every sample posted.

        Counting samples with a query, rather than series in the index, waits for the data
        itself: the index can list a series whose samples are not yet searchable.
        """
        lines, span = to_exposition(openmetrics)
        if span is None:
            return
        for chunk in _chunks(lines, _IMPORT_CHUNK):
            self._call("/api/v1/import/prometheus", chunk, (204,))
        deadline = time.monotonic() + self._startup_timeout
        found = 0
        while time.monotonic() < deadline:
            self._call("/internal/force_flush", None, (200,))
            found = self._samples_between(*span)
            if found >= len(lines):
                return
            time.sleep(0.1)
        raise TemporaryVictoriaMetricsError(
            f"victoria-metrics counts {found} of the {len(lines)} imported samples after "
            f"{self._startup_timeout:g}s:\n{_tail(self.directory / 'victoria-metrics.log')}"
        )

    def _samples_between(self, first_ms: int, last_ms: int) -> int:
        """How many samples a query finds from `first_ms` to `last_ms`, both included."""
        window = last_ms - first_ms + 1
        params = urllib.parse.urlencode(
            {
                "query": f'sum(count_over_time({{__name__=~".+"}}[{window}ms]))',
                "time": f"{last_ms / 1000:.3f}",
                "nocache": "1",
            }
        )
        reply = json.loads(self._call(f"/api/v1/query?{params}", None, (200,)))
        result = reply.get("data", {}).get("result") or []
        return int(float(result[0]["value"][1])) if result else 0

    def _call(self, path: str, data: bytes | None, ok: Sequence[int]) -> bytes:
        status, body = _request(f"{self.url}{path}", data, timeout=self._startup_timeout)
        if status not in ok:
            message = body.decode("utf-8", errors="replace").strip()[:500]
            raise TemporaryVictoriaMetricsError(
                f"victoria-metrics answered {status} to {path.split('?')[0]}: {message}\n"
                f"{_tail(self.directory / 'victoria-metrics.log')}"
            )
        return body


def _healthy(url: str) -> bool:
    try:
        return _request(f"{url}/health", timeout=1.0) == (200, b"OK")
    except (urllib.error.URLError, OSError, ValueError):
        return False


def _chunks(lines: list[str], limit: int) -> list[bytes]:
    """Lines joined into bodies of at most about `limit` bytes, each ending in a newline."""
    out: list[bytes] = []
    current: list[str] = []
    size = 0
    for line in lines:
        if current and size + len(line) + 1 > limit:
            out.append(("\n".join(current) + "\n").encode())
            current, size = [], 0
        current.append(line)
        size += len(line) + 1
    if current:
        out.append(("\n".join(current) + "\n").encode())
    return out


# ------------------------------------------------------------------ both engines, for parametrised tests

ENGINES = ("prometheus", "victoriametrics")
"""The real engines the live tests run on: their ids in test names."""


def require_engine(engine: str) -> None:
    """Skip loudly (fail under CI=true) when the engine's binaries are missing."""
    if engine == "victoriametrics":
        require_victoriametrics_binary()
    else:
        require_prometheus_binaries()


def temporary_engine(
    engine: str, openmetrics: str | None, *, lookback_delta: float | None = None
) -> TemporaryPrometheus | TemporaryVictoriaMetrics:
    """A not-yet-started temporary server of `engine` over the series: use it in a `with`."""
    if engine == "victoriametrics":
        return TemporaryVictoriaMetrics(openmetrics, lookback_delta=lookback_delta)
    if engine == "prometheus":
        return TemporaryPrometheus(openmetrics, lookback_delta=lookback_delta)
    raise ValueError(f"unknown engine {engine!r}; one of {ENGINES}")


def replay_engine(
    engine: str, series: Sequence[OpenMetricsSeries], *, lookback_delta: float | None = None
) -> TemporaryPrometheus | TemporaryVictoriaMetrics:
    """`temporary_engine` as raw replay's server factory: the series written the way each
    engine takes them (Prometheus over remote write, VictoriaMetrics as imported text)."""
    if engine == "prometheus":
        return pushed_prometheus(series, lookback_delta=lookback_delta)
    return temporary_engine(engine, to_openmetrics(series), lookback_delta=lookback_delta)
