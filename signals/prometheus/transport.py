"""The transport: a Session bound by the round's deadline, and every failure mapped to one line.

HTTP statuses, connection, TLS and timeout errors become a classified `_Failure`
(kind, family, transient or not, Retry-After) here, in one place, so the round only
decides whether to try again. URLs are redacted before they reach any message.
"""

from __future__ import annotations

import email.utils
import re
import socket
import ssl
import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import orjson
import requests
import urllib3.exceptions

from signals.prometheus.errors import (
    PrometheusBadReply,
    PrometheusError,
    PrometheusRejected,
    PrometheusUnavailable,
)

TRANSIENT_STATUS = frozenset({502, 503, 504})
_MESSAGE_MAX = 300


class _Failure(Exception):
    """One failed attempt, classified; becomes a `PrometheusError` or `QueryResult.error`."""

    def __init__(
        self,
        message: str,
        *,
        kind: str,
        family: type[PrometheusError],
        transient: bool = False,
        retry_after: float | None = None,
    ) -> None:
        super().__init__(_one_line(message))
        self.message = _one_line(message)
        self.kind = kind
        self.family = family
        self.transient = transient
        self.retry_after = retry_after

    def noted(self, note: str) -> _Failure:
        return _Failure(f"{self.message} ({note})", kind=self.kind, family=self.family)

    def as_error(self) -> PrometheusError:
        return self.family(self.message, kind=self.kind)


class _Tally:
    """Attempts made for one job; read by the round even if the job is still running."""

    def __init__(self) -> None:
        self.sent = 0


class _DeadlineSession(requests.Session):
    """A Session that bounds every send by the calling thread's deadline, counts and captures it.

    `PrometheusConnect` passes its own `timeout` (None by default) to every call, and
    some of its methods take no timeout at all; overriding `send` is the one place
    where every request, redirects included, goes through.

    `forced_verify` is an explicit CA bundle (or False): requests lets the
    `REQUESTS_CA_BUNDLE`/`CURL_CA_BUNDLE` environment override `Session.verify`
    (psf/requests#3829), which would silently ignore the bundle the user configured.
    """

    def __init__(self, default_timeout: float) -> None:
        super().__init__()
        self.forced_verify: str | bool | None = None
        self._default_timeout = default_timeout
        self._local = threading.local()
        self._lock = threading.Lock()
        self.total_sent = 0

    def bind(self, deadline: float, tally: _Tally) -> None:
        self._local.deadline = deadline
        self._local.tally = tally
        self._local.response = None

    def remaining(self) -> float:
        deadline: float | None = getattr(self._local, "deadline", None)
        if deadline is None:
            return self._default_timeout
        return deadline - time.monotonic()

    def forget_response(self) -> None:
        self._local.response = None

    def captured(self) -> requests.Response | None:
        response: requests.Response | None = getattr(self._local, "response", None)
        return response

    def send(self, request: requests.PreparedRequest, **kwargs: Any) -> requests.Response:
        remaining = self.remaining()
        if remaining <= 0:
            raise requests.Timeout("deadline reached before sending")
        kwargs["timeout"] = remaining
        if self.forced_verify is not None:
            kwargs["verify"] = self.forced_verify
        with self._lock:
            self.total_sent += 1
        tally: _Tally | None = getattr(self._local, "tally", None)
        if tally is not None:
            tally.sent += 1
        response = super().send(request, **kwargs)
        self._local.response = response
        return response


def _whole(response: requests.Response) -> object:
    # orjson: a diagnosis' replies are megabytes of [time, "value"] pairs, parsed about
    # three times faster than by the standard library (its errors are ValueErrors).
    return orjson.loads(response.content)


def _envelope(
    response: requests.Response, load: Callable[[requests.Response], object] = _whole
) -> dict[str, Any]:
    """The Prometheus JSON envelope of a response, or the `_Failure` that describes it.

    `load` reads and parses the body (`streamed.read_reply` for query replies, which bounds
    the memory of a huge one); its errors are ValueErrors, a `_Failure` for a malformed
    sample, or the `requests` errors of a body cut off while it streamed.
    """
    where = _redact(response.url)
    body: object
    try:
        body = load(response)
    except (ValueError, RecursionError):
        body = None
    error_type, error_text = _error_fields(body)
    status = response.status_code
    if status != 200:
        detail = f": {error_type}: {error_text}" if error_type else ""
        if status in (401, 403):
            raise _Failure(
                f"HTTP {status} from {where}: not authorised (check the token or credentials)",
                kind="auth",
                family=PrometheusRejected,
            )
        if 400 <= status < 500 and error_type:
            raise _Failure(f"{error_type}: {error_text}", kind=error_type, family=PrometheusRejected)
        transient = status in TRANSIENT_STATUS and error_type != "timeout"
        raise _Failure(
            f"HTTP {status} from {where}{detail}",
            kind=error_type or f"http_{status}",
            family=PrometheusUnavailable if status >= 500 else PrometheusRejected,
            transient=transient,
            retry_after=_retry_after(response.headers.get("Retry-After")) if transient else None,
        )
    if body is None:
        content_type = response.headers.get("Content-Type", "").split(";")[0].strip() or "no content type"
        raise _Failure(f"not JSON ({content_type}) from {where}", kind="not_json", family=PrometheusBadReply)
    if not isinstance(body, dict) or body.get("status") not in ("success", "error"):
        raise _Failure(
            f"unexpected reply (no Prometheus status) from {where}",
            kind="malformed",
            family=PrometheusBadReply,
        )
    if body["status"] == "error":
        kind = error_type or "error"
        raise _Failure(f"{kind}: {error_text}", kind=kind, family=PrometheusRejected)
    return body


