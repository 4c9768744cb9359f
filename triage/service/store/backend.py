"""What the store asks of a database, and the choice between the two it runs on.

The store's SQL is written once, with `?` parameters, and runs on SQLite (the embedded
default: one process, one file) and on PostgreSQL (several replicas on one shared
database). A backend hands out transactions and reads, says which of its errors mean
"the store cannot be reached or written" (the intake answers 503 then, and Alertmanager
retries) and which mean "a concurrent transaction won, run it again", and supplies the
little SQL that differs: row locks for claiming, and a lock per alert group.
"""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from contextlib import AbstractContextManager
from typing import Any, Protocol


class Row(Protocol):
    """A row read by column name or position (`sqlite3.Row`, or the PostgreSQL backend's `Row`)."""

    def __getitem__(self, key: int | str) -> Any: ...

    def keys(self) -> list[str]: ...


class Cursor(Protocol):
    rowcount: int

    def fetchone(self) -> Any: ...

    def fetchall(self) -> list[Any]: ...


class Tx(Protocol):
    """A transaction or a read: statements with `?` parameters; rows read by name or position."""

    def execute(self, sql: str, args: Sequence[Any] = ()) -> Cursor: ...

    def executemany(self, sql: str, rows: Sequence[Sequence[Any]]) -> Any: ...


class Backend:
    """A database the store runs on; subclasses are `SqliteBackend` and `PostgresBackend`."""

    skip_locked = ""
    """Appended to a claim's row choice: rows another replica is claiming are passed over."""
    for_update = ""
    """Appended to a row choice that must wait for another replica's claim of that row."""
    unavailable: tuple[type[BaseException], ...] = ()
    """Errors that mean the store cannot be reached or written right now."""
    conflicts: tuple[type[BaseException], ...] = ()
    """Errors after which the same transaction, run again, may succeed."""
    location = ""
    """Where the store is, fit for logs and errors (never a password)."""

    def write(self, timeout: float | None = None) -> AbstractContextManager[Any]:
        """One write transaction, committed at the end of the block, rolled back on any error.

        `timeout` bounds how long it may take where the database is remote (the store's own
        timeout by default)."""
        raise NotImplementedError

    def read(self) -> AbstractContextManager[Any]:
        """A connection to read on, for one block."""
        raise NotImplementedError

    def pipeline(self, db: Tx) -> AbstractContextManager[object]:
        """A block whose statements go to the database together (PostgreSQL's pipeline mode):
        results are read after it. A no-op where statements cost no round trip (SQLite)."""
        return contextlib.nullcontext()

    def lock_group(self, db: Tx, group_key: str) -> None:
        """Serialise the transactions that change one alert group, until this one ends."""

    def close(self) -> None:
        raise NotImplementedError


class StoreOpenError(RuntimeError):
    """The store cannot be opened: unreachable, unreadable, or of a layout this code does not know."""


def is_database_url(location: str) -> bool:
    return location.startswith(("postgresql://", "postgres://"))


def open_backend(location: str, *, synchronous: str = "normal", timeout: float = 5.0) -> Backend:
    """A SQLite file path, or a `postgresql://` URL; the schema brought up to date on open."""
    if is_database_url(location):
        from triage.service.store.postgres import PostgresBackend

        return PostgresBackend(location, timeout=timeout)
    from triage.service.store.sqlite import SqliteBackend

    return SqliteBackend(location, synchronous=synchronous)
