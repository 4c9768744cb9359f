"""The store's tables, as versioned migrations for each database: applied at open, never recreated.

Kept apart so the whole layout of the durable state reads in one place, whichever
module writes or reads a table.

A store records the migrations applied to it in `schema_migrations`. Opening one applies
the missing ones in order, in one transaction, so an existing store is upgraded with
every row kept; a store newer than this code is refused rather than guessed at. On
PostgreSQL the transaction also holds an advisory lock, so replicas starting together
upgrade it once.

A work row is one group's diagnosis at one moment for one fleet: `fleet` (the fleet
labels its alerts carry, empty when none) is part of its identity, so alerts of one
group about two fleets are diagnosed apart; `scope` says which fleet was read. A claimed
row carries its `claim` (a token per claim) and `lease_until`; an outbox row being sent
carries the same pair. A lease that runs out (its replica died) makes the row free for
any replica.

A SQLite store written before versioning gets version 1 applied like a new one (its
statements create only what is missing); one written before fleets has its `work` table
rebuilt with the fleet columns first (`upgrade_unversioned_sqlite`), in one transaction,
every row kept (as fleet '').
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Migration:
    """One step of the layout: its number, what it does, and its statements (`;`-separated)."""

    version: int
    description: str
    sql: str

    def statements(self) -> list[str]:
        return [s.strip() for s in self.sql.split(";") if s.strip()]

    def row(self) -> tuple[int, str, str]:
        """Its row in `schema_migrations`, stamped now (UTC)."""
        return (self.version, self.description, time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()))


MIGRATIONS_TABLE = (
    "CREATE TABLE IF NOT EXISTS schema_migrations (version INTEGER PRIMARY KEY, "
    "description TEXT NOT NULL, applied_at TEXT NOT NULL)"
)

_TABLES = """
CREATE TABLE IF NOT EXISTS groups (
    group_key TEXT PRIMARY KEY,
    receiver TEXT NOT NULL,
    group_labels TEXT NOT NULL,
    external_url TEXT NOT NULL,
    truncated INTEGER NOT NULL DEFAULT 0,
    episode INTEGER NOT NULL DEFAULT 1,
    closed INTEGER NOT NULL DEFAULT 0,
    last_signature TEXT,
    notifications INTEGER NOT NULL DEFAULT 0,
    updated_at REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS work (
    id $ID,
    group_key TEXT NOT NULL,
    at REAL NOT NULL,
    symptom TEXT NOT NULL,
    symptom_source TEXT NOT NULL,
    state TEXT NOT NULL CHECK (state IN ('pending', 'running', 'done')),
    attempts INTEGER NOT NULL DEFAULT 0,
    fetches INTEGER NOT NULL DEFAULT 0,
    next_at REAL NOT NULL,
    created_at REAL NOT NULL,
    done_at REAL,
    signature TEXT,
    unavailable TEXT,
    summary TEXT,
    diagnosis TEXT,
    episode INTEGER NOT NULL DEFAULT 1,
    fleet TEXT NOT NULL DEFAULT '',
    scope TEXT,
    UNIQUE (group_key, episode, at, symptom, fleet)
);
CREATE INDEX IF NOT EXISTS work_due ON work (state, next_at);
CREATE INDEX IF NOT EXISTS work_group ON work (group_key, episode, symptom, fleet, at);
CREATE TABLE IF NOT EXISTS annotations (
    id $ID,
    fingerprint TEXT NOT NULL,
    starts_at REAL NOT NULL,
    group_key TEXT NOT NULL,
    alertname TEXT NOT NULL,
    labels TEXT NOT NULL,
    annotations TEXT NOT NULL,
    generator_url TEXT NOT NULL,
    status TEXT NOT NULL,
    ends_at REAL,
    first_seen REAL NOT NULL,
    last_seen REAL NOT NULL,
    seen INTEGER NOT NULL DEFAULT 1,
    work_id INTEGER NOT NULL REFERENCES work (id),
    state TEXT NOT NULL DEFAULT 'pending' CHECK (state IN ('pending', 'annotated', 'unavailable')),
    symptom TEXT,
    cause TEXT,
    signals TEXT,
    annotated_at REAL,
    truncated INTEGER NOT NULL DEFAULT 0,
    episode INTEGER NOT NULL DEFAULT 1,
    UNIQUE (fingerprint, starts_at)
);
CREATE INDEX IF NOT EXISTS annotations_group ON annotations (group_key, status);
CREATE INDEX IF NOT EXISTS annotations_work ON annotations (work_id);
CREATE INDEX IF NOT EXISTS annotations_alertname ON annotations (alertname);
CREATE TABLE IF NOT EXISTS outbox (
    id $ID,
    sink TEXT NOT NULL,
    key TEXT NOT NULL,
    group_key TEXT NOT NULL,
    kind TEXT NOT NULL,
    message TEXT NOT NULL,
    state TEXT NOT NULL DEFAULT 'pending' CHECK (state IN ('pending', 'delivered', 'dead')),
    attempts INTEGER NOT NULL DEFAULT 0,
    next_at REAL NOT NULL,
    last_error TEXT,
    created_at REAL NOT NULL,
    delivered_at REAL,
    UNIQUE (sink, key)
);
CREATE INDEX IF NOT EXISTS outbox_due ON outbox (sink, state, id);
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)
"""
"""The layout of version 1, in the SQL both databases share; `$ID` is each one's row id."""

