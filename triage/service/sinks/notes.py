"""What the PagerDuty and Opsgenie sinks share: a note on the incident Alertmanager opened.

Both find the incident (or alert) by Alertmanager's own key for the group, write the
diagnosis as a plain-text note whose last line is `triage-key: <idempotency key>`
(so a repeated message finds its note and is not added twice), and wait for an
incident that does not exist yet within the sink's `retry_window`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import replace
from typing import Any

from triage.service.sinks.escape import text_finalize
from triage.service.sinks.http import Attempt, Response, retry_after
from triage.service.sinks.kind import Delivery, instant

NOTE_MAX_CHARS = 25_000
"""The longest note content sent; a longer one is shortened by the outbox first."""

KEY_PREFIX = "triage-key: "
"""The note's last line: `triage-key: <the message's idempotency key>`."""


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
    starts = [instant(a.get("starts_at")) for a in message.get("alerts", []) if isinstance(a, dict)]
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