_ECHOED_QUERY = re.compile(r'"(?:[^"\\]|\\.){40,}"')
"""A quoted string of 40 characters or more in an error text: the query, echoed back."""


def _error_fields(body: object) -> tuple[str, str]:
    """errorType and error of an error reply, the echoed query cut out of the text.

    VictoriaMetrics quotes the whole query (sometimes twice) before the reason, which a
    one-line message of 300 characters would otherwise never reach.
    """
    if isinstance(body, dict) and body.get("status") == "error":
        text = _ECHOED_QUERY.sub('"…"', str(body.get("error") or ""))
        return str(body.get("errorType") or "error"), text
    return "", ""


def _retry_after(value: str | None) -> float | None:
    """Seconds from a `Retry-After` header (delta-seconds or HTTP-date); None if absent or bad."""
    if not value:
        return None
    value = value.strip()
    if value.isdigit():
        return float(value)
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return max(0.0, (when - datetime.now(UTC)).total_seconds())


def _is_read_timeout(exc: requests.ConnectionError) -> bool:
    """requests wraps a read timeout *during the body* in ConnectionError; it is still a timeout."""
    cause: object = exc.args[0] if exc.args else None
    reason = getattr(cause, "reason", cause)
    return isinstance(cause, urllib3.exceptions.ReadTimeoutError) or isinstance(
        reason, urllib3.exceptions.ReadTimeoutError
    )


def _tls_reason(exc: requests.exceptions.SSLError) -> str:
    """The certificate problem itself, not urllib3's wrapper text with the whole query URL.

    requests → MaxRetryError.reason → urllib3 SSLError → ssl.SSLError: walk down to it.
    """
    node: object = exc
    for _ in range(6):
        if isinstance(node, ssl.SSLCertVerificationError):
            return f"certificate verify failed: {node.verify_message}"
        if isinstance(node, ssl.SSLError):
            return str(node.reason or node.strerror or "handshake failed")
        reason = getattr(node, "reason", None)
        args = getattr(node, "args", ())
        node = reason if isinstance(reason, BaseException) else (args[0] if args else None)
    return "handshake failed"


def _connection_reason(exc: requests.RequestException) -> str:
    cause: object = exc.args[0] if exc.args else None
    reason = getattr(cause, "reason", cause)
    text = str(reason)
    if isinstance(reason, urllib3.exceptions.NameResolutionError) or _gaierror(exc) is not None:
        return _dns_reason(_gaierror(exc))
    if "Connection refused" in text:
        return "connection refused"
    if isinstance(reason, urllib3.exceptions.ProtocolError) or "Connection aborted" in text:
        return "connection closed by the server"
    if isinstance(reason, urllib3.exceptions.NewConnectionError):
        return "cannot connect"
    return _short(exc)


def _gaierror(exc: BaseException) -> socket.gaierror | None:
    """The resolver's own error under requests' and urllib3's wrappers, if that is the cause."""
    node: object = exc
    for _ in range(6):
        if isinstance(node, socket.gaierror):
            return node
        if not isinstance(node, BaseException):
            return None
        reason = getattr(node, "reason", None)
        node = reason if isinstance(reason, BaseException) else (node.__cause__ or node.__context__)
    return None


def _dns_reason(error: socket.gaierror | None) -> str:
    """A failed name lookup, told apart from a refused connection: the name does not exist,
    or the resolver could not answer (worth trying again)."""
    code = error.errno if error is not None else None
    if code in (socket.EAI_NONAME, getattr(socket, "EAI_NODATA", socket.EAI_NONAME)):
        return "DNS: name not resolved"
    if code == socket.EAI_AGAIN:
        return "DNS: lookup failed for now (temporary failure in name resolution)"
    return f"DNS: {error.strerror}" if error is not None and error.strerror else "DNS: name not resolved"


def _short(exc: BaseException) -> str:
    text = re.sub(r"\s+", " ", str(exc)).strip() or type(exc).__name__
    return text if len(text) <= 160 else text[:157] + "..."


def _one_line(text: str) -> str:
    text = re.sub(r"[\x00-\x1f\x7f]+", " ", text)
    text = re.sub(r"\s+", " ", text).strip()
    return text if len(text) <= _MESSAGE_MAX else text[: _MESSAGE_MAX - 3] + "..."


def _redact(url: str) -> str:
    """`scheme://host[:port]/path`: no user info (a password), no query (long, maybe secret)."""
    try:
        parts = urlsplit(url)
        host = parts.hostname or ""
        if ":" in host:
            host = f"[{host}]"
        netloc = f"{host}:{parts.port}" if parts.port else host
    except ValueError:
        return "<unparseable URL>"
    return urlunsplit((parts.scheme, netloc, parts.path, "", ""))


def _num(value: float) -> str:
    """A number for a query parameter, to the millisecond, without float noise."""
    text = f"{value:.3f}".rstrip("0").rstrip(".")
    return text if text not in ("", "-0") else "0"
