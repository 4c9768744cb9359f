"""The service's only durable state, in SQLite: alerts, diagnosis work, group state, outbox.

Why this shape:

- **Commit before the 2xx.** Alertmanager forgets a notification once it gets a 2xx,
  so the intake transaction commits before the response. The database runs in WAL
  mode. With `synchronous=NORMAL` (the default) a commit is a write to the WAL with
  no fsync: it survives the service being killed at any moment, which is the failure
  the crash tests exercise; only a power loss or kernel crash can take back the last
  commits, and even then the alerts come back, because every Alertmanager
  notification is a snapshot of the whole group and is repeated at the next
  `repeat_interval`. `synchronous=FULL` (`store_sync: full`) also fsyncs every
  commit, closing that window at the price of one fsync per request (cheap on the
  benchmark machine's disk, see docs/benchmarks.md; not on every disk).
- **Identity is per alert episode.** Every notification is a snapshot of the whole
  group, repeated by Alertmanager and by each member of an HA pair, so an annotation
  is keyed on (fingerprint, startsAt) with a UNIQUE constraint; repeats only touch
  `last_seen`.
- **Work is per group and moment.** Alerts of one group (and symptom) that start
  within the coalescing window of each other share one `work` row: one signal fetch
  and one diagnosis for all of them, taken at the first one's start.
- **Exactly once, atomically.** A worker's result, the annotations it fills and the
  messages it causes are written in one transaction, so a crash leaves either none or
  all of them. Work found `running` at start was cut off by a crash and runs again.
- **Outbox.** Messages to sinks are rows with a stable idempotency key
  (UNIQUE per sink), delivered from the table, so a sink outage or a crash delays a
  message and never loses or duplicates one.

All writes go through one connection under one lock (SQLite allows one writer at a
time anyway, and a Python lock queues fairly where `busy_timeout` would spin); reads
use a connection per thread, which WAL lets run beside the writer.
"""

from __future__ import annotations

import hashlib
import json
import math
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from triage.service.payload import Notification

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

ANNOTATION_SELECT = (
    "SELECT a.id, a.fingerprint, a.starts_at, a.group_key, a.alertname, a.labels, a.annotations, "
    "a.generator_url, a.status, a.ends_at, a.first_seen, a.last_seen, a.seen, a.work_id, a.state, a.symptom, "
    "a.cause, a.signals, a.annotated_at, a.truncated, a.episode, w.summary, w.diagnosis "
    "FROM annotations a JOIN work w ON w.id = a.work_id"
)
"""An annotation with its diagnosis, which is stored once per work item, not once per alert."""


@dataclass(frozen=True)
class IntakeResult:
    """What one notification changed: counts for the response and the metrics."""

    alerts: int
    new: int
    duplicates: int
    resolved: int
    heartbeats: int
    new_work: int
    annotated: int = 0


@dataclass(frozen=True)
class WorkItem:
    """A claimed diagnosis job: one group at one moment, with the symptom to start from."""

    id: int
    group_key: str
    at: float
    symptom: str
    symptom_source: str
    attempts: int


@dataclass(frozen=True)
class WorkResult:
    """What a worker hands back: a diagnosis (as JSON and text), or why signals were unavailable."""

    signature: str
    symptom: str
    cause: str | None
    diagnosis: Mapping[str, Any] | None
    summary: str
    headline: str
    unavailable: str | None
    fetches: int
    reason: str = ""
    """For unavailable signals, the kind of failure (timeout, unreachable, auth, not_json, ...)."""


@dataclass(frozen=True)
class OutboxRow:
    """One message to deliver to one sink."""

    id: int
    sink: str
    key: str
    group_key: str
    kind: str
    message: dict[str, Any]
    attempts: int
    next_at: float


MessageBuilder = Callable[[sqlite3.Connection, str, str, int, "int | None"], dict[str, Any]]
"""(db, group_key, kind, episode, work_id) -> the message, built inside the transaction that queues it."""


def bucket(starts_at: float, step: float) -> float:
    """The moment a group's alerts are diagnosed at: startsAt floored to the step."""
    return math.floor(starts_at / step) * step


def idempotency_key(*parts: object) -> str:
    """A stable key from the message's identity (never from time or attempt)."""
    return hashlib.sha256("\x1f".join(str(p) for p in parts).encode()).hexdigest()[:32]


