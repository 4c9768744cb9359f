"""The sinks that POST the rendered body to a URL: a generic JSON webhook and Slack.

Both carry the message's `Idempotency-Key`. A Slack-compatible receiver may answer 200
with `{"ok": false, "error": ...}`: that is a failure too, and `msg_too_long` in it
means too large.
"""

from __future__ import annotations

from triage.service.sinks.escape import slack_finalize, slack_link
from triage.service.sinks.http import TOO_LARGE_ERRORS, Attempt
from triage.service.sinks.kind import Delivery, Kind, post_body, slack_body


def post_message(delivery: Delivery) -> Attempt:
    """POST the body once to the sink's URL."""
    response = post_body(delivery)
    if response.failure is not None:
        return response.failure
    parsed = response.json()
    if isinstance(parsed, dict) and parsed.get("ok") is False:
        error = str(parsed.get("error", ""))[:100]
        return Attempt(
            False,
            f"HTTP {response.status} with an error body: {error}",
            "error_body",
            error in TOO_LARGE_ERRORS,
        )
    return Attempt(True)


WEBHOOK = Kind("webhook", "webhook.json.j2", post_message, functions={"link": slack_link})
SLACK = Kind(
    "slack",
    "slack.txt.j2",
    post_message,
    body=slack_body,
    finalize=slack_finalize,
    functions={"link": slack_link},
)
