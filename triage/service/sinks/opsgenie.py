"""Opsgenie: the diagnosis as a note on the alert Alertmanager created for the group.

Alertmanager's Opsgenie integration sets the alert's `alias` to
`group_key_hash(group_key)`, so the note is added by alias through the Alert API
(`Authorization: GenieKey <key>`, the US or EU host by the sink's `region`):

1. list the alert's notes (`GET /v2/alerts/{alias}/notes?identifierType=alias`): a
   404 (`{"message": "Alert does not exist", "took", "requestId"}`) means no alert
   yet; a note that already carries this message's `triage-key` line was added by an
   earlier attempt, so the message counts as delivered;
2. add the note (`POST /v2/alerts/{alias}/notes?identifierType=alias`, body `{"note",
   "user", "source"}`). Opsgenie answers 202 and processes the request later, so
3. its outcome is read at `GET /v2/alerts/requests/{requestId}` (a 404 there: not
   processed yet, asked again a few times): `isSuccess` true is delivered; false
   with "Alert does not exist" is a missing alert; another failure is a dead letter
   with Opsgenie's status text. Still unknown after `POLL_TRIES`: retried later, and
   step 1 then finds the note if it landed meanwhile.

A missing alert (Alertmanager may create it after the diagnosis is ready) is retried
within the sink's `retry_window`, then a dead letter (`no_alert`). A note over
`NOTE_MAX_CHARS` is refused here as too large, so the outbox shortens it. Other answers
are classified as for any sink; a 429 without `Retry-After` waits for Opsgenie's
`X-RateLimit-Period-In-Sec`.
"""

from __future__ import annotations

import json
import time
import urllib.parse

from triage.service.sinks.http import Attempt, Response, exchange
from triage.service.sinks.kind import Delivery, Kind, group_key_hash, text_body
from triage.service.sinks.notes import (
    NOTE_MAX_CHARS,
    answered,
    carries_key,
    missing,
    note_content,
    note_finalize,
    too_long,
)

SOURCE = "llm-triage"
RATE_HEADER = "x-ratelimit-period-in-sec"
POLL_TRIES = 5
POLL_WAIT = 0.2
"""Seconds between looks at an accepted request's outcome."""


def add_note(delivery: Delivery) -> Attempt:
    """Skip a note already added under this key, else add it and read the outcome."""
    if not delivery.token:
        return Attempt(False, "no API key configured", "config", retry=False)
    content = note_content(delivery)
    if len(content) > NOTE_MAX_CHARS:
        return too_long(len(content), "Opsgenie")
    alias = group_key_hash(str(delivery.message.get("group_key", "")))
    alerts = f"{delivery.url.rstrip('/')}/v2/alerts"
    notes_url = f"{alerts}/{urllib.parse.quote(alias, safe='')}/notes"
    headers = {"Authorization": f"GenieKey {delivery.token}", "Accept": "application/json"}
    timeout = delivery.sink.timeout
    query = urllib.parse.urlencode({"identifierType": "alias", "order": "desc", "limit": "100"})
    listed = exchange("GET", f"{notes_url}?{query}", headers=headers, timeout=timeout)
    if _alert_missing(listed):
        return missing("Opsgenie alert with alias", alias, "no_alert", delivery)
    if listed.failure is not None:
        return answered(listed, delivery.token, RATE_HEADER)
    parsed = listed.json()
    notes = parsed.get("data") if isinstance(parsed, dict) else None
    if not isinstance(notes, list):
        return Attempt(False, f"HTTP {listed.status}: not a list of notes", "error_body")
    if carries_key((n.get("note") for n in notes if isinstance(n, dict)), delivery.key):
        return Attempt(True)
    body = {"note": content, "user": SOURCE, "source": SOURCE}
    added = exchange(
        "POST",
        f"{notes_url}?identifierType=alias",
        body=json.dumps(body, ensure_ascii=False).encode(),
        headers={**headers, "Content-Type": "application/json"},
        timeout=timeout,
    )
    if _alert_missing(added):
        return missing("Opsgenie alert with alias", alias, "no_alert", delivery)
    if added.failure is not None:
        return answered(added, delivery.token, RATE_HEADER)
    accepted = added.json()
    request_id = accepted.get("requestId") if isinstance(accepted, dict) else None
    if added.status != 202 or not isinstance(request_id, str) or not request_id:
        return Attempt(True)
    return _outcome(delivery, alerts, request_id, headers, alias)


def _outcome(
    delivery: Delivery, alerts: str, request_id: str, headers: dict[str, str], alias: str
) -> Attempt:
    """What became of an accepted request, asked at its status endpoint."""
    url = f"{alerts}/requests/{urllib.parse.quote(request_id, safe='')}"
    for attempt in range(POLL_TRIES):
        if attempt:
            time.sleep(POLL_WAIT)
        status = exchange("GET", url, headers=headers, timeout=delivery.sink.timeout)
        if status.status == 404:  # not processed yet
            continue
        if status.failure is not None:
            break
        parsed = status.json()
        data = parsed.get("data") if isinstance(parsed, dict) else None
        if not isinstance(data, dict):
            break
        if data.get("isSuccess") is True or data.get("success") is True:
            return Attempt(True)
        text = " ".join(str(data.get("status") or "failed").split())[:160]
        if "does not exist" in text.lower():
            return missing("Opsgenie alert with alias", alias, "no_alert", delivery)
        return Attempt(
            False, f"Opsgenie did not add the note: {text} (not retried)", "request_failed", retry=False
        )
    return Attempt(
        False, f"Opsgenie accepted the note (request {request_id}) but has not processed it yet", "pending"
    )


def _alert_missing(response: Response) -> bool:
    """Opsgenie's 404 for an alias it does not know (its `message`, not any 404)."""
    if response.status != 404:
        return False
    parsed = response.json()
    return isinstance(parsed, dict) and "does not exist" in str(parsed.get("message", "")).lower()


OPSGENIE = Kind("opsgenie", "opsgenie.txt.j2", add_note, body=text_body, finalize=note_finalize)
