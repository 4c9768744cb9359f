"""The store's tables: created if missing when a store opens.

Kept apart so the whole layout of the durable state reads in one place, whichever
module writes or reads a table.
"""

from __future__ import annotations

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
    UNIQUE (group_key, episode, at, symptom)
);
CREATE INDEX IF NOT EXISTS work_due ON work (state, next_at);
CREATE INDEX IF NOT EXISTS work_group ON work (group_key, episode, symptom, at);
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
