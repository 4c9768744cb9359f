"""Sending the outbox: one thread per sink, retries, dead letters, shortening.

One thread per sink sends its messages, each after claiming it in the store, so that of
several replicas on one PostgreSQL store one sends it. Order is kept per group (a
`resolved` never overtakes the diagnosis it closes); a message that waits holds back
only its own group, and a sink that fails never holds back another sink. Each message
carries an idempotency key fixed when it was queued, so a receiver can drop the repeats
that at-least-once delivery implies (a replica that dies between the send and its
record).

What happens after a failed attempt is the attempt's to say (`triage.service.sinks.http`):
what can succeed later is retried with exponential backoff and jitter, or after the
sink's `Retry-After`, up to `max_tries` (and, for a note waiting for its incident,
within the kind's window); the rest is a dead letter at once, with the reason, visible
in the API and in the metrics. A message the sink refuses as too large (HTTP 413,
Slack's `msg_too_long`) is shortened at once, fewer alerts listed and long values cut,
with a note saying so in the message itself, under the same key; one refused even at
its shortest is a dead letter saying why. Errors name the sink, never its URL or token.
"""

from __future__ import annotations

import logging
import random
import threading
import time
from collections.abc import Mapping
from typing import Any

from triage.service.config import SinkSettings
from triage.service.metrics import Metrics
from triage.service.sinks.http import Attempt
from triage.service.sinks.kind import Delivery
from triage.service.sinks.registry import KINDS
from triage.service.sinks.render import Renderer
from triage.service.store import OutboxRow, Store

_LOG = logging.getLogger("triage.service")

CLAIMED_ELSEWHERE_WAIT = 0.2
"""Seconds before a sink's thread looks again when another replica holds the due message."""

IDLE_WAIT = 2.0
"""Seconds between looks at an outbox with nothing due (a local message wakes the thread at once)."""

SHORT_VALUE_CHARS = 80
"""Label values and texts are cut to this in a shortened message."""


def shortened(message: Mapping[str, Any], shown: int, total: int) -> dict[str, Any]:
    """The message with its first `shown` alerts and every text cut to `SHORT_VALUE_CHARS`,
    carrying a `note` that says so and where the rest is (Alertmanager's page of the
    group, else the first alert's annotation page)."""

    def cut(value: Any) -> Any:
        if isinstance(value, str) and len(value) > SHORT_VALUE_CHARS:
            return value[: SHORT_VALUE_CHARS - 1] + "…"
        if isinstance(value, dict):
            return {cut(k): cut(v) for k, v in value.items()}
        if isinstance(value, list):
            return [cut(v) for v in value]
        return value

    alerts = list(message.get("alerts", []))
    keep = ("url", "external_url")
    out = {k: (v if k in keep else cut(v)) for k, v in message.items() if k != "alerts"}
    out["alerts"] = [{k: (v if k in keep else cut(v)) for k, v in a.items()} for a in alerts[:shown]]
    where = message.get("external_url") or next((a.get("url") for a in alerts if a.get("url")), None)
    out["note"] = f"message shortened for this sink: {min(shown, len(alerts))} of {total} alerts shown" + (
        f"; full list at {where}" if where else ""
    )
    return out


