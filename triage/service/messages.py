"""What a sink hears about a group: one message built from the store, as plain data.

A message is built inside the transaction that queues it, so it is a snapshot of the
group at the moment its diagnosis was ready (or it resolved), kept in the outbox, and
sent unchanged on every retry. A finished diagnosis's headline is rendered before that,
where the diagnosis was made (`briefed`), from exactly what the store keeps of it: the
transaction, which holds the group's lock, then only reads the group's alerts. It is data
only: label and annotation values are copied, truncated, and later escaped by the
templates, never evaluated as templates.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from signals.timeparse import format_instant, parse_instant
from triage.core.model import (
    VERDICTS,
    Action,
    CauseFinding,
    Diagnosis,
    Evidence,
    FirstMover,
    Forbidden,
    Unmonitored,
    Verdict,
)
from triage.core.render import FIRST_MOVERS_SHOWN
from triage.core.sections import Sections, sections
from triage.service.store.backend import Row, Tx
from triage.service.store.records import WorkResult

MAX_ALERTS_KEPT = 1000


def _clip(value: str, limit: int) -> str:
    return value if len(value) <= limit else value[: limit - 1] + "…"


def _clip_map(values: dict[str, str], limit: int) -> dict[str, str]:
    return {_clip(k, limit): _clip(v, limit) for k, v in sorted(values.items())}


def annotation_url(public_url: str | None, annotation_id: int) -> str | None:
    return f"{public_url.rstrip('/')}/annotations/{annotation_id}" if public_url else None


def _evidence(data: Mapping[str, Any]) -> Evidence:
    return Evidence(
        signal=str(data.get("signal", "")),
        check=str(data.get("check", "")),
        holds=data.get("holds"),
        value=data.get("value"),
        baseline=data.get("baseline"),
        role=data.get("role", "requires"),
        note=str(data.get("note", "")),
        replicas=tuple(data.get("replicas") or ()),
        live=data.get("live", True) is not False,
    )


def _number(value: object) -> float:
    if not isinstance(value, (int, float, str)):
        return math.nan
    try:
        return float(value)
    except ValueError:
        return math.nan


def _first_mover(data: Mapping[str, Any]) -> FirstMover:
    """A first mover back from its JSON: its `before` and `after`, or for a row stored before
    they were kept, the two values its `change` (`0.6 -> 0.99`) reads."""
    old, _, new = str(data.get("change", "")).partition(" -> ")
    before: object = data.get("before", old)
    after: object = data.get("after", new)
    moved_at = data.get("moved_at")
    replica = data.get("replica")
    return FirstMover(
        signal=str(data.get("signal", "")),
        replica=str(replica) if replica is not None else None,
        layer=str(data.get("layer", "")),
        moved_at=parse_instant(moved_at) if moved_at else 0.0,
        before=_number(before),
        after=_number(after),
    )


def _verdict(data: Mapping[str, Any]) -> Verdict:
    """The stored verdict; a row written before verdicts were kept reads as its causes said."""
    verdict = data.get("verdict")
    if verdict in VERDICTS:
        return verdict  # type: ignore[no-any-return]
    if data.get("causes"):
        return "cause"
    return "unexplained" if data.get("symptom_visible") else "no_incident"


def stored_diagnosis(data: Mapping[str, Any], symptom: str | None = None) -> Diagnosis:
    """The diagnosis back from the JSON the store keeps (VOCABULARY.md's contract).

    Messages are built from the store, long after the worker's Diagnosis is gone; read
    back, it goes through the same section builders as the terminal and the TUI. What
    the JSON does not keep (cause titles, the walk's layers) stays empty, and a key an
    older row lacks reads as empty.
    """
    onset = data.get("onset")
    return Diagnosis(
        symptom=str(data.get("symptom") or symptom or ""),
        symptom_source=str(data.get("symptom_source", "")),
        at=parse_instant(data["at"]) if data.get("at") else 0.0,
        onset=parse_instant(onset) if onset else None,
        baseline_window=None,
        causes=tuple(
            CauseFinding(
                cause=str(c.get("cause", "")),
                layer=str(c.get("layer", "")),
                title="",
                status="ranked",
                score=float(c.get("score") or 0.0),
                evidence=tuple(_evidence(e) for e in c.get("evidence") or ()),
                explains=tuple(c.get("explains") or ()),
                explained_by=tuple(c.get("explained_by") or ()),
            )
            for c in data.get("causes") or ()
        ),
        first_actions=tuple(
            Action(str(a.get("id", "")), str(a.get("text", "")), str(a.get("confirm", "")))
            for a in data.get("first_actions") or ()
        ),
        forbidden=tuple(
            Forbidden(
                str(f.get("action", "")), str(f.get("reason", "")), f.get("tempting", True) is not False
            )
            for f in data.get("forbidden") or ()
        ),
        missing_signals=tuple(data.get("missing_signals") or ()),
        symptom_evidence=tuple(_evidence(e) for e in data.get("symptom_evidence") or ()),
        symptom_visible=data.get("symptom_visible"),
        signal_problems=tuple((data.get("signal_problems") or {}).items()),
        verdict=_verdict(data),
        ambiguous=tuple(
            (str(a.get("cause", "")), str(a.get("tells_apart", ""))) for a in data.get("ambiguous") or ()
        ),
        first_movers=tuple(_first_mover(m) for m in data.get("first_movers") or ()),
        notes=tuple(str(n) for n in data.get("notes") or ()),
        unmonitored=tuple(
            Unmonitored(
                str(u.get("source", "")),
                tuple(str(x) for x in u.get("signals") or ()),
                tuple(str(x) for x in u.get("causes") or ()),
            )
            for u in data.get("unmonitored") or ()
        ),
        history_start=parse_instant(data["history_start"]) if data.get("history_start") else None,
    )


def first_movers_brief(s: Sections) -> list[dict[str, Any]]:
    """The first movers a message shows (the first few, earliest first), each with its line."""
    return [
        {
            "signal": m.signal,
            "replica": m.replica,
            "layer": m.layer,
            "moved_at": m.moved_at,
            "change": m.change,
            "text": m.text,
        }
        for m in s.first_movers[:FIRST_MOVERS_SHOWN]
    ]


def diagnosis_brief(row: Row | Mapping[str, Any] | None) -> dict[str, Any]:
    """The headline of a stored annotation: symptom, its fleet and how it was chosen (`scope`), top
    cause, first actions, forbidden actions; the verdict in words (`verdict`), its kind
    (`verdict_kind`, None before a diagnosis) and the causes it names (`verdict_causes`;
    `ambiguous`: each contender and what tells it apart), the first movers (the first few), the
    notes, the top cause's evidence, what not to do and why (tempting first), what is not
    monitored, and the diagnosis's onset and instant (ISO 8601, or None)."""
    if row is None:
        return {"state": "pending", "symptom": None, "cause": None, "signals": None}
    data: dict[str, Any] = json.loads(row["diagnosis"]) if row["diagnosis"] else {}
    s = sections(stored_diagnosis(data, row["symptom"]))
    v = s.verdict
    top = v.top
    return {
        "state": row["state"],
        "symptom": row["symptom"],
        "fleet": data.get("fleet"),
        "scope": row["scope"] if "scope" in set(row.keys()) else None,
        "cause": row["cause"],
        "layer": top.layer if top else None,
        "score": top.score if top else None,
        "also": [c.cause for c in s.also[:3]],
        "signals": row["signals"],
        "first_actions": [a.text for a in s.actions[:3]],
        "forbidden": [f.action for f in s.forbidden],
        "missing_signals": list(s.missing),
        "verdict": v.sentence if data else None,
        "verdict_kind": v.kind if data else None,
        "verdict_causes": list(v.causes),
        "ambiguous": [
            {"cause": c.cause, "layer": c.layer, "score": c.score, "tells_apart": c.tells}
            for c in v.contenders
        ],
        "first_movers": first_movers_brief(s),
        "notes": list(s.notes),
        "evidence": [
            {"holds": e.holds, "mark": e.mark, "check": e.check, "note": e.note, "replicas": list(e.replicas)}
            for e in (top.brief if top and v.kind == "cause" else ())
        ],
        "do_not": [{"action": f.action, "reason": f.reason, "tempting": f.tempting} for f in s.forbidden],
        "unmonitored": [
            {"source": u.source, "signals": list(u.signals), "causes": list(u.causes)} for u in s.unmonitored
        ],
        "onset": data.get("onset"),
        "at": data.get("at"),
    }


def _source(db: Tx, group_key: str, episode: int, work_id: int | None) -> Row | None:
    """The stored result a message tells of: the work's, else the episode's latest."""
    joined = (
        "SELECT a.state, a.symptom, a.cause, a.signals, w.diagnosis, w.scope FROM annotations a "
        "JOIN work w ON w.id = a.work_id"
    )
    if work_id is not None:
        found = db.execute(f"{joined} WHERE a.work_id = ? LIMIT 1", (work_id,))
    else:
        found = db.execute(
            f"{joined} WHERE a.group_key = ? AND a.episode = ? "
            "AND a.state != 'pending' ORDER BY a.annotated_at DESC, a.id DESC LIMIT 1",
            (group_key, episode),
        )
    row: Row | None = found.fetchone()
    return row


def briefed(result: WorkResult) -> WorkResult:
    """`result` with its message headline (`WorkResult.brief`): `diagnosis_brief` of what the store
    will keep of it, exactly what a message would read back."""
    return replace(result, brief=diagnosis_brief(result.stored()))


def build_message(
    db: Tx,
    group_key: str,
    kind: str,
    episode: int,
    work_id: int | None,
    brief: Mapping[str, Any] | None = None,
    *,
    public_url: str | None,
    label_limit: int,
) -> dict[str, Any]:
    """The message for one group event: `diagnosis`, `changed` or `resolved`.

    `brief` is the headline of the work `work_id`'s own result (`briefed`), the same as the
    one read back from the store here without it."""
    group = db.execute("SELECT * FROM groups WHERE group_key = ?", (group_key,)).fetchone()
    cols = (
        "id, fingerprint, alertname, status, starts_at, ends_at, labels, annotations, state, symptom, cause"
    )
    if kind == "changed" and work_id is not None:
        rows = db.execute(
            f"SELECT {cols} FROM annotations WHERE work_id = ? ORDER BY starts_at, id", (work_id,)
        ).fetchall()
    else:
        status = "resolved" if kind == "resolved" else "firing"
        rows = db.execute(
            f"SELECT {cols} FROM annotations WHERE group_key = ? AND episode = ? AND status = ? "
            "ORDER BY starts_at, id",
            (group_key, episode, status),
        ).fetchall()
    headline = dict(brief) if brief is not None else diagnosis_brief(_source(db, group_key, episode, work_id))
    alerts = []
    for r in rows[:MAX_ALERTS_KEPT]:
        ends = r["ends_at"]
        labels = json.loads(r["labels"])
        notes = json.loads(r["annotations"])
        alerts.append(
            {
                "id": r["id"],
                "fingerprint": r["fingerprint"],
                "alertname": _clip(r["alertname"], label_limit),
                "status": r["status"],
                "starts_at": format_instant(r["starts_at"]),
                "ends_at": format_instant(ends) if ends is not None else None,
                "duration_seconds": round(ends - r["starts_at"], 3) if ends is not None else None,
                "labels": _clip_map(labels, label_limit),
                "summary": _clip(notes.get("summary", ""), label_limit),
                "url": annotation_url(public_url, r["id"]),
            }
        )
    return {
        "kind": kind,
        "status": "resolved" if kind == "resolved" else "firing",
        "group_key": group_key,
        "episode": episode,
        "receiver": group["receiver"] if group else "",
        "group_labels": _clip_map(json.loads(group["group_labels"]), label_limit) if group else {},
        "external_url": group["external_url"] if group else "",
        "truncated_alerts": int(group["truncated"]) if group else 0,
        "alert_count": len(rows),
        "alerts": alerts,
        "diagnosis": headline,
    }
