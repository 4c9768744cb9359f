"""Diagnosis work: claiming due items and storing a worker's result, exactly once.

A result, the annotations it fills and the messages it causes are written in one
transaction, so a crash leaves either none or all of them.

A claim is a lease: the row is `running` with a fresh `claim` token until `lease_until`,
which the claiming replica renews while the diagnosis runs (`renew`). A replica that
dies stops renewing, and once the lease runs out any replica claims the row again. A
result is stored only under the claim that is still current, so a replica that lost its
lease (stalled past it) cannot write over the replica that took the work on.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Mapping, Sequence
from typing import Any

from triage.service.store.backend import Tx
from triage.service.store.outbox import MINE, Messages
from triage.service.store.records import WorkItem, WorkResult

MAX_LABEL_SETS = 500
"""Distinct alert label sets handed to a worker with an item (they name its fleet; a few suffice)."""


class Work(Messages):
    """The work queue: claim, release, the next due moment, and completion."""

    def claim(self, now: float | None = None) -> WorkItem | None:
        """Take the oldest due work item, marking it running; None when nothing is due."""
        now = time.time() if now is None else now
        claim = uuid.uuid4().hex
        with self.write() as db:
            row = db.execute(
                "UPDATE work SET state = 'running', attempts = attempts + 1, claim = ?, lease_until = ? "
                "WHERE id = (SELECT id FROM work WHERE (state = 'pending' AND next_at <= ?) "
                "OR (state = 'running' AND lease_until < ?) "
                f"ORDER BY next_at, id LIMIT 1{self.backend.skip_locked}) "
                "RETURNING id, group_key, at, symptom, symptom_source, attempts, fleet",
                (claim, now + self.lease, now, now),
            ).fetchone()
            if row is None:
                return None
            labels = db.execute(
                "SELECT DISTINCT labels FROM annotations WHERE work_id = ? ORDER BY labels LIMIT ?",
                (row["id"], MAX_LABEL_SETS),
            ).fetchall()
        alerts: list[dict[str, Any]] = [json.loads(r["labels"]) for r in labels]
        return WorkItem(
            row["id"],
            row["group_key"],
            row["at"],
            row["symptom"],
            row["symptom_source"],
            row["attempts"],
            row["fleet"],
            tuple({str(k): str(v) for k, v in a.items()} for a in alerts),
            claim,
        )

    def release(self, item: WorkItem) -> None:
        """Put a claimed item back untouched (a worker stopping before it could finish)."""
        with self.write() as db:
            db.execute(
                "UPDATE work SET state = 'pending', attempts = attempts - 1, claim = NULL, "
                f"lease_until = NULL WHERE {MINE}",
                (item.id, item.claim),
            )

    def renew(self, items: Sequence[WorkItem], now: float | None = None) -> int:
        """Extend the leases of items still in hand; returns how many are still this replica's."""
        if not items:
            return 0
        until = (time.time() if now is None else now) + self.lease
        held = 0
        with self.write() as db:
            for item in items:
                held += db.execute(
                    f"UPDATE work SET lease_until = ? WHERE {MINE} AND state = 'running'",
                    (until, item.id, item.claim),
                ).rowcount
        return held

    def next_due(self) -> float | None:
        """The earliest moment work falls due: a pending item's, or a running one's lease end."""
        with self.read() as db:
            row = db.execute(
                "SELECT min(CASE WHEN state = 'pending' THEN next_at ELSE lease_until END) FROM work "
                "WHERE state = 'pending' OR (state = 'running' AND lease_until IS NOT NULL)"
            ).fetchone()
        return None if row[0] is None else float(row[0])

    def complete(
        self, item: WorkItem, result: WorkResult, retry_at: float | None, now: float | None = None
    ) -> int:
        """Store a result for every annotation of the item and queue the group's message; one transaction.

        With `retry_at` (signals were unavailable) the annotations are stored marked so and
        the item runs again then. Returns how many annotations got their first real diagnosis.
        """
        now = time.time() if now is None else now
        stored = result.stored()  # serialised before the group's lock is taken
        return self.transact(lambda db: self._complete(db, item, result, retry_at, now, stored))

    def _complete(
        self,
        db: Tx,
        item: WorkItem,
        result: WorkResult,
        retry_at: float | None,
        now: float,
        stored: Mapping[str, Any],
    ) -> int:
        """`complete`'s one transaction, under the group's lock; nothing written without the claim."""
        state = stored["state"]
        with self.backend.pipeline(db):  # on PostgreSQL: the lock and the claimed write, one round trip
            self.backend.lock_group(db, item.group_key)
            claimed = db.execute(
                "UPDATE work SET state = ?, next_at = ?, done_at = ?, signature = ?, unavailable = ?, "
                "fetches = fetches + ?, summary = ?, diagnosis = ?, scope = ?, claim = NULL, "
                f"lease_until = NULL WHERE {MINE}",
                (
                    "pending" if retry_at is not None else "done",
                    retry_at if retry_at is not None else now,
                    now,
                    result.signature,
                    result.unavailable,
                    result.fetches,
                    result.summary,
                    stored["diagnosis"],
                    stored["scope"],
                    item.id,
                    item.claim,
                ),
            )
        if not claimed.rowcount:
            return 0  # the lease ran out and another replica has this work now
        with self.backend.pipeline(db):  # the annotations and what the message needs, one round trip
            unannotated = (
                db.execute(
                    "SELECT count(*) FROM annotations WHERE work_id = ? AND state != 'annotated'", (item.id,)
                )
                if state == "annotated"
                else None
            )
            db.execute(
                "UPDATE annotations SET state = ?, symptom = ?, cause = ?, signals = ?, annotated_at = ? "
                "WHERE work_id = ? AND state != 'annotated'",
                (state, stored["symptom"], stored["cause"], stored["signals"], now, item.id),
            )
            asked = db.execute(
                "SELECT closed, episode, last_signature FROM groups WHERE group_key = ?", (item.group_key,)
            )
            counted = db.execute(
                "SELECT count(*) FROM annotations WHERE work_id = ? AND status = 'firing'", (item.id,)
            )
        first = unannotated.fetchone()[0] if unannotated is not None else 0
        group = asked.fetchone()
        firing = counted.fetchone()[0]
        if (
            group is not None
            and not group["closed"]
            and not self._maybe_close(db, item.group_key, result, now)  # it may close the group
            and firing
            and result.signature != group["last_signature"]
        ):
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
                result.brief,
            )
        return int(first)