_LEASES = """
ALTER TABLE work ADD COLUMN claim TEXT;
ALTER TABLE work ADD COLUMN lease_until REAL;
ALTER TABLE outbox ADD COLUMN claim TEXT;
ALTER TABLE outbox ADD COLUMN lease_until REAL
"""

SQLITE: Sequence[Migration] = (
    Migration(1, "groups, work, annotations, outbox and meta", _TABLES.replace("$ID", "INTEGER PRIMARY KEY")),
    Migration(2, "leases on claimed work and on messages being sent", _LEASES),
)

POSTGRESQL: Sequence[Migration] = (
    Migration(
        1,
        "groups, work, annotations, outbox and meta",
        # REAL is single precision in PostgreSQL: epoch seconds need double precision.
        _TABLES.replace("$ID", "BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY")
        .replace("work_id INTEGER", "work_id BIGINT")
        .replace(" REAL", " DOUBLE PRECISION"),
    ),
    Migration(
        2, "leases on claimed work and on messages being sent", _LEASES.replace(" REAL", " DOUBLE PRECISION")
    ),
)


class SchemaTooNew(RuntimeError):
    """The store was written by a newer triage: its layout is not guessed at."""


def pending(applied: Sequence[int], migrations: Sequence[Migration]) -> list[Migration]:
    """The migrations still to apply, in order; SchemaTooNew when the store knows more than the code."""
    newest = max(applied, default=0)
    known = max((m.version for m in migrations), default=0)
    if newest > known:
        raise SchemaTooNew(
            f"the store's schema is at version {newest}, newer than the {known} this triage knows; "
            "run a triage at least as new as the one that wrote it"
        )
    done = set(applied)
    return [m for m in migrations if m.version not in done]


def apply_pending(db: Any, migrations: Sequence[Migration]) -> None:
    """Apply the migrations `db` lacks and record them, inside the caller's transaction.

    `db` runs the store's SQL (`?` parameters): a SQLite connection, or the PostgreSQL
    backend's transaction.
    """
    db.execute(MIGRATIONS_TABLE)
    applied = [int(r[0]) for r in db.execute("SELECT version FROM schema_migrations").fetchall()]
    for migration in pending(applied, migrations):
        for statement in migration.statements():
            db.execute(statement)
        db.execute("INSERT INTO schema_migrations VALUES (?, ?, ?)", migration.row())


def _columns(db: sqlite3.Connection, table: str) -> list[str]:
    return [str(row[1]) for row in db.execute(f"PRAGMA table_info({table})")]


def _work_table() -> str:
    start = _TABLES.index("CREATE TABLE IF NOT EXISTS work (")
    table = _TABLES[start : _TABLES.index(");", start) + 2]
    return table.replace("$ID", "INTEGER PRIMARY KEY")


def upgrade_unversioned_sqlite(db: sqlite3.Connection) -> None:
    """Give a SQLite store written before fleets its fleet columns, so version 1 applies to it.

    A store whose `work` table lacks the fleet columns changes the uniqueness of a work
    row, which SQLite cannot alter in place: the rows are copied into a new table, in one
    transaction with foreign keys off meanwhile (SQLite's procedure for changing a
    table's schema). Version 1 (every statement `IF NOT EXISTS`) then creates whatever
    else is missing and is recorded, as on a new store.
    """
    old = _columns(db, "work")
    if _columns(db, "schema_migrations") or not old or "fleet" in old:
        return
    db.execute("PRAGMA foreign_keys=OFF")
    try:
        db.execute("BEGIN IMMEDIATE")
        try:
            db.execute(_work_table().replace("IF NOT EXISTS work (", "work_migrated ("))
            columns = ", ".join(old)
            db.execute(f"INSERT INTO work_migrated ({columns}) SELECT {columns} FROM work")
            db.execute("DROP TABLE work")
            db.execute("ALTER TABLE work_migrated RENAME TO work")
            db.execute("COMMIT")
        except BaseException:
            db.execute("ROLLBACK")
            raise
    finally:
        db.execute("PRAGMA foreign_keys=ON")
