"""The errors a Prometheus read raises: one family, split by what a caller can do about it.

Kept apart because every other part of the seam raises them and callers catch them
without needing the transport.
"""

from __future__ import annotations

from signals.errors import SignalError


class PrometheusError(SignalError):
    """A Prometheus read failed. `kind` says how, for callers that branch on it.

    Kinds: `timeout`, `unreachable`, `tls`, `auth`, `http_<code>`, `not_json`,
    `malformed`, `request`, `bug` (ours), or Prometheus's own errorType (`bad_data`, `execution`,
    `timeout`, `canceled`, `internal`, `unavailable`, …).
    """

    def __init__(self, message: str, *, kind: str) -> None:
        super().__init__(message)
        self.kind = kind


class PrometheusUnavailable(PrometheusError):
    """Prometheus could not be reached or did not answer in time (worth trying again later)."""


class PrometheusRejected(PrometheusError):
    """Prometheus (or a proxy in front of it) refused the request: auth, 4xx, query errors."""


class PrometheusBadReply(PrometheusError):
    """Something answered, but not like a Prometheus HTTP API (HTML page, broken JSON)."""
