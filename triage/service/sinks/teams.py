"""Microsoft Teams: an Adaptive Card POSTed to a Workflows webhook ("When a Teams webhook
request is received"), which posts it to a channel.

The body is a message with one Adaptive Card attachment, rendered by `teams.json.j2`.
Card text is markdown, so every `{{ expression }}` of the template is written as the
inside of a JSON string and as plain text for the card's markdown (`teams_finalize`):
a label `[x](http://evil)` shows literally, never as a link, and no value can break the
JSON. Only `link(url, text)` and `url(value)` produce a link, and `tojson` gives a JSON
value whose strings are escaped the same way.

The Workflows endpoint answers 202 once it has accepted the request; the flow posts the
card afterwards, so a card Teams finds too large (its message limit is about 28 KB)
fails in the flow, after the 202. A card over `MAX_CARD_BYTES` is therefore shortened
before it is sent. Teams keeps no idempotency key: a message repeated by at-least-once
delivery (a replica dying between the send and its record) is posted twice.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

from triage.core.escape import printable
from triage.service.sinks.escape import missing_or
from triage.service.sinks.http import Attempt
from triage.service.sinks.kind import Delivery, Kind, post_body

MAX_CARD_BYTES = 24 * 1024
"""Cards larger than this are shortened before sending: Teams measures a message's size
its own way (larger than the request body) against its limit of 28 KB."""

TOO_LARGE_MARKERS = (b"MessageSizeExceeded", b"RequestEntityTooLarge", b"message is too large")
"""Teams' and Power Automate's words for a message over the size limit, in a 400 body."""

CARD_TYPE = "application/vnd.microsoft.card.adaptive"

_MD = re.compile(r"([\\`*\[\]{}|#!~])|(?<![A-Za-z0-9])_|_(?![A-Za-z0-9])")
_BLOCK = re.compile(r"^([-+=])|^(\d{1,9})([.)])(?=\s|$)")


class TeamsRaw(str):
    """Text already safe inside a JSON string of a card: a link or URL built by `link()`
    or `url()`, or a JSON value from `tojson`."""


def teams_text(value: Any) -> str:
    """A value as plain text for an Adaptive Card's markdown: one line, no markup.

    Whitespace runs (line breaks included) fold into one space, so a value cannot start
    a list; control and bidi characters are shown as their escapes; every character the
    card's markdown reads as markup (emphasis, links, `{{DATE()}}`, lists) is
    backslash-escaped, so `[x](http://evil)` never becomes a link. Underscores inside
    words stay (kv_pressure): markdown does not emphasise them.
    """
    text = printable(" ".join(str(value).split()))
    text = _MD.sub(lambda m: "\\" + m.group(0), text)
    return _BLOCK.sub(lambda m: "\\" + m.group(0) if m.group(1) else f"{m.group(2)}\\{m.group(3)}", text)


def json_fragment(text: str) -> str:
    """`text` as the inside of a JSON string (between its quotes)."""
    return json.dumps(text, ensure_ascii=False)[1:-1]


def teams_finalize(value: Any) -> Any:
    """Every `{{ expression }}` of a Teams template: markdown-neutral text, safe inside a JSON string."""
    if isinstance(value, TeamsRaw):
        return value
    missing = missing_or(value)
    return json_fragment(missing if missing is not None else teams_text(value))


def _neutral(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {str(k): _neutral(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_neutral(v) for v in value]
    if isinstance(value, str):
        return teams_text(value)
    return value


def teams_tojson(value: Any) -> TeamsRaw:
    """`tojson` in a Teams template: a JSON value whose every string is markdown-neutral text."""
    return TeamsRaw(json.dumps(_neutral(value), ensure_ascii=False))


def safe_url(url: Any) -> str | None:
    """An http(s) URL without whitespace or control characters, else None."""
    text = str(url or "")
    if not text.startswith(("http://", "https://")) or any(c.isspace() or not c.isprintable() for c in text):
        return None
    return text


def teams_url(url: Any) -> TeamsRaw:
    """A URL for an `Action.OpenUrl`, inside a JSON string; empty (false) when not an http(s) URL."""
    safe = safe_url(url)
    return TeamsRaw(json_fragment(safe) if safe else "")


def teams_link(url: Any, text: Any) -> TeamsRaw:
    """A markdown link `[text](url)` inside a JSON string; only the text when the URL is not http(s)."""
    safe = safe_url(url)
    label = teams_text(text)
    if safe is None:
        return TeamsRaw(json_fragment(label))
    return TeamsRaw(json_fragment(f"[{label}]({safe.replace('(', '%28').replace(')', '%29')})"))


def teams_body(text: str, note: str | None) -> bytes:
    """The rendered message, checked to be a message with an Adaptive Card; a `note` (the
    message was shortened) becomes the card's last line."""
    parsed = json.loads(text)
    try:
        attachments = parsed["attachments"]
        card = attachments[0]["content"]
        ok = parsed.get("type") == "message" and attachments[0].get("contentType") == CARD_TYPE
        ok = ok and isinstance(card.get("body"), list)
    except (KeyError, IndexError, TypeError, AttributeError):
        ok = False
    if not ok:
        raise ValueError("not a Teams message with an Adaptive Card attachment")
    if note:
        card["body"].append(
            {"type": "TextBlock", "text": f"⚠ _{teams_text(note)}_", "wrap": True, "isSubtle": True}
        )
    return json.dumps(parsed, ensure_ascii=False).encode()


def post_card(delivery: Delivery) -> Attempt:
    """POST the card once to the Workflows webhook."""
    size = len(delivery.body)
    if size > MAX_CARD_BYTES:
        return Attempt(
            False,
            f"the card is {size} bytes, over the {MAX_CARD_BYTES} sent to Teams",
            "too_large",
            too_large=True,
            retry=False,
        )
    response = post_body(delivery)
    failure = response.failure
    if failure is None:
        return Attempt(True)
    if response.status == 400 and any(m in response.body for m in TOO_LARGE_MARKERS):
        return Attempt(False, failure.error, failure.reason, too_large=True, retry=False)
    return failure


TEAMS = Kind(
    "teams",
    "teams.json.j2",
    post_card,
    body=teams_body,
    finalize=teams_finalize,
    filters={"tojson": teams_tojson},
    functions={"link": teams_link, "url": teams_url},
)
