"""The store's tables: created if missing when a store opens, and brought up to date.

Kept apart so the whole layout of the durable state reads in one place, whichever
module writes or reads a table.

A work row is one group's diagnosis at one moment for one fleet: `fleet` (the fleet
labels its alerts carry, empty when none) is part of its identity, so alerts of one
group about two fleets are diagnosed apart; `scope` says which fleet was read. A store
written before fleets existed has neither column, and its `work` table is rebuilt with
them at open, in one transaction, every row kept (as fleet '').
"""

from __future__ import annotations

import sqlite3

SCHEMA = """
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
    id INTEGER PRIMARY KEY,
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
    id INTEGER PRIMARY KEY,
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
    id INTEGER PRIMARY KEY,
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
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
"""


def _columns(db: sqlite3.Connection, table: str) -> list[str]:
    return [str(row[1]) for row in db.execute(f"PRAGMA table_info({table})")]


def _work_table() -> str:
    start = SCHEMA.index("CREATE TABLE IF NOT EXISTS work (")
    return SCHEMA[start : SCHEMA.index(");", start) + 2]


def migrate(db: sqlite3.Connection) -> None:
    """Bring a store of an earlier layout up to `SCHEMA`; run before it, on an autocommit connection.

    The uniqueness of a work row changes, which SQLite cannot alter in place: the rows are
    copied into a new table, in one transaction with foreign keys off meanwhile (SQLite's
    procedure for changing a table's schema); `SCHEMA` then creates the indexes again.
    """
    old = _columns(db, "work")
    if not old or "fleet" in old:
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
