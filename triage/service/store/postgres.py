"""The shared store: PostgreSQL through psycopg 3, for several `triage serve` replicas at once.

Why it is built this way:

- **Any replica takes any request.** No leader: work and messages are claimed row by
  row (`FOR UPDATE SKIP LOCKED` for work, so replicas never wait on each other's
  claims), each claim with a lease that runs out when its replica dies. The changes to
  one alert group (intake, a finished diagnosis, closing) hold a transaction-scoped
  advisory lock on the group, so two replicas never interleave them; a transaction that
  loses a race anyway (a unique key taken meanwhile, a deadlock) runs again.
- **Every wait is bounded.** A store that cannot commit must answer the intake 503
  within seconds, so Alertmanager retries, and never hang it. Connections are made on
  demand in the caller's thread with `connect_timeout`; the server drops a session left
  idle inside a transaction and stops waiting for a lock after a few seconds; and a
  watchdog shuts the socket of any transaction still running after `timeout`, which
  also frees a caller stuck on a network path that has stopped forwarding (no keepalive
  or server-side timeout sees that: the peer's kernel still acknowledges).
- **No background reconnection.** A broken connection is dropped, and the next caller
  connects afresh, so the store is back as soon as the database is, with no backoff
  left running from an outage.
"""

from __future__ import annotations

import functools
import os
import socket
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from typing import Any

import psycopg
from psycopg import errors
from psycopg.conninfo import conninfo_to_dict
from psycopg.pq import TransactionStatus

from triage.service.store.backend import Backend, StoreOpenError
from triage.service.store.schema import POSTGRESQL, SchemaTooNew, apply_pending

MIGRATION_LOCK = 0x7472696167650001
"""The advisory lock held while a replica upgrades the schema ('triage' and 1)."""

MAX_IDLE = 16
"""Connections kept open between uses; more are made while needed and closed after."""


class Row:
    """A row read by column name or position, like `sqlite3.Row`, so the store's code serves both."""

    __slots__ = ("_index", "_values")

    def __init__(self, values: Sequence[Any], index: dict[str, int]) -> None:
        self._values = values
        self._index = index

    def __getitem__(self, key: int | slice | str) -> Any:
        return self._values[key if isinstance(key, int | slice) else self._index[key]]

    def __iter__(self) -> Iterator[Any]:
        return iter(self._values)

    def __len__(self) -> int:
        return len(self._values)

    def keys(self) -> list[str]:
        return list(self._index)

    def __repr__(self) -> str:
        return f"Row({dict(zip(self._index, self._values, strict=True))!r})"


def row_factory(cursor: Any) -> Any:
    index = {c.name: i for i, c in enumerate(cursor.description or ())}
    return lambda values: Row(values, index)


@functools.lru_cache(maxsize=512)
def placeholders(sql: str) -> str:
    """The store's `?` parameters as psycopg's `%s` (the SQL holds no `?` or `%` of its own)."""
    return sql.replace("%", "%%").replace("?", "%s")


class _Tx:
    """A connection that takes the store's SQL."""

    __slots__ = ("_conn",)

    def __init__(self, conn: psycopg.Connection[Any]) -> None:
        self._conn = conn

    def execute(self, sql: str, args: Sequence[Any] = ()) -> psycopg.Cursor[Any]:
        return self._conn.execute(placeholders(sql), tuple(args))

    def pipeline(self) -> AbstractContextManager[object]:
        return self._conn.pipeline()

    def executemany(self, sql: str, rows: Sequence[Sequence[Any]]) -> None:
        """All rows in one pipeline: one round trip, not one per row."""
        with self._conn.cursor() as cursor:
            cursor.executemany(placeholders(sql), rows)


class _Watchdog:
    """Shuts the socket of a connection whose guarded block outlives its deadline.

    The blocked call then fails at once with `OperationalError` (the connection is
    closed), instead of waiting on a peer that will never answer.
    """

    def __init__(self, every: float = 0.1) -> None:
        self._guards: dict[int, tuple[float, psycopg.Connection[Any], _Guard]] = {}
        self._lock = threading.Lock()
        self._next = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(
            target=self._run, args=(every,), name="triage-store-watchdog", daemon=True
        )
        self._thread.start()

    @contextmanager
    def guard(self, conn: psycopg.Connection[Any], timeout: float, guard: _Guard) -> Iterator[None]:
        with self._lock:
            self._next += 1
            token = self._next
            self._guards[token] = (time.monotonic() + timeout, conn, guard)
        try:
            yield
        finally:
            with self._lock:
                self._guards.pop(token, None)

    def _run(self, every: float) -> None:
        while not self._stop.wait(every):
            now = time.monotonic()
            with (
                self._lock
            ):  # marked under the lock: a block ending now sees it before it pools the connection
                late = [t for t, (deadline, _, _) in self._guards.items() if deadline < now]
                fired = [self._guards.pop(t) for t in late]
                for _, _, guard in fired:
                    guard.fired = True
            for _, conn, _ in fired:
                _shut(conn)

    def close(self) -> None:
        self._stop.set()
        self._thread.join(2)


