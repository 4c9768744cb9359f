"""Helpers for the webhook service tests: an in-process service, a `triage serve` subprocess, waits.

`make_service` builds the same `Service` the command line runs, from the same flags,
so the unit tests exercise the real configuration path. `ServeProcess` runs the real
`triage serve` command in a subprocess, for the crash, signal and end-to-end tests.
Waits poll a condition until a bound (never a fixed sleep): a passing test takes as
long as the system needs, a failing one fails at the bound with what it saw.
"""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, TypeVar

import yaml

from signals.tempprom import free_loopback_port
from triage.service.config import load_config
from triage.service.runtime import Service

ROOT = Path(__file__).resolve().parents[2]
PAYLOADS = json.loads(
    (Path(__file__).resolve().parent / "data" / "alertmanager-webhook-payloads.json").read_text()
)
_NO_PROXY = urllib.request.build_opener(urllib.request.ProxyHandler({}))
T = TypeVar("T")


def closed_port_url() -> str:
    """A loopback URL where nothing listens (connection refused)."""
    return f"http://127.0.0.1:{free_loopback_port()}"


class _IndentedLists(yaml.SafeDumper):
    """Lists indented under their key, as serve.yaml is written by hand, so that a test may
    append another `  - name: ...` sink to the file."""

    def increase_indent(self, flow: bool = False, indentless: bool = False) -> None:
        super().increase_indent(flow, False)


def sink_entry(name: str, kind: str, **keys: Any) -> dict[str, Any]:
    """One sink's settings, retried fast (backoff 0.05 s, at most 0.3 s); `keys` add or override."""
    return {"name": name, "kind": kind, "backoff": 0.05, "max_backoff": 0.3, **keys}


def serve_yaml(tmp_path: Path, *sinks: Mapping[str, Any], extra: str = "", **top: Any) -> str:
    """A serve.yaml with these sinks, Prometheus retried fast, and `top` keys (public_url, ...);
    `extra` is appended as it is (more sinks, since the sinks come last)."""
    document = {**top, "prometheus": {"retry_unavailable": 0.2}, "sinks": [dict(s) for s in sinks]}
    path = tmp_path / "serve.yaml"
    path.write_text(yaml.dump(document, Dumper=_IndentedLists, sort_keys=False) + extra)
    return str(path)


def make_service(store: StoreAt, prometheus: str, **flags: Any) -> Service:
    """A Service from command-line style flags (see triage.service.command)."""
    config = flags.pop("config", None)
    values: dict[str, Any] = {"store": str(store), "prometheus": prometheus, **flags}
    return Service(load_config(config, values))


def deliveries(client: Any, state: str) -> list[dict[str, Any]]:
    """The outbox's messages in `state` (pending, delivered, dead), as `/api/deliveries` lists them."""
    found: list[dict[str, Any]] = client.get(f"/api/deliveries?state={state}").json()["deliveries"]
    return found


def wait_until(condition: Callable[[], T], timeout: float = 30.0, interval: float = 0.05) -> T:
    """Poll until `condition()` is truthy; its value, or AssertionError at the bound."""
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"condition not met within {timeout}s (last value: {value!r})")
        time.sleep(interval)


StoreAt = Path | str
"""Where a test's store is: a SQLite file, or a `postgresql://` URL."""


def rows(db: StoreAt, sql: str, args: Sequence[Any] = ()) -> list[Any]:
    """Read the store directly (read-only), as an operator would; rows by name or position."""
    if isinstance(db, str):
        import psycopg

        from triage.service.store.postgres import placeholders, row_factory

        with psycopg.connect(db, autocommit=True, row_factory=row_factory) as pg:
            pg.read_only = True
            return pg.execute(placeholders(sql), tuple(args)).fetchall()  # type: ignore[arg-type]
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=30)
    conn.row_factory = sqlite3.Row
    try:
        return conn.execute(sql, tuple(args)).fetchall()
    finally:
        conn.close()


def count(db: StoreAt, table: str, where: str = "1=1", args: Sequence[Any] = ()) -> int:
    if isinstance(db, Path) and not db.exists():
        return 0
    return int(rows(db, f"SELECT count(*) FROM {table} WHERE {where}", args)[0][0])


def http(
    method: str, url: str, body: object = None, headers: Mapping[str, str] | None = None, timeout: float = 30
) -> tuple[int, Any]:
    data = json.dumps(body).encode() if body is not None and not isinstance(body, bytes) else body
    request = urllib.request.Request(
        url, data=data, method=method, headers={"Content-Type": "application/json", **(headers or {})}
    )
    try:
        with _NO_PROXY.open(request, timeout=timeout) as response:
            raw = response.read()
            status = response.status
    except urllib.error.HTTPError as exc:
        raw, status = exc.read(), exc.code
    try:
        return status, json.loads(raw)
    except ValueError:
        return status, raw.decode(errors="replace")


class ServeProcess:
    """`triage serve` in a subprocess on a free port; `kill()` is SIGKILL, `terminate()` SIGTERM."""

    def __init__(self, args: Sequence[str], log: Path, port: int | None = None) -> None:
        self.port = port or free_loopback_port()
        self.args = ["--listen", f"127.0.0.1:{self.port}", *args]
        self.log = log
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self, timeout: float = 30.0) -> ServeProcess:
        handle = self.log.open("ab")
        env = {**os.environ, "NO_PROXY": "*", "no_proxy": "*"}
        self.process = subprocess.Popen(
            [sys.executable, "-m", "triage.cli.main", "serve", *self.args],
            stdout=handle,
            stderr=handle,
            env=env,
            cwd=ROOT,
        )
        handle.close()

        def up() -> bool:
            assert self.process is not None
            if self.process.poll() is not None:
                raise AssertionError(
                    f"triage serve exited {self.process.returncode}: {self.log.read_text()[-2000:]}"
                )
            try:
                return http("GET", f"{self.url}/healthz", timeout=1)[0] == 200
            except OSError:
                return False

        wait_until(up, timeout)
        return self

    def kill(self, leftovers_within: float = 5.0) -> None:
        """SIGKILL the service; every process it started must be gone `leftovers_within` later."""
        assert self.process is not None
        started = descendants(self.process.pid)
        self.process.send_signal(signal.SIGKILL)
        self.process.wait(10)
        deadline = time.monotonic() + leftovers_within
        while started and time.monotonic() < deadline:
            started = [pid for pid in started if _alive(pid)]
            time.sleep(0.1)
        assert not started, f"processes of the killed service still run: {started}"

    def terminate(self, timeout: float = 40.0) -> int:
        assert self.process is not None
        self.process.send_signal(signal.SIGTERM)
        return self.process.wait(timeout)

    def __enter__(self) -> ServeProcess:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait(10)


def descendants(pid: int) -> list[int]:
    """Every process below `pid`, read from /proc (children, their children, ...)."""
    parents: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        parents[int(entry.name)] = int(fields[1])
    found: list[int] = []
    frontier = [pid]
    while frontier:
        current = frontier.pop()
        children = [p for p, parent in parents.items() if parent == current]
        found += children
        frontier += children
    return found


def _alive(pid: int) -> bool:
    """A process that exists and is not a zombie."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"
