"""Intake: one Alertmanager notification recorded, committed before the HTTP answer.

Identity is per alert episode (fingerprint, startsAt), repeats only touch `last_seen`,
and alerts of one group, symptom and fleet within the coalescing window share one work
row. The fleet is what the alert's fleet labels say (`fleet_of`, pure and cheap: the
intake never asks Prometheus); alerts that name their fleet only by a pod or instance
share the group's fleet-less row, and the worker finds their fleet.
"""

from __future__ import annotations

import json
import math
import time
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from triage.service.payload import Notification
from triage.service.store.backend import Cursor, Tx
from triage.service.store.outbox import Messages
from triage.service.store.records import IntakeResult

Episode = tuple[str, float]
"""An alert firing episode: (fingerprint, startsAt)."""


def bucket(starts_at: float, step: float) -> float:
    """The moment a group's alerts are diagnosed at: startsAt floored to the step."""
    return math.floor(starts_at / step) * step


class Intake(Messages):
    """Recording notifications: alerts, their groups and the work they need."""

    def intake(
        self,
        note: Notification,
        symptom_of: Callable[[Mapping[str, str]], tuple[str, str]],
        step: float,
        heartbeat: str,
        now: float | None = None,
        window: float | None = None,
        fleet_of: Callable[[Mapping[str, str]], str] = lambda labels: "",
    ) -> IntakeResult:
        """Record one notification; returns once it is committed (before the HTTP answer).

        An alert joins the work item of its group, symptom and fleet (`fleet_of` its labels)
        whose moment lies within `window` of its start (default: one step), else it starts a
        new one at its start.
        """
        window = step if window is None else max(window, step)
        moment = time.time() if now is None else now
        return self.transact(
            lambda db: self._intake(db, note, symptom_of, step, heartbeat, moment, window, fleet_of)
        )

    def _intake(
        self,
        db: Tx,
        note: Notification,
        symptom_of: Callable[[Mapping[str, str]], tuple[str, str]],
        step: float,
        heartbeat: str,
        now: float,
        window: float,
        fleet_of: Callable[[Mapping[str, str]], str],
    ) -> IntakeResult:
        """The intake's one transaction, under the group's lock; run again if it lost a race."""
        new = dup = resolved = beats = new_work = annotated = 0
        to_close: set[str] = set()
        alerts = [a for a in note.alerts if a.alertname != heartbeat]
        beats = len(note.alerts) - len(alerts)
        with self.backend.pipeline(db):  # on PostgreSQL: the lock, the group and the lookup, one round trip
            self.backend.lock_group(db, note.group_key)
            if beats:
                db.execute(
                    "INSERT INTO meta (key, value) VALUES ('heartbeat_last_seen', ?) "
                    "ON CONFLICT (key) DO UPDATE SET value = excluded.value",
                    (repr(now),),
                )
            if not alerts:
                return IntakeResult(len(note.alerts), 0, 0, 0, beats, 0)
            # One statement records the notification on its group, new or not, and reads its state.
            recorded = self._record_on_group(db, note, now)
            asked = self._ask_known(db, [(a.fingerprint, a.starts_at) for a in alerts])
        group = recorded.fetchone()
        episode = int(group["episode"])
        known = self._read_known(asked, [(a.fingerprint, a.starts_at) for a in alerts])
        touched: list[int] = []  # duplicates: only `last_seen` and `seen` change
        rows: list[tuple[Any, ...]] = []  # new annotations, inserted together
        inserted: set[Episode] = set()
        works: dict[tuple[str, str, float, int], tuple[int, Any]] = {}
        for alert in alerts:
            episode_key = (alert.fingerprint, alert.starts_at)
            if episode_key in inserted and episode_key not in known:
                # The same episode twice in one notification: the first is stored now.
                self._insert_annotations(db, rows)
                rows = []
                known.update(self._read_known(self._ask_known(db, [episode_key]), [episode_key]))
            row = known.get(episode_key)
            if row is not None:
                dup += 1
                touched.append(row[0])
                if alert.status == "resolved" and row[1] == "firing":
                    resolved += 1
                    db.execute(
                        "UPDATE annotations SET status = 'resolved', ends_at = ? WHERE id = ?",
                        (alert.ends_at if alert.ends_at is not None else now, row[0]),
                    )
                    known[episode_key] = (row[0], "resolved")
                    to_close.add(note.group_key)
                continue
            new += 1
            symptom, source = symptom_of(alert.labels)
            fleet = fleet_of(alert.labels)
            at = bucket(alert.starts_at, step)
            if alert.status == "firing" and group["closed"]:
                db.execute(
                    "UPDATE groups SET closed = 0, episode = episode + 1, last_signature = NULL "
                    "WHERE group_key = ?",
                    (note.group_key,),
                )
                episode += 1
                group = {"closed": 0, "episode": episode}
            work_key = (symptom, fleet, at, episode)
            if work_key not in works:
                work = db.execute(
                    "SELECT id FROM work WHERE group_key = ? AND episode = ? AND symptom = ? AND fleet = ? "
                    "AND at > ? AND at < ? ORDER BY abs(at - ?), id LIMIT 1",
                    (note.group_key, episode, symptom, fleet, at - window, at + window, at),
                ).fetchone()
                if work is None:
                    new_work += 1
                    works.clear()  # a new moment may be nearer than what an earlier alert found
                    work_id = db.execute(
                        "INSERT INTO work (group_key, at, symptom, symptom_source, state, next_at, "
                        "created_at, episode, fleet) VALUES (?, ?, ?, ?, 'pending', ?, ?, ?, ?) RETURNING id",
                        (note.group_key, at, symptom, source, now, now, episode, fleet),
                    ).fetchone()[0]
                    works[work_key] = (work_id, None)
                else:
                    works[work_key] = (
                        work["id"],
                        db.execute(
                            "SELECT state, symptom, cause, signals, annotated_at "
                            "FROM annotations WHERE work_id = ? AND state != 'pending' LIMIT 1",
                            (work["id"],),
                        ).fetchone(),
                    )
            work_id, done = works[work_key]
            inserted.add(episode_key)
            rows.append(
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
                )
            )
            if done is not None and done["state"] == "annotated":
                annotated += 1
            if alert.status == "resolved":
                resolved += 1
                to_close.add(note.group_key)
        with self.backend.pipeline(db):  # on PostgreSQL: every write of the notification, one round trip
            self._insert_annotations(db, rows)
            by_times: dict[
                int, list[int]
            ] = {}  # an episode repeated within the notification counts each time
            for annotation_id, times in Counter(touched).items():
                by_times.setdefault(times, []).append(annotation_id)
            for times, ids in by_times.items():
                for chunk in _chunks(ids):
                    db.execute(
                        "UPDATE annotations SET last_seen = ?, seen = seen + ?, truncated = ? "
                        f"WHERE id IN ({', '.join('?' * len(chunk))})",
                        (now, times, note.truncated, *chunk),
                    )
        for key in to_close:
            self._maybe_close(db, key, None, now)
        return IntakeResult(len(note.alerts), new, dup, resolved, beats, new_work, annotated)

    @staticmethod
    def _record_on_group(db: Tx, note: Notification, now: float) -> Cursor:
        """Count the notification on its group, creating it if new; the cursor yields `closed, episode`."""
        return db.execute(
            "INSERT INTO groups (group_key, receiver, group_labels, external_url, truncated, "
            "notifications, updated_at) VALUES (?, ?, ?, ?, ?, 1, ?) ON CONFLICT (group_key) DO UPDATE "
            "SET truncated = excluded.truncated, notifications = groups.notifications + 1, "
            "updated_at = excluded.updated_at RETURNING closed, episode",
            (
                note.group_key,
                note.receiver,
                json.dumps(note.group_labels, sort_keys=True),
                note.external_url,
                note.truncated,
                now,
            ),
        )

    @staticmethod
    def _ask_known(db: Tx, keys: Sequence[Episode]) -> list[Cursor]:
        """Look up the stored annotations of these episodes, a query per chunk (read with `_read_known`)."""
        return [
            db.execute(
                "SELECT id, fingerprint, starts_at, status FROM annotations "
                f"WHERE fingerprint IN ({', '.join('?' * len(chunk))})",
                chunk,
            )
            for chunk in _chunks(sorted({fingerprint for fingerprint, _ in keys}))
        ]

    @staticmethod
    def _read_known(asked: Sequence[Cursor], keys: Sequence[Episode]) -> dict[Episode, tuple[int, str]]:
        """The id and status of each episode among `keys` that is stored."""
        wanted = set(keys)
        out: dict[Episode, tuple[int, str]] = {}
        for cursor in asked:
            for row in cursor.fetchall():
                key = (row["fingerprint"], row["starts_at"])
                if key in wanted:
                    out[key] = (row["id"], row["status"])
        return out

    @staticmethod
    def _insert_annotations(db: Tx, rows: Sequence[tuple[Any, ...]]) -> None:
        """New annotations, in one batch (one round trip to PostgreSQL, in its pipeline)."""
        if rows:
            db.executemany(
                "INSERT INTO annotations (fingerprint, starts_at, group_key, alertname, labels, "
                "annotations, generator_url, status, ends_at, first_seen, last_seen, work_id, truncated, "
                "state, symptom, cause, signals, annotated_at, episode) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                rows,
            )


CHUNK = 500
"""Values in one `IN (...)` list: well inside SQLite's and PostgreSQL's limits on parameters."""


def _chunks(values: Sequence[Any]) -> list[Sequence[Any]]:
    return [values[i : i + CHUNK] for i in range(0, len(values), CHUNK)]
