"""Reads: groups, annotations with their diagnosis, the outbox, and the health gauges.

What the HTTP API and the metrics ask of the store; nothing here writes but the
writability probe.
"""

from __future__ import annotations

import sqlite3
from typing import Any

from triage.service.store.connection import StoreBase

ANNOTATION_SELECT = (
    "SELECT a.id, a.fingerprint, a.starts_at, a.group_key, a.alertname, a.labels, a.annotations, "
    "a.generator_url, a.status, a.ends_at, a.first_seen, a.last_seen, a.seen, a.work_id, a.state, a.symptom, "
    "a.cause, a.signals, a.annotated_at, a.truncated, a.episode, w.summary, w.diagnosis, w.scope "
    "FROM annotations a JOIN work w ON w.id = a.work_id"
)
"""An annotation with its diagnosis, which is stored once per work item, not once per alert."""


class Queries(StoreBase):
    """The store's reads, each on the calling thread's own connection."""

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