class _Guard:
    """Whether the watchdog cut the guarded block short."""

    __slots__ = ("fired",)

    def __init__(self) -> None:
        self.fired = False


def _shut(conn: psycopg.Connection[Any]) -> None:
    try:
        fd = conn.pgconn.socket
    except psycopg.Error:
        return
    try:
        with socket.socket(fileno=os.dup(fd)) as sock:
            sock.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass


class PostgresBackend(Backend):
    """A PostgreSQL database shared by every replica of the service."""

    skip_locked = " FOR UPDATE SKIP LOCKED"
    for_update = " FOR UPDATE"
    unavailable = (psycopg.Error,)
    conflicts = (errors.UniqueViolation, errors.DeadlockDetected, errors.SerializationFailure)

    def __init__(self, url: str, timeout: float = 5.0) -> None:
        try:
            params = conninfo_to_dict(url)
        except psycopg.ProgrammingError as exc:
            raise StoreOpenError(f"not a PostgreSQL URL: {exc}") from None
        self.location = "postgresql://{}@{}:{}/{}".format(
            params.get("user", ""),
            params.get("host", ""),
            params.get("port", "5432"),
            params.get("dbname", ""),
        )
        self.timeout = timeout
        wait_ms = int(timeout * 1000)
        server = (
            f"-c lock_timeout={wait_ms} -c idle_in_transaction_session_timeout={2 * wait_ms} "
            f"-c statement_timeout={4 * wait_ms}"
        )
        self._url = url
        self._params: dict[str, Any] = {
            "autocommit": True,
            "row_factory": row_factory,
            "connect_timeout": max(2, round(timeout)),
            "application_name": params.get("application_name", "llm-triage"),
            "options": f"{params.get('options', '')} {server}".strip(),
        }
        self._idle: list[psycopg.Connection[Any]] = []
        self._idle_lock = threading.Lock()
        self._watchdog = _Watchdog()
        try:
            self._migrate()
        except (psycopg.Error, SchemaTooNew) as exc:
            self.close()
            raise StoreOpenError(f"cannot open the store at {self.location}: {exc}".strip()) from None
        except BaseException:
            self.close()
            raise

    def _connect(self) -> psycopg.Connection[Any]:
        return psycopg.connect(self._url, **self._params)

    def _get(self) -> psycopg.Connection[Any]:
        with self._idle_lock:
            while self._idle:
                conn = self._idle.pop()
                if not conn.closed:
                    return conn
        return self._connect()

    def _put(self, conn: psycopg.Connection[Any], cut: bool) -> None:
        """Keep a connection for the next caller, unless it is broken or the watchdog cut it."""
        healthy = not cut and not conn.closed and conn.info.transaction_status == TransactionStatus.IDLE
        if healthy:
            with self._idle_lock:
                if len(self._idle) < MAX_IDLE:
                    self._idle.append(conn)
                    return
        conn.close()

    @contextmanager
    def _connection(self, timeout: float | None = None) -> Iterator[psycopg.Connection[Any]]:
        conn = self._get()
        limit = self.timeout if timeout is None else timeout
        guard = _Guard()
        try:
            with self._watchdog.guard(conn, limit, guard):
                try:
                    yield conn
                except psycopg.OperationalError as exc:
                    if guard.fired:
                        raise psycopg.OperationalError(
                            f"no answer from the store at {self.location} within {limit:g} s"
                        ) from exc
                    raise
        finally:
            # A block that ended just as its deadline passed may have had its socket shut.
            self._put(conn, guard.fired)

    @contextmanager
    def write(self, timeout: float | None = None) -> Iterator[_Tx]:
        with self._connection(timeout) as conn, conn.transaction():
            yield _Tx(conn)

    @contextmanager
    def read(self) -> Iterator[_Tx]:
        with self._connection() as conn:
            yield _Tx(conn)

    def pipeline(self, db: Any) -> AbstractContextManager[object]:
        tx: _Tx = db
        return tx.pipeline()

    def lock_group(self, db: Any, group_key: str) -> None:
        db.execute("SELECT pg_advisory_xact_lock(hashtextextended(?, 0))", (f"triage group {group_key}",))

    def _migrate(self) -> None:
        with self._connection() as conn, conn.transaction():
            conn.execute("SELECT pg_advisory_xact_lock(%s)", (MIGRATION_LOCK,))
            apply_pending(_Tx(conn), POSTGRESQL)

    def close(self) -> None:
        self._watchdog.close()
        with self._idle_lock:
            idle, self._idle = self._idle, []
        for conn in idle:
            conn.close()
