"""A temporary, real PostgreSQL for the tests of the webhook service's shared store.

The store's promises (no alert lost or sent twice while PostgreSQL restarts or the
network to it stalls) are about a real server's behaviour: its crash recovery, its
terminated sessions, its locks. So the tests run one: `initdb` into a private temporary
directory, then `postgres` on a free loopback port with its Unix socket in that
directory too, so nothing collides with a system cluster or another test run.

Durability settings are those of a throwaway server (`fsync=off`, `full_page_writes=off`:
a test survives a process crash, never a machine crash) except `synchronous_commit=on`,
so a commit the client saw is in the WAL the kernel holds and survives `restart("immediate")`
(SIGQUIT, PostgreSQL's crash-like stop) exactly as the store relies on.

PostgreSQL refuses to run as root, so under root (CI containers) `initdb` and `postgres`
run as the `postgres` system user, which then owns the directory. The process handling
(port retries, readiness loop, process-group kill, directory removal) is
`signals.tempprom.TemporaryServer`'s, shared with the temporary Prometheus and
VictoriaMetrics.
"""

from __future__ import annotations

import glob
import os
import pwd
import shutil
import signal
import stat
import subprocess
import tempfile
import uuid
from collections.abc import Mapping
from pathlib import Path
from types import TracebackType
from urllib.parse import quote

import psycopg
import pytest
from psycopg import sql

from signals.errors import SignalError
from signals.tempprom import TemporaryServer, _tail

SYSTEM_USER = "postgres"
"""The user PostgreSQL runs as when the tests run as root (Debian's package creates it)."""

STOP_SIGNALS = {"smart": signal.SIGTERM, "fast": signal.SIGINT, "immediate": signal.SIGQUIT}
"""PostgreSQL's shutdown modes and the signal to the postmaster that asks for each: `fast`
ends the sessions and checkpoints; `immediate` ends everything at once, with crash
recovery at the next start, like a killed server."""

MISSING_BINARIES = (
    "PostgreSQL server binaries (postgres, initdb) not found in /usr/lib/postgresql/*/bin "
    "nor by `pg_config --bindir`: install the Debian package `postgresql`"
)


class PostgresUnavailable(SignalError):
    """No PostgreSQL server binaries, or no way to run them (root without a `postgres` user)."""


class TemporaryPostgresError(SignalError):
    """`initdb` or `postgres` failed or was not ready in time; the message carries the log tail."""


def _has_server(bindir: Path) -> bool:
    return all(os.access(bindir / name, os.X_OK) for name in ("postgres", "initdb"))


def find_postgres_bindir() -> Path | None:
    """The newest `/usr/lib/postgresql/<version>/bin` with `postgres` and `initdb`, else
    `pg_config --bindir` if it has them, else None.

    Debian keeps the server binaries off PATH (only client wrappers are there), hence the
    directory scan; versions compare as numbers so 15 is newer than 9.6.
    """

    def version(path: str) -> tuple[int, ...]:
        name = Path(path).parent.name
        return tuple(int(part) for part in name.split(".") if part.isdigit())

    for candidate in sorted(glob.glob("/usr/lib/postgresql/*/bin"), key=version, reverse=True):
        if _has_server(Path(candidate)):
            return Path(candidate)
    pg_config = shutil.which("pg_config")
    if pg_config is not None:
        try:
            found = subprocess.run(
                [pg_config, "--bindir"], capture_output=True, text=True, timeout=10, check=True
            ).stdout.strip()
        except (OSError, subprocess.SubprocessError):
            return None
        if found and _has_server(Path(found)):
            return Path(found)
    return None


def require_postgres() -> Path:
    """The server binaries' directory; skip loudly without them, fail under CI=true, since CI
    installs PostgreSQL and must run these tests."""
    bindir = find_postgres_bindir()
    if bindir is not None:
        return bindir
    reason = f"!!! {MISSING_BINARIES}: PostgreSQL tests NOT RUN !!!"
    if os.environ.get("CI") == "true":
        pytest.fail(reason)
    pytest.skip(reason)


def _run_as() -> str | None:
    """`postgres` when running as root (PostgreSQL refuses root), else None: the current user."""
    if os.geteuid() != 0:
        return None
    try:
        pwd.getpwnam(SYSTEM_USER)
    except KeyError as exc:
        raise PostgresUnavailable(
            f"running as root and there is no `{SYSTEM_USER}` user to run PostgreSQL as "
            "(PostgreSQL refuses to run as root): install the Debian package `postgresql`"
        ) from exc
    return SYSTEM_USER


def _check_traversable(directory: Path) -> None:
    """Every parent of `directory` must let others through, or the `postgres` user cannot
    reach its own data (a TMPDIR under /root, say); said plainly instead of a log line."""
    for parent in directory.parents:
        if not parent.stat().st_mode & stat.S_IXOTH:
            raise PostgresUnavailable(
                f"{parent} is not traversable by the `{SYSTEM_USER}` user that runs PostgreSQL "
                f"under root; point TMPDIR at a directory it can reach (e.g. /tmp)"
            )


def _accepts(url: str) -> bool:
    """One readiness probe: a real connection, since a listening socket is not a ready server
    (it refuses sessions while it starts up or recovers)."""
    try:
        with psycopg.connect(url, connect_timeout=2):
            return True
    except psycopg.Error:
        return False


