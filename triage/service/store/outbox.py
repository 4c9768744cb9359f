"""Group closing, message queueing and delivery state: the outbox the sinks deliver from.

Messages are rows with a stable idempotency key (UNIQUE per sink), queued in the same
transaction as what caused them, so a sink outage or a crash delays a message and never
loses or duplicates one.

Each sink's messages go out one at a time, oldest first, whichever replica sends them:
sending starts with a claim on the sink's oldest pending message (a token and a lease),
which waits for another replica's claim on that row rather than skip past it, so a
`resolved` never overtakes the diagnosis it closes. The outcome is stored only under the
claim; a replica that died mid-send leaves a lease that runs out, and the message is
sent again with the same idempotency key, which the receiver drops as a repeat.
"""

from __future__ import annotations

import hashlib
import json
import time
import uuid
from collections.abc import Mapping
from typing import Any

from triage.service.store.backend import Row, Tx
from triage.service.store.connection import StoreBase
from triage.service.store.records import OutboxRow, WorkResult


def idempotency_key(*parts: object) -> str:
    """A stable key from the message's identity (never from time or attempt)."""
    return hashlib.sha256("\x1f".join(str(p) for p in parts).encode()).hexdigest()[:32]


MINE = "id = ? AND coalesce(claim, '') = ?"
"""A row still under the caller's claim (or, for a row never claimed, a caller without one)."""


class Messages(StoreBase):
    """Closing a group with its `resolved` message, queueing messages, and recording deliveries."""

    def _maybe_close(self, db: Tx, group_key: str, result: WorkResult | None, now: float) -> bool:
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
        db: Tx,
        group_key: str,
        kind: str,
        identity: str,
        episode: int,
        now: float,
        work_id: int | None,
        brief: Mapping[str, Any] | None = None,
    ) -> None:
        if not self.sinks:
            return
        message = self.builder(db, group_key, kind, episode, work_id, brief) if self.builder else {}
        body = json.dumps(message, ensure_ascii=False, allow_nan=False)
        for sink in self.sinks:
            key = idempotency_key(sink, group_key, episode, kind, identity)
            db.execute(
                "INSERT INTO outbox (sink, key, group_key, kind, message, next_at, created_at) "
                "VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT (sink, key) DO NOTHING",
                (sink, key, group_key, kind, body, now, now),
            )

    def next_message_at(self, sink: str) -> float | None:
        """When the sink's next message is due: the earliest `next_at` of the groups' oldest
        pending messages (None: nothing pending)."""
        with self.read() as db:
            row = db.execute(
                f"SELECT MIN(o.next_at) AS due FROM outbox o WHERE o.sink = ? AND {_PENDING_HEAD}", (sink,)
            ).fetchone()
        return None if row is None or row["due"] is None else float(row["due"])

    def claim_message(self, sink: str, lease: float, now: float | None = None) -> OutboxRow | None:
        """Claim a message of the sink to send it: the oldest of those that are due, nobody
        holds, and are their group's oldest pending message.

        Order is kept per group (a `resolved` never overtakes its diagnosis), not across
        groups: a message that waits (for a PagerDuty incident to exist, or after a
        failure) holds back only the later messages of its own group.
        """
        now = time.time() if now is None else now
        claim = uuid.uuid4().hex
        free = "{o}next_at <= ? AND ({o}lease_until IS NULL OR {o}lease_until < ?)"
        with self.write() as db:
            row = db.execute(
                "UPDATE outbox SET claim = ?, lease_until = ? WHERE id = (SELECT o.id FROM outbox o "
                f"WHERE o.sink = ? AND {free.format(o='o.')} AND {_PENDING_HEAD} "
                f"ORDER BY o.id LIMIT 1{self.backend.skip_locked}) "
                f"AND state = 'pending' AND {free.format(o='')} "
                "RETURNING id, sink, key, group_key, kind, message, attempts, next_at, created_at",
                (claim, now + lease, sink, now, now, now, now),
            ).fetchone()
        return None if row is None else _outbox_row(row, claim)

    def delivered(self, row: OutboxRow, now: float | None = None) -> None:
        with self.write() as db:
            db.execute(
                "UPDATE outbox SET state = 'delivered', attempts = attempts + 1, delivered_at = ?, "
                "last_error = NULL, claim = NULL, lease_until = NULL "
                f"WHERE {MINE}",
                (time.time() if now is None else now, row.id, row.claim),
            )

    def failed(self, row: OutboxRow, error: str, next_at: float | None) -> None:
        """Record a failed attempt; `next_at` None moves the message to the dead letters."""
        with self.write() as db:
            db.execute(
                "UPDATE outbox SET attempts = attempts + 1, last_error = ?, state = ?, next_at = ?, "
                f"claim = NULL, lease_until = NULL WHERE {MINE}",
                (
                    error[:500],
                    "dead" if next_at is None else "pending",
                    next_at or row.next_at,
                    row.id,
                    row.claim,
                ),
            )


_PENDING_HEAD = (
    "o.state = 'pending' AND NOT EXISTS (SELECT 1 FROM outbox p WHERE p.sink = o.sink "
    "AND p.group_key = o.group_key AND p.state = 'pending' AND p.id < o.id)"
)
"""`o` is its group's oldest pending message for its sink."""


def _outbox_row(r: Row, claim: str = "") -> OutboxRow:
    return OutboxRow(
        r["id"],
        r["sink"],
        r["key"],
        r["group_key"],
        r["kind"],
        json.loads(r["message"]),
        r["attempts"],
        r["next_at"],
        r["created_at"],
        claim,
    )
