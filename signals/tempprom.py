"""A temporary, real Prometheus fed with backfilled data.

Raw replay (a fixture of exporter series such as `vllm:num_requests_running`) and the
integration tests both need the *real* PromQL engine: `rate` over counter resets,
`histogram_quantile` over `le` buckets and the 5-minute lookback are too subtle to
re-implement. So the series are either written as OpenMetrics text and turned into TSDB
blocks by `promtool tsdb create-blocks-from openmetrics`, or written into the running server
through its remote-write receiver (`signals.remotewrite`, what raw replay does: far cheaper
for the same samples), and served by a `prometheus` process on a free loopback port with no
scrape targets, from a private temporary directory that is removed on exit whatever
happened. A caller that needs a real scrape (the test cluster of `tools/cluster`) may give
it scrape jobs instead.

Everything here is a `SignalError` when it fails, with what to install or the last
lines of the process log, because the person reading it is replaying an incident,
not debugging Prometheus.
"""

from __future__ import annotations

import contextlib
import json
import logging
import math
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from types import TracebackType
from typing import Self

import numpy as np
import numpy.typing as npt

from signals.errors import SignalError
from signals.gridseries import OpenMetricsSeries, checked_series
from signals.remotewrite import NO_PROXY_OPENER, push

_LOG = logging.getLogger(__name__)

MISSING_BINARIES = "prometheus/promtool not found: install the Debian package `prometheus`"

_LOG_TAIL_LINES = 15


class PrometheusNotInstalled(SignalError):
    """`prometheus` or `promtool` is not on PATH; the message names the package to install."""

    def __init__(self) -> None:
        super().__init__(MISSING_BINARIES)


class TemporaryPrometheusError(SignalError):
    """Backfilling or starting the temporary Prometheus failed; the message carries the log tail."""


def find_binaries() -> tuple[str, str]:
    """The paths of `prometheus` and `promtool`, or `PrometheusNotInstalled`.

    Looked up on PATH at call time (not import time) so a missing install is reported
    when raw replay is asked for, and tests can hide the binaries with PATH.
    """
    prometheus = shutil.which("prometheus")
    promtool = shutil.which("promtool")
    if prometheus is None or promtool is None:
        raise PrometheusNotInstalled()
    return prometheus, promtool