def shortenings(listed: int) -> list[int]:
    """How many alerts each shortened try lists: all those listed (texts cut), then half, down to none."""
    counts = [listed]
    while counts[-1] > 0:
        counts.append(counts[-1] // 2)
    return counts


class Dispatcher:
    """One delivery thread per sink, reading the outbox."""

    def __init__(
        self,
        store: Store,
        sinks: Mapping[str, SinkSettings],
        urls: Mapping[str, str],
        renderer: Renderer,
        metrics: Metrics,
        tokens: Mapping[str, str] | None = None,
    ) -> None:
        self.store = store
        self.sinks = dict(sinks)
        self.urls = {name: sink.base_url(urls.get(name)) for name, sink in self.sinks.items()}
        self.tokens = dict(tokens or {})
        self.renderer = renderer
        self.metrics = metrics
        self._stop = threading.Event()
        self._wake = {name: threading.Event() for name in self.sinks}
        self._threads: list[threading.Thread] = []

    def start(self) -> None:
        for name in self.sinks:
            thread = threading.Thread(
                target=self._loop, args=(name,), name=f"triage-sink-{name}", daemon=True
            )
            thread.start()
            self._threads.append(thread)

    def wake(self) -> None:
        for event in self._wake.values():
            event.set()

    def stop(self, timeout: float = 15.0) -> None:
        self._stop.set()
        self.wake()
        deadline = time.monotonic() + timeout
        for thread in self._threads:
            thread.join(max(0.0, deadline - time.monotonic()))

    def _loop(self, name: str) -> None:
        sink = self.sinks[name]
        wake = self._wake[name]
        unavailable = self.store.backend.unavailable
        while not self._stop.is_set():
            try:
                due = self.store.next_message_at(name)
            except unavailable as exc:
                _LOG.warning("sink %s: cannot read the outbox (%s)", name, type(exc).__name__)
                self._stop.wait(1.0)
                continue
            except Exception:
                _LOG.exception("sink %s: cannot read the outbox", name)
                self._stop.wait(1.0)
                continue
            wait = IDLE_WAIT if due is None else due - time.time()
            if wait > 0:
                wake.wait(min(wait, IDLE_WAIT))
                wake.clear()
                continue
            try:
                claimed = self.store.claim_message(name, self.store.lease)
            except unavailable as exc:
                _LOG.warning("sink %s: cannot claim a message (%s)", name, type(exc).__name__)
                self._stop.wait(1.0)
                continue
            if claimed is None:  # another replica is sending it, or sent it meanwhile
                self._stop.wait(CLAIMED_ELSEWHERE_WAIT)
                continue
            try:
                self.deliver(sink, claimed)
            except unavailable as exc:
                # The outcome could not be recorded: the claim's lease runs out and the
                # message goes again, under the same idempotency key.
                _LOG.warning("sink %s: cannot record a delivery (%s)", name, type(exc).__name__)
                self._stop.wait(1.0)
            except Exception:  # a defect: logged whole, and this sink's thread goes on
                _LOG.exception(
                    "sink %s: message %s failed; it goes again when its claim runs out", name, claimed.id
                )
                self._stop.wait(1.0)

    def _attempt(self, sink: SinkSettings, row: OutboxRow, message: Mapping[str, Any]) -> Attempt:
        body = self.renderer.body(sink, message)
        delivery = Delivery(sink, self.urls[sink.name], self.tokens.get(sink.name), row.key, message, body)
        return KINDS[sink.kind].deliver(delivery)

    def deliver(self, sink: SinkSettings, row: OutboxRow) -> bool:
        attempt = self._attempt(sink, row, row.message)
        if attempt.too_large:
            attempt = self._shorten(sink, row, attempt)
        if attempt.ok:
            self.store.delivered(row)
            self.metrics.inc("triage_sink_deliveries_total", sink=sink.name, outcome="delivered")
            return True
        self.metrics.inc("triage_sink_failures_total", sink=sink.name, reason=attempt.reason)
        tries = row.attempts + 1
        now = time.time()
        error = attempt.error
        if attempt.too_large:
            error = f"too large even when shortened ({attempt.error})"
        elif attempt.retry and attempt.window is not None and now - row.created_at >= attempt.window:
            error = f"{attempt.error}; gave up after {attempt.window:g}s"
        elif attempt.retry and tries < sink.max_tries:
            self._retry_later(sink, row, attempt, tries, now)
            return False
        self.store.failed(row, error, None)
        self.metrics.inc("triage_sink_deliveries_total", sink=sink.name, outcome="dead_letter")
        _LOG.warning(
            "sink %s: message %s is a dead letter after %d tries (%s)", sink.name, row.id, tries, error
        )
        return False

    def _retry_later(
        self, sink: SinkSettings, row: OutboxRow, attempt: Attempt, tries: int, now: float
    ) -> None:
        """Record the failure with the time of the next try: the sink's `Retry-After` if it
        gave one, else exponential backoff with jitter; never past the kind's window."""
        delay = min(sink.max_backoff, sink.backoff * 2 ** (tries - 1)) * random.uniform(0.5, 1.0)
        if attempt.retry_after is not None:
            delay = attempt.retry_after
        if attempt.window is not None:
            delay = max(0.0, min(delay, row.created_at + attempt.window - now))
        self.store.failed(row, attempt.error, now + delay)
        _LOG.info("sink %s: attempt %d failed (%s); next in %.1fs", sink.name, tries, attempt.error, delay)

    def _shorten(self, sink: SinkSettings, row: OutboxRow, refused: Attempt) -> Attempt:
        """Send the message shorter and shorter, at once, until the sink takes it.

        The outcome of the last try: ok (counted in `triage_sink_shortened_total`), a
        failure of another kind (handled as usual), or still too large at its shortest.
        """
        message = row.message
        alerts = list(message.get("alerts", []))
        total = int(message.get("alert_count", len(alerts)))
        attempt = refused
        for shown in shortenings(min(len(alerts), sink.max_alerts_listed)):
            self.metrics.inc("triage_sink_failures_total", sink=sink.name, reason=attempt.reason)
            attempt = self._attempt(sink, row, shortened(message, shown, total))
            if attempt.ok:
                self.metrics.inc("triage_sink_shortened_total", sink=sink.name)
                _LOG.info(
                    "sink %s: message %s was too large (%s); sent with %d of %d alerts",
                    sink.name,
                    row.id,
                    refused.error,
                    shown,
                    total,
                )
                return attempt
            if not attempt.too_large:
                return attempt
        return attempt
