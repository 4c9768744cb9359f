"""PagerDuty: the diagnosis as a note on the incident Alertmanager opened for the group.

Alertmanager's PagerDuty integration sends `dedup_key` = `group_key_hash(group_key)`,
which PagerDuty keeps as the incident's `incident_key`. One attempt goes through
PagerDuty's REST API v2 (`Authorization: Token token=<key>`, `Accept:
application/vnd.pagerduty+json;version=2`):

1. find the incident: `GET /incidents?incident_key=<hash>&date_range=all` with every
   status, so that a `resolved` message still finds its resolved incident. The key is
   the same at every episode of the group, so of several incidents an open one is
   taken, else the latest opened since the episode's first alert started;
2. list its notes (`GET /incidents/{id}/notes`): one that already carries this
   message's `triage-key: <idempotency key>` line was added by an earlier attempt
   (a replica that died after the POST), so the message counts as delivered;
3. add the note (`POST /incidents/{id}/notes` as the `From: <from_email>` user, body
   `{"note": {"content": ...}}`); the note's last line is the `triage-key` line.

No incident yet (Alertmanager may page after the diagnosis is ready) is a failure
retried within the sink's `retry_window`, then a dead letter (`no_incident`). A note
over `NOTE_MAX_CHARS` is refused here as too large, so the outbox shortens it; so is a
413, or a 400 that says the content is too long. Every other answer is classified as
for any sink (`triage.service.sinks.http.refused`): 400/401/403/404 are dead letters at
once with PagerDuty's own message, 429 and 5xx are retried, a 429 without `Retry-After`
after PagerDuty's `ratelimit-reset` seconds. What it shares with the Opsgenie sink,
which works the same way, is in `triage.service.sinks.notes`.
"""

from __future__ import annotations

import json
import urllib.parse
from collections.abc import Iterable, Mapping
from typing import Any

from triage.service.sinks.http import Attempt, exchange
from triage.service.sinks.kind import Delivery, Kind, group_key_hash, instant, text_body
from triage.service.sinks.notes import (
    NOTE_MAX_CHARS,
    answered,
    carries_key,
    episode_start,
    missing,
    note_content,
    note_finalize,
    too_long,
)

ACCEPT = "application/vnd.pagerduty+json;version=2"
STATUSES = ("triggered", "acknowledged", "resolved")
EPISODE_SLACK = 300.0
"""A resolved incident counts for an episode if opened at most this long before its first alert started."""


def find_incident(delivery: Delivery, headers: Mapping[str, str]) -> tuple[str | None, Attempt | None]:
    """The id of the group's incident, or the attempt that says why there is none (yet)."""
    key = group_key_hash(str(delivery.message.get("group_key", "")))
    query = urllib.parse.urlencode(
        [
            ("incident_key", key),
            ("date_range", "all"),
            *(("statuses[]", status) for status in STATUSES),
            ("sort_by", "created_at:desc"),
            ("limit", "100"),
        ]
    )
    response = exchange(
        "GET", f"{_base(delivery)}/incidents?{query}", headers=headers, timeout=delivery.sink.timeout
    )
    if response.failure is not None:
        return None, answered(response, delivery.token, "ratelimit-reset")
    parsed = response.json()
    incidents = parsed.get("incidents") if isinstance(parsed, dict) else None
    if not isinstance(incidents, list):
        return None, Attempt(False, f"HTTP {response.status}: not a list of incidents", "error_body")
    chosen = choose_incident(incidents, episode_start(delivery.message))
    if chosen is None:
        return None, missing("PagerDuty incident with incident_key", key, "no_incident", delivery)
    return chosen, None


def choose_incident(incidents: Iterable[Any], since: float | None) -> str | None:
    """An open incident if there is one, else the latest opened since the episode began."""
    found = [i for i in incidents if isinstance(i, dict) and isinstance(i.get("id"), str) and i["id"]]
    opened = {i["id"]: instant(i.get("created_at")) for i in found}
    open_now = [i for i in found if i.get("status") in ("triggered", "acknowledged")]
    if open_now:
        return str(max(open_now, key=lambda i: opened[i["id"]] or 0.0)["id"])
    earliest = float("-inf") if since is None else since - EPISODE_SLACK
    recent = [i for i in found if (opened[i["id"]] or float("-inf")) >= earliest]
    return str(max(recent, key=lambda i: opened[i["id"]] or 0.0)["id"]) if recent else None


def add_note(delivery: Delivery) -> Attempt:
    """Find the incident, skip a note already added under this key, else add it."""
    if not delivery.token or not delivery.sink.from_email:
        return Attempt(False, "no REST API key or from_email configured", "config", retry=False)
    content = note_content(delivery)
    if len(content) > NOTE_MAX_CHARS:
        return too_long(len(content), "PagerDuty")
    headers = {"Authorization": f"Token token={delivery.token}", "Accept": ACCEPT}
    incident, failed = find_incident(delivery, headers)
    if failed is not None or incident is None:
        return failed or Attempt(False, "no incident", "no_incident")
    notes_url = f"{_base(delivery)}/incidents/{urllib.parse.quote(incident, safe='')}/notes"
    listed = exchange("GET", notes_url, headers=headers, timeout=delivery.sink.timeout)
    if listed.failure is not None:
        return answered(listed, delivery.token, "ratelimit-reset")
    parsed = listed.json()
    notes = parsed.get("notes") if isinstance(parsed, dict) else None
    if not isinstance(notes, list):
        return Attempt(False, f"HTTP {listed.status}: not a list of notes", "error_body")
    if carries_key((n.get("content") for n in notes if isinstance(n, dict)), delivery.key):
        return Attempt(True)
    added = exchange(
        "POST",
        notes_url,
        body=json.dumps({"note": {"content": content}}, ensure_ascii=False).encode(),
        headers={**headers, "Content-Type": "application/json", "From": delivery.sink.from_email},
        timeout=delivery.sink.timeout,
    )
    if added.failure is not None:
        return answered(added, delivery.token, "ratelimit-reset")
    return Attempt(True)


def _base(delivery: Delivery) -> str:
    return delivery.url.rstrip("/")


PAGERDUTY = Kind("pagerduty", "pagerduty.txt.j2", add_note, body=text_body, finalize=note_finalize)