def _escape_label_value(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def _format_millis(millis: int) -> str:
    """Integer milliseconds as seconds with exactly millisecond precision, the TSDB's resolution.

    Going through integer milliseconds avoids `1760000000.1` being written with float
    noise and landing one millisecond off after promtool multiplies by 1000.
    """
    whole, frac = divmod(millis, 1000)
    return str(whole) if frac == 0 else f"{whole}.{frac:03d}"


def _format_value(value: float) -> str:
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    return repr(float(value))


def to_openmetrics(series: Iterable[OpenMetricsSeries]) -> str:
    """Series on a regular grid as OpenMetrics text that `promtool ... openmetrics` accepts.

    What promtool 2.42 was checked to do, and why it is written this way:
    - every family is declared `# TYPE <name> unknown`, the sample name itself being the
      family name. That is valid OpenMetrics for any name, including colons
      (`vllm:num_requests_running`) and `_total`/`_bucket`/`_count` suffixes, whose real
      type a raw dump does not always tell; promtool 2.42 happens to accept
      `counter`/`histogram` or no TYPE as well, and PromQL ignores the type anyway.
    - each family's lines are contiguous (OpenMetrics forbids interleaving families)
      and in timestamp order. Order matters: promtool *silently drops* a sample older
      than the previous one of its series, so an unsorted dump loses data without error.
    - timestamps are seconds; NaN means "no sample" and is skipped, so gaps stay gaps;
      ±Inf is written `+Inf`/`-Inf`; label values escape `\\`, `"` and newlines.
    - the text ends with `# EOF`, which OpenMetrics requires.

    Raises `ValueError` for an invalid metric or label name, a non-positive step, or
    the same series given twice (it would be rejected as duplicate samples).
    """
    families: dict[str, list[tuple[npt.NDArray[np.int64], int, list[str]]]] = {}
    grids: dict[tuple[float, float, int], tuple[npt.NDArray[np.int64], list[str]]] = {}
    for index, (name, labels, values, start, step) in enumerate(checked_series(series)):
        rendered = ",".join(f'{k}="{_escape_label_value(v)}"' for k, v in sorted(labels.items()))
        selector = f"{name}{{{rendered}}}" if rendered else name
        array = np.asarray(values, dtype=np.float64)
        grid = grids.get((start, step, len(array)))
        if grid is None:
            # The same float64 arithmetic as `round((start + i * step) * 1000)`, a whole grid at once;
            # the series of one frame share it, so each timestamp is written once.
            millis = np.rint((start + np.arange(len(array)) * float(step)) * 1000).astype(np.int64)
            grid = grids[(start, step, len(array))] = (millis, [_format_millis(m) for m in millis.tolist()])
        gaps = np.isnan(array)
        if gaps.any():
            kept = np.flatnonzero(~gaps)
            millis, stamps = grid[0][kept], [grid[1][k] for k in kept.tolist()]
            array = array[kept]
        else:
            millis, stamps = grid
        written = list(map(repr, array.tolist()))
        for k in np.flatnonzero(np.isinf(array)).tolist():
            written[k] = _format_value(array[k])
        lines = [f"{selector} {v} {t}" for v, t in zip(written, stamps, strict=True)]
        families.setdefault(name, []).append((millis, index, lines))
    out: list[str] = []
    for name, parts in families.items():
        out.append(f"# TYPE {name} unknown")
        if len(parts) == 1:
            out.extend(parts[0][2])  # one series: already in time order
            continue
        # Every series of the family merged in (timestamp, series order) order.
        millis = np.concatenate([m for m, _, _ in parts])
        order = np.concatenate([np.full(len(m), i, dtype=np.int64) for m, i, _ in parts])
        lines = [line for _, _, part in parts for line in part]
        out.extend(lines[k] for k in np.lexsort((order, millis)).tolist())
    out.append("# EOF")
    return "\n".join(out) + "\n"


def free_loopback_port() -> int:
    """A loopback TCP port free right now, for a server a test or benchmark starts."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def _tail(path: Path, lines: int = _LOG_TAIL_LINES) -> str:
    """The log lines that explain a failure: its `level=error` lines if any, else its last lines.

    Prometheus logs a dozen shutdown lines after the one error that matters.
    """
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return "(no log)"
    all_lines = text.strip().splitlines()
    errors = [line for line in all_lines if "level=error" in line]
    return "\n".join((errors or all_lines)[-lines:]) or "(empty log)"


class TemporaryServer:
    """A server process of the tests' and replays' own, for one `with` block: its URL, its
    private directory, and a stop that takes the whole process group down and removes the
    directory, whatever happened. Subclasses start it (`start`) and set `_process`, `_url`
    and `_dir`. A server that is not spoken to over HTTP (PostgreSQL) overrides `_url_for`;
    one that must not run as root passes `run_as` to `_serve`; one whose clean stop is not
    SIGTERM to every process (a postmaster) passes its signal to `_terminate`."""

    def __init__(self, *, startup_timeout: float = 30.0, stop_timeout: float = 10.0) -> None:
        self._startup_timeout = startup_timeout
        self._stop_timeout = stop_timeout
        self._dir: Path | None = None
        self._process: subprocess.Popen[bytes] | None = None
        self._url: str | None = None
        self._port: int | None = None

    @property
    def url(self) -> str:
        """`http://127.0.0.1:PORT` (or `_url_for`'s), without a trailing slash; only while running."""
        if self._url is None:
            raise RuntimeError(f"{type(self).__name__} is not running")
        return self._url

    @property
    def directory(self) -> Path:
        """The private temp dir (data, config, log); only while running."""
        if self._dir is None:
            raise RuntimeError(f"{type(self).__name__} is not running")
        return self._dir

    @property
    def pid(self) -> int | None:
        return None if self._process is None else self._process.pid

    def start(self) -> None:
        raise NotImplementedError

    def _url_for(self, port: int) -> str:
        """The URL clients use for the server on `port`, and `ready` is given."""
        return f"http://127.0.0.1:{port}"

    def _serve(
        self,
        args_for: Callable[[int], Sequence[str]],
        log: Path,
        ready: Callable[[str], bool],
        failure: type[SignalError],
        *,
        port: int | None = None,
        run_as: str | None = None,
    ) -> None:
        """Run `args_for(port)` on a free loopback port, in a session of its own, its output in
        `log`, until `ready(url)`. A port another process took meanwhile is tried again on a
        new one (three tries); `failure` with the log's tail when it exits or is not ready
        within `startup_timeout`. A given `port` (a restart where clients expect the server)
        is tried once. `run_as` names the user (and group of that name) to run it as."""
        if port is not None:
            self._spawn(args_for(port), port, log, ready, failure, last_attempt=True, run_as=run_as)
            return
        for attempt in range(3):
            port = free_loopback_port()
            if self._spawn(
                args_for(port), port, log, ready, failure, last_attempt=attempt == 2, run_as=run_as
            ):
                return

    def _spawn(
        self,
        args: Sequence[str],
        port: int,
        log: Path,
        ready: Callable[[str], bool],
        failure: type[SignalError],
        *,
        last_attempt: bool,
        run_as: str | None = None,
    ) -> bool:
        """One start; False when the port was taken meanwhile and another try makes sense."""
        name = Path(args[0]).name
        with log.open("wb") as out:
            self._process = subprocess.Popen(
                args,
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                cwd=self._dir,
                start_new_session=True,
                user=run_as,
                group=run_as,
                # Without this a server started by root keeps root's supplementary groups.
                extra_groups=None if run_as is None else [],
            )
        url = self._url_for(port)
        deadline = time.monotonic() + self._startup_timeout
        while time.monotonic() < deadline:
            code = self._process.poll()
            if code is not None:
                tail = _tail(log)
                self._process = None
                if "address already in use" in tail.lower() and not last_attempt:
                    return False
                raise failure(f"{name} exited at start (exit {code}):\n{tail}")
            if ready(url):
                self._url, self._port = url, port
                _LOG.debug("temporary %s ready at %s (data in %s)", name, url, self._dir)
                return True
            time.sleep(0.05)
        raise failure(f"{name} not ready after {self._startup_timeout:g}s on {url}:\n{_tail(log)}")

    def __enter__(self) -> Self:
        self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    def stop(self) -> None:
        """The process group stopped (`_terminate`), then the temp dir removed. Idempotent."""
        self._terminate()
        directory, self._dir = self._dir, None
        if directory is not None:
            shutil.rmtree(directory, ignore_errors=True)

    def _terminate(self, sig: signal.Signals = signal.SIGTERM, *, whole_group: bool = True) -> None:
        """`sig` to the process group (or to the leader alone, which then stops its own
        children), SIGKILL to the group after `stop_timeout`; the directory stays."""
        process, self._process, self._url = self._process, None, None
        if process is not None and process.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                if whole_group:
                    os.killpg(process.pid, sig)
                else:
                    process.send_signal(sig)
            try:
                process.wait(timeout=self._stop_timeout)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(process.pid, signal.SIGKILL)
                process.wait(timeout=self._stop_timeout)


class TemporaryPrometheus(TemporaryServer):
    """A real Prometheus over backfilled data, for one `with` block.

    `openmetrics` is the text from `to_openmetrics`, or a path to a file of it (a large
    fleet's, written in pieces), or None for an empty server; `series` are written once it
    is up, through its remote-write receiver (`signals.remotewrite`), which costs a
    fraction of promtool's backfill of the same samples (raw replay goes that way);
    `rule_files` are passed in the config as given. `scrape_configs` are jobs in the form
    of Prometheus' configuration file (none by default: a replay scrapes nothing), written
    as JSON, which YAML reads as is. On enter: a temp dir, promtool
    backfill, then `prometheus` on a free 127.0.0.1 port, waiting for `/-/ready` at most
    `startup_timeout` seconds, then the `series` written. On exit (also when entering
    fails): SIGTERM, SIGKILL after `stop_timeout`, and the temp dir removed.

    Retention is 100y because Prometheus deletes blocks older than its retention at
    start, and recorded incidents are old. The port is found by binding port 0 and
    releasing it; if another process grabs it first, start is retried on a new port.
    """

    def __init__(
        self,
        openmetrics: str | os.PathLike[str] | None = None,
        *,
        rule_files: Sequence[str | os.PathLike[str]] = (),
        startup_timeout: float = 30.0,
        stop_timeout: float = 10.0,
        lookback_delta: float | None = None,
        scrape_configs: Sequence[Mapping[str, object]] = (),
        series: Iterable[OpenMetricsSeries] | None = None,
    ) -> None:
        self._openmetrics = openmetrics
        self._series = series
        self._scrape_configs = [dict(job) for job in scrape_configs]
        self._lookback_delta = lookback_delta
        self._rule_files = [str(Path(p).resolve()) for p in rule_files]
        super().__init__(startup_timeout=startup_timeout, stop_timeout=stop_timeout)

    def start(self) -> None:
        """Backfill and start; on any failure everything started so far is undone."""
        prometheus, promtool = find_binaries()
        self._dir = Path(tempfile.mkdtemp(prefix="llm-triage-prom-"))
        try:
            data = self._dir / "data"
            data.mkdir()
            if isinstance(self._openmetrics, os.PathLike):
                self._backfill(promtool, data, Path(self._openmetrics))
            elif self._openmetrics is not None and self._openmetrics.strip() not in ("", "# EOF"):
                self._backfill(promtool, data)
            self._launch(prometheus)
            if self._series is not None:
                push(self.url, self._series, timeout=max(self._startup_timeout, 60.0))
        except BaseException:
            self.stop()
            raise

    def _config(self) -> str:
        scrape = json.dumps(self._scrape_configs)
        lines = ["global:", "  scrape_interval: 1m", "  evaluation_interval: 1m", f"scrape_configs: {scrape}"]
        if self._rule_files:
            lines.append("rule_files:")
            lines.extend(f"  - {_yaml_quote(path)}" for path in self._rule_files)
        return "\n".join(lines) + "\n"

    def _backfill(self, promtool: str, data: Path, source: Path | None = None) -> None:
        assert self._dir is not None and self._openmetrics is not None
        if source is None:
            source = self._dir / "series.om"
            source.write_text(str(self._openmetrics), encoding="utf-8")
        self._promtool(
            [promtool, "tsdb", "create-blocks-from", "openmetrics", str(source), str(data)],
            self._dir / "promtool.log",
            max(self._startup_timeout, 60.0),
        )

    def _promtool(self, args: Sequence[str], log: Path, timeout: float) -> None:
        """Run a promtool command, its output in `log`; TemporaryPrometheusError with the log's
        tail when it fails or outlives `timeout`."""
        what = " ".join(args[1:4])
        try:
            with log.open("wb") as out:
                result = subprocess.run(
                    args, stdout=out, stderr=subprocess.STDOUT, timeout=timeout, check=False
                )
        except subprocess.TimeoutExpired as exc:
            raise TemporaryPrometheusError(f"promtool {what} timed out:\n{_tail(log)}") from exc
        if result.returncode != 0:
            raise TemporaryPrometheusError(
                f"promtool {what} failed (exit {result.returncode}):\n{_tail(log)}"
            )

    def _launch(self, prometheus: str) -> None:
        """Write the config and serve the data directory (`TemporaryServer._serve`)."""
        assert self._dir is not None
        config, data = self._dir / "prometheus.yml", self._dir / "data"
        config.write_text(self._config(), encoding="utf-8")

        def args(port: int) -> list[str]:
            found = [
                prometheus,
                f"--config.file={config}",
                f"--storage.tsdb.path={data}",
                "--storage.tsdb.retention.time=100y",
                f"--web.listen-address=127.0.0.1:{port}",
                # Loopback only, and how `series` get in.
                "--web.enable-remote-write-receiver",
            ]
            if self._lookback_delta is not None:
                # Backfilled blocks carry no staleness markers; a short lookback makes a series
                # that stopped disappear about when a live Prometheus would have marked it stale.
                found.append(f"--query.lookback-delta={max(1, round(self._lookback_delta))}s")
            return found

        self._serve(args, self._dir / "prometheus.log", _is_ready, TemporaryPrometheusError)

    def backfill_rules(
        self, rule_file: str | os.PathLike[str], start: float, end: float, interval: float
    ) -> None:
        """Evaluate the recording rules of `rule_file` over [start, end] into new blocks
        (`promtool tsdb create-blocks-from rules`, against this server), then restart on the
        data with them, the rule file loaded: as if the rules had been evaluated all along.

        promtool evaluates each rule on its own, so rules that read another rule's series
        of the same file are not supported (the rules of one fleet, without fleet labels, are
        what this serves).
        """
        prometheus, promtool = find_binaries()
        directory = self.directory
        blocks = directory / "rule-blocks"
        self._promtool(
            [
                promtool,
                "tsdb",
                "create-blocks-from",
                "rules",
                "--quiet",
                f"--start={int(start)}",
                f"--end={math.ceil(end)}",
                f"--url={self.url}",
                f"--output-dir={blocks}",
                f"--eval-interval={max(1, round(interval))}s",
                str(Path(rule_file).resolve()),
            ],
            directory / "promtool-rules.log",
            max(self._startup_timeout, 600.0),
        )
        self._terminate()
        for block in blocks.iterdir():
            shutil.move(str(block), directory / "data" / block.name)
        self._rule_files.append(str(Path(rule_file).resolve()))
        self._launch(prometheus)


def _is_ready(url: str) -> bool:
    """One readiness probe; never through an `http_proxy` from the environment (it is loopback)."""
    try:
        with NO_PROXY_OPENER.open(f"{url}/-/ready", timeout=1.0) as response:
            return bool(response.status == 200)
    except (urllib.error.URLError, OSError, ValueError):
        return False


def _yaml_quote(text: str) -> str:
    """A YAML double-quoted scalar, so paths with `:` or `#` survive the config file."""
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'
