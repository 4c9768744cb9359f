"""A Microsoft Teams Workflows webhook on loopback ("When a Teams webhook request is received").

It answers as the Workflows endpoint does: 202 Accepted with an empty body for a message
with one Adaptive Card attachment; 400 with Teams' error body
`{"error": {"code", "message"}}` for a body that is not one; 413 for a body over its size
limit. The faults of `RecordingSink` (`fail_with`, `stall`, `stop`) apply before the
body is looked at; `fail_teams` answers a status with Teams' error body.
"""

from __future__ import annotations

import json
import time
from http.server import BaseHTTPRequestHandler
from typing import Any

from .sink import Received, RecordingSink, _Reply, _send

CARD = "application/vnd.microsoft.card.adaptive"


def teams_error(code: str, message: str) -> bytes:
    return json.dumps({"error": {"code": code, "message": message}}).encode()


class TeamsWorkflow(RecordingSink):
    """A Workflows webhook; `path` holds a secret signature, as the real URL's `sig` does."""

    path = "/workflows/7f3c/triggers/manual/paths/invoke?api-version=1&sig=SECRET-SIG-5bd1"

    def __init__(self, port: int = 0, *, max_body: int = 28 * 1024) -> None:
        super().__init__(port)
        self.limit = max_body
        self.reply_with(202, b"", {"Content-Length": "0"})

    @property
    def webhook_url(self) -> str:
        return self.url + self.path

    def cards(self) -> list[dict[str, Any]]:
        """The Adaptive Cards accepted so far."""
        return [r.json["attachments"][0]["content"] for r in self.accepted()]

    def fail_teams(
        self,
        status: int,
        code: str,
        message: str,
        *,
        retry_after: str | None = None,
        times: int | None = None,
    ) -> None:
        self.fail_with(status, retry_after=retry_after, times=times, body=teams_error(code, message))

    def _handle(self, handler: BaseHTTPRequestHandler) -> None:
        arrived = time.monotonic()
        handler.close_connection = True
        length = int(handler.headers.get("Content-Length") or 0)
        body = handler.rfile.read(length) if length else b""
        headers = dict(handler.headers.items())
        reply = self._next_reply()
        parsed: Any = None
        try:
            parsed = json.loads(body) if body else None
        except ValueError:
            parsed = None
        if reply.status < 400:
            if length > self.limit:
                reply = _Reply(
                    413,
                    teams_error("RequestEntityTooLarge", f"The request body of {length} bytes is too large"),
                )
            elif handler.path != self.path:
                reply = _Reply(
                    404, teams_error("TriggerNotFound", "The workflow trigger could not be found.")
                )
            elif not _is_card_message(parsed):
                reply = _Reply(
                    400,
                    teams_error(
                        "InvalidRequestContent", "The request content is not a message with an Adaptive Card."
                    ),
                )
        self._record(Received(handler.command, handler.path, headers, body, parsed, reply.status, arrived))
        if reply.stall and self._release.wait(reply.stall):
            return
        _send(handler, reply)


def _is_card_message(parsed: Any) -> bool:
    if not isinstance(parsed, dict) or parsed.get("type") != "message":
        return False
    attachments = parsed.get("attachments")
    if not isinstance(attachments, list) or len(attachments) != 1 or not isinstance(attachments[0], dict):
        return False
    card = attachments[0].get("content")
    return (
        attachments[0].get("contentType") == CARD
        and isinstance(card, dict)
        and card.get("type") == "AdaptiveCard"
        and isinstance(card.get("body"), list)
        and isinstance(card.get("version"), str)
    )