class TemporaryPostgres(TemporaryServer):
    """A real PostgreSQL in a private temporary directory, for one `with` block (or a session).

    `start()` runs `initdb` the first time, then `postgres` on a free 127.0.0.1 port; after
    `stop(mode)` a `start()` serves the same data on the same port, so a client's URL stays
    valid across `restart`. `close()` (or leaving the `with`) stops it and removes the
    directory, whatever happened. `settings` are further `postgres -c` settings, over the
    defaults (a benchmark's `{"fsync": "on", "full_page_writes": "on"}`, say).
    """

    def __init__(
        self,
        *,
        bindir: Path | None = None,
        startup_timeout: float = 30.0,
        stop_timeout: float = 10.0,
        max_connections: int = 200,
        settings: Mapping[str, str] | None = None,
    ) -> None:
        super().__init__(startup_timeout=startup_timeout, stop_timeout=stop_timeout)
        self._bindir = bindir
        self._max_connections = max_connections
        self._settings = dict(settings or {})

    def _url_for(self, port: int) -> str:
        return f"postgresql://{SYSTEM_USER}@127.0.0.1:{port}/postgres"

    @property
    def host(self) -> str:
        return "127.0.0.1"

    @property
    def port(self) -> int:
        """The port, kept across `stop` so a restart serves where clients expect it."""
        if self._port is None:
            raise RuntimeError("TemporaryPostgres was never started")
        return self._port

    @property
    def running(self) -> bool:
        return self._process is not None and self._process.poll() is None

    def start(self) -> None:
        """The first time: a directory, `initdb` and a server on a free port; after `stop`: the
        same data on the same port. On a failed first start everything is undone; on a failed
        restart the server is stopped and the directory kept, for `close` to remove."""
        if self.running:
            raise RuntimeError("TemporaryPostgres is already running")
        bindir = self._bindir or find_postgres_bindir()
        if bindir is None:
            raise PostgresUnavailable(MISSING_BINARIES)
        first = self._dir is None
        run_as = _run_as()
        if first:
            self._dir = Path(tempfile.mkdtemp(prefix="llm-triage-pg-"))
        try:
            if first:
                self._initdb(bindir, run_as)
            self._serve(
                lambda port: self._args(bindir, port),
                self.directory / "postgres.log",
                _accepts,
                TemporaryPostgresError,
                port=None if first else self._port,
                run_as=run_as,
            )
        except BaseException:
            if first:
                self.close()
            else:
                self.stop("immediate")
            raise

    def _initdb(self, bindir: Path, run_as: str | None) -> None:
        directory = self.directory
        if run_as is not None:
            _check_traversable(directory)
            shutil.chown(directory, run_as, run_as)
        log = directory / "initdb.log"
        args = [str(bindir / "initdb"), "-D", str(directory / "data"), "-A", "trust"]
        args += ["-U", SYSTEM_USER, "-E", "UTF8", "--no-sync"]
        try:
            with log.open("wb") as out:
                result = subprocess.run(
                    args,
                    stdout=out,
                    stderr=subprocess.STDOUT,
                    stdin=subprocess.DEVNULL,
                    cwd=directory,
                    user=run_as,
                    group=run_as,
                    extra_groups=None if run_as is None else [],
                    timeout=max(self._startup_timeout, 60.0),
                    check=False,
                )
        except subprocess.TimeoutExpired as exc:
            raise TemporaryPostgresError(f"initdb timed out:\n{_tail(log)}") from exc
        if result.returncode != 0:
            raise TemporaryPostgresError(f"initdb failed (exit {result.returncode}):\n{_tail(log)}")

    def _args(self, bindir: Path, port: int) -> list[str]:
        directory = self.directory
        settings = {
            "listen_addresses": "127.0.0.1",
            "unix_socket_directories": str(directory),
            "fsync": "off",
            "synchronous_commit": "on",
            "full_page_writes": "off",
            "max_connections": str(self._max_connections),
            "shared_buffers": "64MB",
            **self._settings,
        }
        args = [str(bindir / "postgres"), "-D", str(directory / "data"), "-p", str(port)]
        for name, value in settings.items():
            args += ["-c", f"{name}={value}"]
        return args

    def create_database(self, name: str | None = None) -> str:
        """CREATE DATABASE `name` (a fresh unique one when None) and its URL: a test's own
        tables, with nothing to clean between tests."""
        name = name or f"test_{uuid.uuid4().hex[:12]}"
        with psycopg.connect(self.url, autocommit=True, connect_timeout=10) as conn:
            conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
        return f"postgresql://{SYSTEM_USER}@{self.host}:{self.port}/{quote(name, safe='')}"

    def drop_database(self, name: str) -> None:
        """DROP DATABASE `name` if it exists, ending any session still in it (`WITH (FORCE)`),
        so a session's server does not fill its disk with one copy of template1 per test."""
        with psycopg.connect(self.url, autocommit=True, connect_timeout=10) as conn:
            conn.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name)))

    def stop(self, mode: str = "fast") -> None:
        """Stop the server, keeping its data and port for `start`: `fast` (SIGINT: sessions
        ended, a checkpoint), `immediate` (SIGQUIT: a crash-like stop) or `smart` (SIGTERM:
        waits for the sessions to end). The signal goes to the postmaster alone, which stops
        its children; the whole process group is killed after `stop_timeout`."""
        if mode not in STOP_SIGNALS:
            raise ValueError(f"unknown stop mode {mode!r}; one of {sorted(STOP_SIGNALS)}")
        self._terminate(STOP_SIGNALS[mode], whole_group=False)

    def restart(self, mode: str = "fast") -> None:
        """`stop(mode)` then `start()`: the same data on the same port."""
        self.stop(mode)
        self.start()

    def close(self) -> None:
        """Stop the server (fast) and remove its directory. Idempotent."""
        try:
            self.stop("fast")
        finally:
            super().stop()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()
