"""One HTTP request to a sink, and what its answer means for the message.

The answer decides the message's fate, the same way for every kind of sink:
- 2xx: delivered;
- 408, 425, 429 and 5xx, a timeout, a refused connection, a name that does not resolve
  (yet): tried again later, after the `Retry-After` the sink asked for if it did;
- 413: too large, so the message is shortened at once (`dispatch`);
- any other 4xx (a bad token, a URL that is gone, a body it rejects): a dead letter at
  once, with the status and the sink's own error text as the reason, since sending
  the same request again cannot succeed.

Requests bypass proxies from the environment (a sink is a deliberate address) and
never carry the URL into an error: a Slack or Teams webhook URL is itself a secret.
"""

from __future__ import annotations

import email.utils
import json
import socket
import time
import urllib.error
import urllib.request
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from triage import __version__
from triage.core.escape import printable

TOO_LARGE_ERRORS = frozenset({"msg_too_long", "msg_blocks_too_long"})
"""Slack's error codes for a message over its size limits (an HTTP 413 says the same)."""

RETRIED_STATUSES = frozenset({408, 425, 429})
"""The 4xx that say "later" (a timeout, too early, rate limited); every 5xx says it too."""

MAX_RETRY_AFTER = 3600.0
"""The longest `Retry-After` honoured; a sink asking for more is retried after this."""

ERROR_TEXT_CHARS = 160


@dataclass(frozen=True)
class Attempt:
    """How one delivery attempt went; `reason` is a metric label (http_503, unreachable, error_body).

    `too_large`: the sink refused the message for its size (HTTP 413, or Slack's
    `msg_too_long`); shortening it may pass. `retry`: trying the same again later may
    succeed. `retry_after`: the delay the sink asked for. `window`: retried only this
    many seconds after the message was queued (waiting for an incident to exist).
    """

    ok: bool
    error: str = ""
    reason: str = ""
    too_large: bool = False
    retry: bool = True
    retry_after: float | None = None
    window: float | None = None


@dataclass(frozen=True)
class Response:
    """A sink's answer. `status` 0: none came (`failure` says why)."""

    status: int
    body: bytes = b""
    headers: Mapping[str, str] = field(default_factory=dict)
    failure: Attempt | None = None

    @property
    def ok(self) -> bool:
        return self.failure is None

    def json(self) -> Any:
        """The body parsed, or None when it is not JSON."""
        try:
            return json.loads(self.body) if self.body.strip()[:1] in (b"{", b"[") else None
        except ValueError:
            return None


def exchange(
    method: str,
    url: str,
    *,
    body: bytes | None = None,
    headers: Mapping[str, str] | None = None,
    timeout: float,
) -> Response:
    """Send one request; never raises for what the network or the sink does."""
    request = urllib.request.Request(
        url,
        data=body,
        method=method,
        headers={"User-Agent": f"llm-triage/{__version__}", **(headers or {})},
    )
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    try:
        with opener.open(request, timeout=timeout) as reply:
            return Response(reply.status, reply.read(1 << 20), _lowered(reply.headers))
    except urllib.error.HTTPError as exc:
        try:
            raw = exc.read(65536)
        except (OSError, ValueError):
            raw = b""
        heads = _lowered(exc.headers)
        return Response(exc.code, raw, heads, refused(exc.code, raw, heads))
    except (urllib.error.URLError, OSError, ValueError) as exc:
        reason = getattr(exc, "reason", exc)
        if isinstance(reason, socket.gaierror):
            # A name that does not resolve (yet): retried like a refused connection, said apart.
            return Response(
                0, failure=Attempt(False, f"unreachable (DNS: {_dns_text(reason)})", "unreachable")
            )
        if isinstance(reason, TimeoutError | socket.timeout):
            return Response(0, failure=Attempt(False, f"timed out after {timeout:g}s", "timeout"))
        return Response(0, failure=Attempt(False, f"unreachable: {type(reason).__name__}", "unreachable"))


def refused(status: int, body: bytes, headers: Mapping[str, str]) -> Attempt:
    """A non-2xx answer as an attempt: retried or not, with the sink's own words."""
    detail = error_text(body)
    code = _slack_code(body)
    too_large = status == 413 or code in TOO_LARGE_ERRORS
    retry = status >= 500 or status in RETRIED_STATUSES
    error = f"HTTP {status}" + (f": {detail}" if detail else "")
    if not retry and not too_large:
        error += " (not retried: sending it again cannot succeed)"
    return Attempt(
        False,
        error,
        f"http_{status}",
        too_large=too_large,
        retry=retry,
        retry_after=retry_after(headers.get("retry-after")) if retry else None,
    )


def error_text(body: bytes) -> str:
    """The sink's error in a few words: a JSON body's `message`/`error`/`errors`, or short text."""
    text = body.decode("utf-8", "replace").strip()
    if not text:
        return ""
    try:
        parsed = json.loads(text) if text[:1] in "{[" else None
    except ValueError:
        parsed = None
    if isinstance(parsed, dict):
        found = _json_error(parsed)
        text = found if found else ""
    elif text.lstrip()[:1] == "<":  # an HTML error page says nothing useful in a log line
        text = ""
    text = " ".join(printable(text).split())
    return text if len(text) <= ERROR_TEXT_CHARS else text[: ERROR_TEXT_CHARS - 1] + "…"


def _json_error(parsed: Mapping[str, Any]) -> str:
    """PagerDuty's `{"error": {"message", "errors"}}`, Opsgenie's and Grafana's `message`,
    Slack's `{"error": "code"}`, Teams' `{"error": {"code", "message"}}`."""
    error = parsed.get("error")
    if isinstance(error, dict):
        parts = [str(error.get("message") or error.get("code") or "")]
        errors = error.get("errors")
        if isinstance(errors, list) and errors:
            parts.append("; ".join(str(e) for e in errors[:3]))
        return ": ".join(p for p in parts if p)
    if isinstance(error, str) and error:
        return error
    for key in ("message", "errors", "detail"):
        value = parsed.get(key)
        if value:
            return "; ".join(map(str, value[:3])) if isinstance(value, list) else str(value)
    return ""


def _slack_code(body: bytes) -> str:
    """Slack's error code in a 4xx body (`msg_too_long`, as text or `{"error": ...}`), else ''."""
    text = body.decode("utf-8", "replace").strip()
    if text.startswith("{"):
        try:
            parsed = json.loads(text)
        except ValueError:
            return ""
        return str(parsed.get("error", "")) if isinstance(parsed, dict) else ""
    return text if text.replace("_", "").isalnum() and len(text) <= 64 else ""


def retry_after(value: str | None, now: float | None = None) -> float | None:
    """`Retry-After` in seconds (a number of seconds or an HTTP date), at most `MAX_RETRY_AFTER`."""
    if not value:
        return None
    value = value.strip()
    if value.isdigit():
        seconds = float(value)
    else:
        try:
            when = email.utils.parsedate_to_datetime(value)
        except (TypeError, ValueError):
            return None
        seconds = when.timestamp() - (time.time() if now is None else now)
    return min(max(seconds, 0.0), MAX_RETRY_AFTER)


def _lowered(headers: Any) -> dict[str, str]:
    return {str(k).lower(): str(v) for k, v in (headers.items() if headers is not None else ())}


def _dns_text(error: socket.gaierror) -> str:
    if error.errno == socket.EAI_AGAIN:
        return "lookup failed for now"
    return "name not resolved"
