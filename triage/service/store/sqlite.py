"""The embedded store: one SQLite file, one writer under one lock, a reader per thread.

All writes go through one connection under one lock (SQLite allows one writer at a time
anyway, and a Python lock queues fairly where `busy_timeout` would spin); reads use a
connection per thread, which WAL lets run beside the writer; a background thread copies
the WAL back. One process owns the file, so work found running at open was cut off by
a crash and is made pending again.
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Iterator
from contextlib import contextmanager

from triage.service.store.backend import Backend, StoreOpenError
from triage.service.store.schema import (
    SQLITE,
    SchemaTooNew,
    apply_pending,
    upgrade_unversioned_sqlite,
)


class SqliteBackend(Backend):
    """A SQLite file in WAL mode."""

    unavailable = (sqlite3.Error,)

    def __init__(self, path: str, synchronous: str = "normal") -> None:
        if synchronous not in ("normal", "full"):
            raise ValueError("synchronous is normal or full")
        self.synchronous = synchronous.upper()
        self.path = path
        self.location = path
        self._lock = threading.Lock()
        self._local = threading.local()
        try:
            self._writer = self._connect()
            with self._lock:
                self._open()
        except (sqlite3.Error, SchemaTooNew) as exc:
            raise StoreOpenError(f"cannot open {path}: {exc}") from None
        self._closed = threading.Event()
        self._checkpointer = threading.Thread(target=self._checkpoints, name="triage-checkpoint", daemon=True)
        self._checkpointer.start()

    def _open(self) -> None:
        self._migrate()
        self._writer.execute(
            "UPDATE work SET state = 'pending', claim = NULL, lease_until = NULL WHERE state = 'running'"
        )
        # Checkpoints copy the WAL back into the database and sync it; done by the
        # committing connection they stall one intake request now and then, so they
        # run on a thread of their own instead (see `_checkpoints`).
        self._writer.execute("PRAGMA wal_autocheckpoint=0")

    def _migrate(self) -> None:
        db = self._writer
        upgrade_unversioned_sqlite(db)
        db.execute("BEGIN IMMEDIATE")
        try:
            apply_pending(db, SQLITE)
            db.execute("COMMIT")
        except BaseException:
            db.execute("ROLLBACK")
            raise

    def _checkpoints(self, every: float = 1.0) -> None:
        """Copy the WAL into the database in the background; PASSIVE never blocks a writer."""
        conn = self._connect()
        try:
            while not self._closed.wait(every):
                try:
                    conn.execute("PRAGMA wal_checkpoint(PASSIVE)")
                except sqlite3.Error:
                    continue
        finally:
            conn.close()

    def _connect(self) -> sqlite3.Connection:
        conn = sqlite3.connect(self.path, check_same_thread=False, isolation_level=None, timeout=30)
        conn.row_factory = sqlite3.Row
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute(f"PRAGMA synchronous={self.synchronous}")
        conn.execute("PRAGMA busy_timeout=30000")
        conn.execute("PRAGMA foreign_keys=ON")
        return conn

    def close(self) -> None:
        self._closed.set()
        self._checkpointer.join(5)
        with self._lock:
            self._writer.close()

    @contextmanager
    def write(self, timeout: float | None = None) -> Iterator[sqlite3.Connection]:
        """One write transaction (BEGIN IMMEDIATE ... COMMIT), rolled back on any error."""
        with self._lock:
            conn = self._writer
            conn.execute("BEGIN IMMEDIATE")
            try:
                yield conn
            except BaseException:
                conn.execute("ROLLBACK")
                raise
            conn.execute("COMMIT")

    @contextmanager
    def read(self) -> Iterator[sqlite3.Connection]:
        conn: sqlite3.Connection | None = getattr(self._local, "conn", None)
        if conn is None:
            conn = self._connect()
            self._local.conn = conn
        yield conn
