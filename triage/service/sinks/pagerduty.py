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
after PagerDuty's `ratelimit-reset` seconds. The helpers at the end are shared with
the Opsgenie sink, which works the same way.
"""

from __future__ import annotations

import json
import urllib.parse
from collections.abc import Iterable, Mapping
from dataclasses import replace
from typing import Any

from signals.timeparse import parse_instant
from triage.service.sinks.escape import text_finalize
from triage.service.sinks.http import Attempt, Response, exchange, retry_after
from triage.service.sinks.kind import Delivery, Kind, group_key_hash, text_body

ACCEPT = "application/vnd.pagerduty+json;version=2"
STATUSES = ("triggered", "acknowledged", "resolved")
NOTE_MAX_CHARS = 25_000
"""The longest note content sent; a longer one is shortened by the outbox first."""

KEY_PREFIX = "triage-key: "
"""The note's last line: `triage-key: <the message's idempotency key>`."""

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
    opened = {i["id"]: _instant(i.get("created_at")) for i in found}
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


# -- shared with the Opsgenie sink ---------------------------------------------------


def note_finalize(value: Any) -> Any:
    """A note's `{{ expression }}`: control and bidi characters and line breaks shown as escapes,
    so a label can neither hide text nor start a line of its own (a forged `triage-key`)."""
    text = text_finalize(value)
    return text.replace("\n", "\\n") if isinstance(text, str) else text


def note_content(delivery: Delivery) -> str:
    """The rendered note with the message's idempotency key as its last line."""
    text = delivery.body.decode("utf-8", "replace").strip()
    return f"{text}\n\n{KEY_PREFIX}{delivery.key}"


def carries_key(texts: Iterable[Any], key: str) -> bool:
    """Whether one of the notes is this message's (its `triage-key` line)."""
    line = KEY_PREFIX + key
    return any(line in (part.strip() for part in str(text).splitlines()) for text in texts if text)


def episode_start(message: Mapping[str, Any]) -> float | None:
    """When the message's first alert started (epoch seconds), if any alert says."""
    starts = [_instant(a.get("starts_at")) for a in message.get("alerts", []) if isinstance(a, dict)]
    known = [s for s in starts if s is not None]
    return min(known) if known else None


def missing(what: str, key: str, reason: str, delivery: Delivery) -> Attempt:
    """The incident or alert is not there (yet): retried within the sink's `retry_window`."""
    return Attempt(False, f"no {what} {key} yet", reason, retry=True, window=delivery.sink.retry_window)


def too_long(chars: int, service: str) -> Attempt:
    return Attempt(
        False,
        f"note of {chars} characters, over {service}'s {NOTE_MAX_CHARS}",
        "too_long",
        too_large=True,
        retry=False,
    )


def answered(response: Response, token: str | None, *rate_headers: str) -> Attempt:
    """A failed exchange as an attempt: `refused`'s classification; a 429 without `Retry-After`
    waits for the service's own rate-limit header; a 400 saying "too long" is too large;
    the token never appears in the error, whatever the far end echoes."""
    attempt = response.failure or Attempt(False, f"HTTP {response.status}", f"http_{response.status}")
    if response.status == 429 and attempt.retry_after is None:
        for name in rate_headers:
            wait = retry_after(response.headers.get(name))
            if wait is not None:
                attempt = replace(attempt, retry_after=wait)
                break
    if response.status == 400 and "too long" in attempt.error.lower():
        attempt = replace(attempt, too_large=True)
    if token and token in attempt.error:
        attempt = replace(attempt, error=attempt.error.replace(token, "<token>"))
    return attempt


def _base(delivery: Delivery) -> str:
    return delivery.url.rstrip("/")


def _instant(value: Any) -> float | None:
    try:
        return parse_instant(value) if value else None
    except (TypeError, ValueError):
        return None


PAGERDUTY = Kind("pagerduty", "pagerduty.txt.j2", add_note, body=text_body, finalize=note_finalize)