class Store:
    """The SQLite store; one per process, shared by the HTTP handlers and the workers."""

    def __init__(
        self,
        path: str,
        sinks: Sequence[str] = (),
        builder: MessageBuilder | None = None,
        synchronous: str = "normal",
    ) -> None:
        if synchronous not in ("normal", "full"):
            raise ValueError("synchronous is normal or full")
        self.synchronous = synchronous.upper()
        self.path = path
        self.sinks = tuple(sinks)
        self.builder = builder
        self._lock = threading.Lock()
        self._local = threading.local()
        self._writer = self._connect()
        with self._lock:
            self._writer.executescript(SCHEMA)
            self._writer.execute("UPDATE work SET state = 'pending' WHERE state = 'running'")
            self._writer.commit()
            # Checkpoints copy the WAL back into the database and sync it; done by the
            # committing connection they stall one intake request now and then, so they
            # run on a thread of their own instead (see `_checkpoints`).
            self._writer.execute("PRAGMA wal_autocheckpoint=0")
        self._closed = threading.Event()
        self._checkpointer = threading.Thread(target=self._checkpoints, name="triage-checkpoint", daemon=True)
        self._checkpointer.start()

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
    def write(self) -> Iterator[sqlite3.Connection]:
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

    def reader(self) -> sqlite3.Connection:
        conn: sqlite3.Connection | None = getattr(self._local, "conn", None)
        if conn is None:
            conn = self._connect()
            self._local.conn = conn
        return conn

    # ------------------------------------------------------------------ intake

    def intake(
        self,
        note: Notification,
        symptom_of: Callable[[Mapping[str, str]], tuple[str, str]],
        step: float,
        heartbeat: str,
        now: float | None = None,
        window: float | None = None,
    ) -> IntakeResult:
        """Record one notification; returns once it is committed (before the HTTP answer).

        An alert joins the work item of its group and symptom whose moment lies within
        `window` of its start (default: one step), else it starts a new one at its start.
        """
        window = step if window is None else max(window, step)
        now = time.time() if now is None else now
        new = dup = resolved = beats = new_work = annotated = 0
        to_close: set[str] = set()
        with self.write() as db:
            alerts = [a for a in note.alerts if a.alertname != heartbeat]
            beats = len(note.alerts) - len(alerts)
            if beats:
                db.execute(
                    "INSERT INTO meta (key, value) VALUES ('heartbeat_last_seen', ?) "
                    "ON CONFLICT (key) DO UPDATE SET value = excluded.value",
                    (repr(now),),
                )
            if not alerts:
                return IntakeResult(len(note.alerts), 0, 0, 0, beats, 0)
            group = db.execute(
                "SELECT closed, episode FROM groups WHERE group_key = ?", (note.group_key,)
            ).fetchone()
            episode = 1 if group is None else int(group["episode"])
            if group is None:
                db.execute(
                    "INSERT INTO groups (group_key, receiver, group_labels, external_url, truncated, "
                    "notifications, updated_at) VALUES (?, ?, ?, ?, ?, 1, ?)",
                    (
                        note.group_key,
                        note.receiver,
                        json.dumps(note.group_labels, sort_keys=True),
                        note.external_url,
                        note.truncated,
                        now,
                    ),
                )
            else:
                db.execute(
                    "UPDATE groups SET truncated = ?, notifications = notifications + 1, updated_at = ? "
                    "WHERE group_key = ?",
                    (note.truncated, now, note.group_key),
                )
            for alert in alerts:
                row = db.execute(
                    "SELECT id, status FROM annotations WHERE fingerprint = ? AND starts_at = ?",
                    (alert.fingerprint, alert.starts_at),
                ).fetchone()
                if row is not None:
                    dup += 1
                    db.execute(
                        "UPDATE annotations SET last_seen = ?, seen = seen + 1, truncated = ? WHERE id = ?",
                        (now, note.truncated, row["id"]),
                    )
                    if alert.status == "resolved" and row["status"] == "firing":
                        resolved += 1
                        db.execute(
                            "UPDATE annotations SET status = 'resolved', ends_at = ? WHERE id = ?",
                            (alert.ends_at if alert.ends_at is not None else now, row["id"]),
                        )
                        to_close.add(note.group_key)
                    continue
                new += 1
                symptom, source = symptom_of(alert.labels)
                at = bucket(alert.starts_at, step)
                if alert.status == "firing" and group is not None and group["closed"]:
                    db.execute(
                        "UPDATE groups SET closed = 0, episode = episode + 1, last_signature = NULL "
                        "WHERE group_key = ?",
                        (note.group_key,),
                    )
                    episode += 1
                    group = {"closed": 0, "episode": episode}
                work = db.execute(
                    "SELECT id FROM work WHERE group_key = ? AND episode = ? AND symptom = ? "
                    "AND at > ? AND at < ? ORDER BY abs(at - ?), id LIMIT 1",
                    (note.group_key, episode, symptom, at - window, at + window, at),
                ).fetchone()
                if work is None:
                    new_work += 1
                    work_id = db.execute(
                        "INSERT INTO work (group_key, at, symptom, symptom_source, state, next_at, "
                        "created_at, episode) VALUES (?, ?, ?, ?, 'pending', ?, ?, ?)",
                        (note.group_key, at, symptom, source, now, now, episode),
                    ).lastrowid
                    done = None
                else:
                    work_id = work["id"]
                    done = db.execute(
                        "SELECT state, symptom, cause, signals, annotated_at "
                        "FROM annotations WHERE work_id = ? AND state != 'pending' LIMIT 1",
                        (work_id,),
                    ).fetchone()
                db.execute(
                    "INSERT INTO annotations (fingerprint, starts_at, group_key, alertname, labels, "
                    "annotations, generator_url, status, ends_at, first_seen, last_seen, work_id, truncated, "
                    "state, symptom, cause, signals, annotated_at, episode) "
                    "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                    (
                        alert.fingerprint,
                        alert.starts_at,
                        note.group_key,
                        alert.alertname,
                        json.dumps(alert.labels, sort_keys=True, ensure_ascii=False),
                        json.dumps(alert.annotations, sort_keys=True, ensure_ascii=False),
                        alert.generator_url,
                        alert.status,
                        alert.ends_at if alert.status == "resolved" else None,
                        now,
                        now,
                        work_id,
                        note.truncated,
                        done["state"] if done else "pending",
                        done["symptom"] if done else None,
                        done["cause"] if done else None,
                        done["signals"] if done else None,
                        now if done else None,
                        episode,
                    ),
                )
                if done is not None and done["state"] == "annotated":
                    annotated += 1
                if alert.status == "resolved":
                    resolved += 1
                    to_close.add(note.group_key)
            for key in to_close:
                self._maybe_close(db, key, None, now)
        return IntakeResult(len(note.alerts), new, dup, resolved, beats, new_work, annotated)

    # ------------------------------------------------------------------ groups and messages

    def _maybe_close(
        self, db: sqlite3.Connection, group_key: str, result: WorkResult | None, now: float
    ) -> bool:
        """Send the group's one `resolved` message once nothing fires and nothing awaits a diagnosis."""
        group = db.execute("SELECT closed, episode FROM groups WHERE group_key = ?", (group_key,)).fetchone()
        if group is None or group["closed"]:
            return False
        open_ = db.execute(
            "SELECT count(*) FROM annotations WHERE group_key = ? AND episode = ? "
            "AND (status = 'firing' OR state = 'pending')",
            (group_key, group["episode"]),
        ).fetchone()[0]
        if open_:
            return False
        db.execute(
            "UPDATE groups SET closed = 1, last_signature = NULL WHERE group_key = ?",
            (group_key,),
        )
        self._enqueue(db, group_key, "resolved", "resolved", group["episode"], now, None)
        return True

    def _enqueue(
        self,
        db: sqlite3.Connection,
        group_key: str,
        kind: str,
        identity: str,
        episode: int,
        now: float,
        work_id: int | None,
    ) -> None:
        if not self.sinks:
            return
        message = self.builder(db, group_key, kind, episode, work_id) if self.builder else {}
        body = json.dumps(message, ensure_ascii=False, allow_nan=False)
        for sink in self.sinks:
            key = idempotency_key(sink, group_key, episode, kind, identity)
            db.execute(
                "INSERT OR IGNORE INTO outbox (sink, key, group_key, kind, message, next_at, created_at) "
                "VALUES (?, ?, ?, ?, ?, ?, ?)",
                (sink, key, group_key, kind, body, now, now),
            )

    # ------------------------------------------------------------------ work

    def claim(self, now: float | None = None) -> WorkItem | None:
        """Take the oldest due work item, marking it running; None when nothing is due."""
        now = time.time() if now is None else now
        with self.write() as db:
            row = db.execute(
                "UPDATE work SET state = 'running', attempts = attempts + 1 WHERE id = ("
                "SELECT id FROM work WHERE state = 'pending' AND next_at <= ? ORDER BY next_at, id LIMIT 1) "
                "RETURNING id, group_key, at, symptom, symptom_source, attempts",
                (now,),
            ).fetchone()
        if row is None:
            return None
        return WorkItem(
            row["id"], row["group_key"], row["at"], row["symptom"], row["symptom_source"], row["attempts"]
        )

    def release(self, item: WorkItem) -> None:
        """Put a claimed item back untouched (a worker stopping before it could finish)."""
        with self.write() as db:
            db.execute("UPDATE work SET state = 'pending', attempts = attempts - 1 WHERE id = ?", (item.id,))

    def next_due(self) -> float | None:
        row = self.reader().execute("SELECT min(next_at) FROM work WHERE state = 'pending'").fetchone()
        return None if row[0] is None else float(row[0])

    def complete(
        self, item: WorkItem, result: WorkResult, retry_at: float | None, now: float | None = None
    ) -> int:
        """Store a result for every annotation of the item and queue the group's message; one transaction.

        With `retry_at` (signals were unavailable) the annotations are stored marked so and
        the item runs again then. Returns how many annotations got their first real diagnosis.
        """
        now = time.time() if now is None else now
        diagnosis = (
            json.dumps(result.diagnosis, ensure_ascii=False, allow_nan=False) if result.diagnosis else None
        )
        signals = f"unavailable: {result.unavailable}" if result.unavailable else "ok"
        state = "unavailable" if result.unavailable else "annotated"
        with self.write() as db:
            db.execute(
                "UPDATE work SET state = ?, next_at = ?, done_at = ?, signature = ?, unavailable = ?, "
                "fetches = fetches + ?, summary = ?, diagnosis = ? WHERE id = ?",
                (
                    "pending" if retry_at is not None else "done",
                    retry_at if retry_at is not None else now,
                    now,
                    result.signature,
                    result.unavailable,
                    result.fetches,
                    result.summary,
                    diagnosis,
                    item.id,
                ),
            )
            first = (
                db.execute(
                    "SELECT count(*) FROM annotations WHERE work_id = ? AND state != 'annotated'", (item.id,)
                ).fetchone()[0]
                if state == "annotated"
                else 0
            )
            db.execute(
                "UPDATE annotations SET state = ?, symptom = ?, cause = ?, signals = ?, annotated_at = ? "
                "WHERE work_id = ? AND state != 'annotated'",
                (state, result.symptom, result.cause, signals, now, item.id),
            )
            group = db.execute(
                "SELECT closed, episode, last_signature FROM groups WHERE group_key = ?", (item.group_key,)
            ).fetchone()
            if (
                group is not None
                and not group["closed"]
                and not self._maybe_close(db, item.group_key, result, now)
            ):
                firing = db.execute(
                    "SELECT count(*) FROM annotations WHERE work_id = ? AND status = 'firing'", (item.id,)
                ).fetchone()[0]
                if firing and result.signature != group["last_signature"]:
                    kind = "diagnosis" if group["last_signature"] is None else "changed"
                    db.execute(
                        "UPDATE groups SET last_signature = ? WHERE group_key = ?",
                        (result.signature, item.group_key),
                    )
                    self._enqueue(
                        db,
                        item.group_key,
                        kind,
                        f"{result.signature}|{item.id}",
                        group["episode"],
                        now,
                        item.id,
                    )
        return int(first)

    # ------------------------------------------------------------------ outbox

    def due_messages(self, sink: str, now: float, limit: int = 1) -> list[OutboxRow]:
        """The oldest pending messages of a sink, in order, if the first is due."""
        rows = (
            self.reader()
            .execute(
                "SELECT id, sink, key, group_key, kind, message, attempts, next_at FROM outbox "
                "WHERE sink = ? AND state = 'pending' ORDER BY id LIMIT ?",
                (sink, limit),
            )
            .fetchall()
        )
        out = [
            OutboxRow(
                r["id"],
                r["sink"],
                r["key"],
                r["group_key"],
                r["kind"],
                json.loads(r["message"]),
                r["attempts"],
                r["next_at"],
            )
            for r in rows
        ]
        return out

    def delivered(self, row: OutboxRow, now: float | None = None) -> None:
        with self.write() as db:
            db.execute(
                "UPDATE outbox SET state = 'delivered', attempts = attempts + 1, delivered_at = ?, "
                "last_error = NULL WHERE id = ?",
                (time.time() if now is None else now, row.id),
            )

    def failed(self, row: OutboxRow, error: str, next_at: float | None) -> None:
        """Record a failed attempt; `next_at` None moves the message to the dead letters."""
        with self.write() as db:
            db.execute(
                "UPDATE outbox SET attempts = attempts + 1, last_error = ?, state = ?, next_at = ? "
                "WHERE id = ?",
                (error[:500], "dead" if next_at is None else "pending", next_at or row.next_at, row.id),
            )

    # ------------------------------------------------------------------ reads

    def group(self, group_key: str) -> sqlite3.Row | None:
        row: sqlite3.Row | None = (
            self.reader().execute("SELECT * FROM groups WHERE group_key = ?", (group_key,)).fetchone()
        )
        return row

    def group_annotations(self, group_key: str) -> list[sqlite3.Row]:
        return (
            self.reader()
            .execute(
                f"{ANNOTATION_SELECT} WHERE a.group_key = ? ORDER BY a.starts_at, a.id",
                (group_key,),
            )
            .fetchall()
        )

    def annotation(self, annotation_id: int) -> sqlite3.Row | None:
        row: sqlite3.Row | None = (
            self.reader().execute(f"{ANNOTATION_SELECT} WHERE a.id = ?", (annotation_id,)).fetchone()
        )
        return row

    def annotations(
        self,
        *,
        status: str | None = None,
        alertname: str | None = None,
        symptom: str | None = None,
        cause: str | None = None,
        state: str | None = None,
        since: float | None = None,
        until: float | None = None,
        limit: int = 100,
        offset: int = 0,
    ) -> list[sqlite3.Row]:
        where: list[str] = []
        args: list[Any] = []
        for column, value in (
            ("status", status),
            ("alertname", alertname),
            ("symptom", symptom),
            ("cause", cause),
            ("state", state),
        ):
            if value is not None:
                where.append(f"a.{column} = ?")
                args.append(value)
        if since is not None:
            where.append("a.starts_at >= ?")
            args.append(since)
        if until is not None:
            where.append("a.starts_at <= ?")
            args.append(until)
        clause = f"WHERE {' AND '.join(where)}" if where else ""
        return (
            self.reader()
            .execute(
                f"{ANNOTATION_SELECT} {clause} ORDER BY a.id DESC LIMIT ? OFFSET ?",
                (*args, limit, offset),
            )
            .fetchall()
        )

    def outbox(self, state: str | None = None, limit: int = 100) -> list[sqlite3.Row]:
        clause = "WHERE state = ?" if state else ""
        args: tuple[Any, ...] = (state,) if state else ()
        return (
            self.reader()
            .execute(
                f"SELECT id, sink, key, group_key, kind, state, attempts, next_at, last_error, created_at, "
                f"delivered_at FROM outbox {clause} ORDER BY id DESC LIMIT ?",
                (*args, limit),
            )
            .fetchall()
        )

    def heartbeat_last_seen(self) -> float | None:
        row = self.reader().execute("SELECT value FROM meta WHERE key = 'heartbeat_last_seen'").fetchone()
        return None if row is None else float(row[0])

    def gauges(self) -> dict[str, float]:
        """Backlog and delivery state, read at scrape time from the store itself."""
        db = self.reader()
        out: dict[str, float] = {}
        out["work_pending"] = db.execute("SELECT count(*) FROM work WHERE state != 'done'").fetchone()[0]
        out["annotations_pending"] = db.execute(
            "SELECT count(*) FROM annotations WHERE state = 'pending'"
        ).fetchone()[0]
        out["annotations_unavailable"] = db.execute(
            "SELECT count(*) FROM annotations WHERE state = 'unavailable'"
        ).fetchone()[0]
        out["annotations_total"] = db.execute("SELECT count(*) FROM annotations").fetchone()[0]
        out["groups_total"] = db.execute("SELECT count(*) FROM groups").fetchone()[0]
        for state in ("pending", "delivered", "dead"):
            out[f"outbox_{state}"] = db.execute(
                "SELECT count(*) FROM outbox WHERE state = ?", (state,)
            ).fetchone()[0]
        out["signal_fetches_stored"] = db.execute("SELECT coalesce(sum(fetches), 0) FROM work").fetchone()[0]
        return out

    def writable(self) -> bool:
        try:
            with self.write() as db:
                db.execute(
                    "INSERT INTO meta (key, value) VALUES ('probe', '1') "
                    "ON CONFLICT (key) DO UPDATE SET value = excluded.value"
                )
        except sqlite3.Error:
            return False
        return True
