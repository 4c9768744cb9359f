"""Reads: groups, annotations with their diagnosis, the outbox, and the health gauges.

What the HTTP API and the metrics ask of the store; nothing here writes but the
writability probe, which is what `/readyz` reports: false while the database cannot be
reached or written.
"""

from __future__ import annotations

from typing import Any

from triage.service.store.backend import Row, Tx
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

    def _one(self, sql: str, args: tuple[Any, ...] = ()) -> Row | None:
        with self.read() as db:
            row: Row | None = db.execute(sql, args).fetchone()
        return row

    def _all(self, sql: str, args: tuple[Any, ...] = ()) -> list[Row]:
        with self.read() as db:
            return db.execute(sql, args).fetchall()

    def group(self, group_key: str) -> Row | None:
        return self._one("SELECT * FROM groups WHERE group_key = ?", (group_key,))

    def group_annotations(self, group_key: str) -> list[Row]:
        return self._all(
            f"{ANNOTATION_SELECT} WHERE a.group_key = ? ORDER BY a.starts_at, a.id", (group_key,)
        )

    def annotation(self, annotation_id: int) -> Row | None:
        return self._one(f"{ANNOTATION_SELECT} WHERE a.id = ?", (annotation_id,))

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
    ) -> list[Row]:
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
        return self._all(
            f"{ANNOTATION_SELECT} {clause} ORDER BY a.id DESC LIMIT ? OFFSET ?", (*args, limit, offset)
        )

    def outbox(self, state: str | None = None, limit: int = 100) -> list[Row]:
        clause = "WHERE state = ?" if state else ""
        args: tuple[Any, ...] = (state,) if state else ()
        return self._all(
            f"SELECT id, sink, key, group_key, kind, state, attempts, next_at, last_error, created_at, "
            f"delivered_at FROM outbox {clause} ORDER BY id DESC LIMIT ?",
            (*args, limit),
        )

    def heartbeat_last_seen(self) -> float | None:
        row = self._one("SELECT value FROM meta WHERE key = 'heartbeat_last_seen'")
        return None if row is None else float(row[0])

    def gauges(self) -> dict[str, float]:
        """Backlog and delivery state, read at scrape time from the store itself."""
        with self.read() as db:
            return self._gauges(db)

    @staticmethod
    def _gauges(db: Tx) -> dict[str, float]:
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
        return {name: float(value) for name, value in out.items()}

    def writable(self, timeout: float | None = None) -> bool:
        """Whether a write commits now, waiting at most `timeout` seconds (the store's own by default)."""
        try:
            with self.backend.write(timeout) as db:
                db.execute(
                    "INSERT INTO meta (key, value) VALUES ('probe', '1') "
                    "ON CONFLICT (key) DO UPDATE SET value = excluded.value"
                )
        except self.backend.unavailable:
            return False
        return True
