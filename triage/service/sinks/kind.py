"""What a kind of sink is: how its body is rendered, and how one message is delivered.

A kind is data plus one function, so adding a destination is one module and one line in
`triage.service.sinks.registry`; the outbox, the retries, the dead letters, the
shortening of a message too large and the templates are the same for every kind.

`deliver` makes one attempt, which may be several HTTP requests (find the PagerDuty
incident, then add the note), and says how it went as an `Attempt`: it never raises
for anything the network or the far end does, and never names a URL or a token in its
error (both can be secrets).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from signals.timeparse import parse_instant
from triage.service.config import SinkSettings
from triage.service.sinks.escape import slack_escape
from triage.service.sinks.http import Attempt, Response, exchange


@dataclass(frozen=True)
class Delivery:
    """One message on its way to one sink: what `deliver` is given."""

    sink: SinkSettings
    url: str
    """The webhook URL, or the API's base URL."""
    token: str | None
    key: str
    """The message's idempotency key, fixed when it was queued."""
    message: Mapping[str, Any]
    """The group event as data (`triage.service.messages.build_message`)."""
    body: bytes
    """The message rendered by the sink's template."""


def post_body(delivery: Delivery) -> Response:
    """POST the rendered body, as JSON, to the sink's URL with the message's `Idempotency-Key`."""
    return exchange(
        "POST",
        delivery.url,
        body=delivery.body,
        headers={"Content-Type": "application/json", "Idempotency-Key": delivery.key},
        timeout=delivery.sink.timeout,
    )


def group_key_hash(group_key: str) -> str:
    """Alertmanager's own key for a group's incident: the SHA-256 hex of its group key, which
    its PagerDuty integration sends as `dedup_key` and its Opsgenie integration as `alias`."""
    return hashlib.sha256(group_key.encode()).hexdigest()


def instant(value: Any) -> float | None:
    """A time of the message (ISO 8601, as `build_message` writes them) in epoch seconds; None
    when absent or unreadable."""
    try:
        return parse_instant(value) if value else None
    except (TypeError, ValueError):
        return None


def json_body(text: str, note: str | None) -> bytes:
    """A JSON template's output, checked to parse; a `note` becomes a top-level key."""
    parsed = json.loads(text)
    if note and isinstance(parsed, dict):
        parsed.setdefault("note", note)
        return json.dumps(parsed, ensure_ascii=False).encode()
    return text.encode()


def slack_body(text: str, note: str | None) -> bytes:
    text = text.strip()
    if note:
        text = f"{text}\n:warning: _{slack_escape(note)}_"
    return json.dumps({"text": text}, ensure_ascii=False).encode()


def text_body(text: str, note: str | None) -> bytes:
    """Plain text, the note as its last line."""
    text = text.strip()
    return (f"{text}\n\n{note}" if note else text).encode()


@dataclass(frozen=True)
class Kind:
    """A kind of sink.

    `finalize` escapes every `{{ expression }}` of its templates for the format (None:
    the template writes JSON with `tojson`). `body` turns the rendered text and the
    note of a shortened message into the body handed to `deliver`. `filters` and
    `functions` are offered to its templates.
    """

    name: str
    template: str
    deliver: Callable[[Delivery], Attempt]
    body: Callable[[str, str | None], bytes] = json_body
    finalize: Callable[[Any], Any] | None = None
    filters: Mapping[str, Callable[..., Any]] = field(default_factory=dict)
    functions: Mapping[str, Callable[..., Any]] = field(default_factory=dict)
