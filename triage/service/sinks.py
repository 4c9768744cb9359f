"""Delivering group messages: rendering them for each sink, and sending them from the outbox.

Rendering. Templates are jinja2, bundled and overridable from a folder; they run in
`SandboxedEnvironment`, and alert data reaches them only as values (nothing ever
calls `from_string` on a label). Slack's control characters (`&`, `<`, `>`) are
escaped on every expression by `finalize`, so a template cannot forget it and a label
`<!channel>` cannot page a channel; only `link(url, text)` produces a raw link. Control
and bidi characters are shown as their escapes (`triage.core.escape.printable`, as on
the terminal) in Slack text and on the annotation page. A missing value renders `n/a`.
A template that fails (a sandbox violation, a bad expression, JSON that does not
parse) is counted and the bundled template used.

Delivery. One thread per sink sends its messages in order (a `resolved` never
overtakes the diagnosis it closes), each after claiming it in the store, so that of
several replicas on one PostgreSQL store one sends it. Each carries an
`Idempotency-Key` header that is fixed when the message is queued, so a receiver can
drop the repeats that at-least-once delivery implies (a replica that dies between the
send and its record). A failure is retried with exponential backoff and
jitter, and after `max_tries` the message is a dead letter, visible in the API and in
the metrics. A message the sink refuses as too large (HTTP 413, Slack's `msg_too_long`)
is shortened at once, fewer alerts listed and long values cut, with a note saying so in
the message itself, under the same key; one refused even at its shortest is a dead
letter saying why. Sink URLs are secrets (Slack's carry one): errors name the sink,
never the URL.
"""

from __future__ import annotations

import json
import logging
import random
import socket
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import jinja2
from jinja2.sandbox import SandboxedEnvironment
from markupsafe import Markup

from triage import __version__
from triage.core.escape import printable
from triage.service.config import SinkSettings
from triage.service.metrics import Metrics
from triage.service.store import OutboxRow, Store

_LOG = logging.getLogger("triage.service")

CLAIMED_ELSEWHERE_WAIT = 0.2
"""Seconds before a sink's thread looks again when another replica holds the oldest message."""

DEFAULT_TEMPLATES = {"webhook": "webhook.json.j2", "slack": "slack.txt.j2"}

TOO_LARGE_ERRORS = frozenset({"msg_too_long", "msg_blocks_too_long"})
"""Slack's error codes for a message over its size limits (an HTTP 413 says the same)."""

SHORT_VALUE_CHARS = 80
"""Label values and texts are cut to this in a shortened message."""


class NotAvailable(jinja2.ChainableUndefined):
    """A missing value renders `n/a`, never an empty string that reads as a real value."""

    def __str__(self) -> str:
        return "n/a"


class SlackLink(str):
    """A link built by `link()`: the only text that reaches Slack unescaped."""


def slack_escape(value: Any) -> str:
    """Slack's control characters as entities, and control characters made visible."""
    text = printable(str(value))
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def _slack_finalize(value: Any) -> Any:
    if isinstance(value, SlackLink):
        return value
    if value is None:
        return "n/a"
    if isinstance(value, jinja2.Undefined):
        return str(value)
    return slack_escape(value)


def _page_finalize(value: Any) -> Any:
    return printable(value) if isinstance(value, str) and not isinstance(value, Markup) else value


def _link(url: Any, text: Any) -> SlackLink:
    safe_url = slack_escape(url).replace("|", "%7C")
    return SlackLink(f"<{safe_url}|{slack_escape(text).replace('|', '¦')}>")


def _loader(folder: str | None) -> jinja2.BaseLoader:
    bundled = jinja2.PackageLoader("triage.service", "templates")
    if folder is None:
        return bundled
    return jinja2.ChoiceLoader([jinja2.FileSystemLoader(folder), bundled])


class Renderer:
    """Sink bodies and the annotation page, from bundled or user templates."""

    def __init__(self, folder: str | None = None, metrics: Metrics | None = None) -> None:
        self.metrics = metrics or Metrics()
        self._text = {
            "user": SandboxedEnvironment(
                loader=_loader(folder), undefined=NotAvailable, autoescape=False, finalize=_slack_finalize
            ),
            "bundled": SandboxedEnvironment(
                loader=_loader(None), undefined=NotAvailable, autoescape=False, finalize=_slack_finalize
            ),
        }
        self._json = {
            "user": SandboxedEnvironment(loader=_loader(folder), undefined=NotAvailable, autoescape=False),
            "bundled": SandboxedEnvironment(loader=_loader(None), undefined=NotAvailable, autoescape=False),
        }
        self._html = SandboxedEnvironment(
            loader=_loader(folder), undefined=NotAvailable, autoescape=True, finalize=_page_finalize
        )
        for env in (*self._text.values(), *self._json.values()):
            env.globals["link"] = _link

    def check(self, sinks: Mapping[str, SinkSettings]) -> list[str]:
        """Problems with the templates the sinks name (for the start-up check)."""
        problems = []
        for name, sink in sinks.items():
            template = sink.template or DEFAULT_TEMPLATES[sink.kind]
            envs = self._json if sink.kind == "webhook" else self._text
            try:
                envs["user"].get_template(template)
            except jinja2.TemplateError as exc:
                problems.append(f"sinks.{name}.template: {template}: {exc}")
        return problems

    def body(self, sink: SinkSettings, message: Mapping[str, Any]) -> bytes:
        """The HTTP body for one sink; falls back to the bundled template on any template error."""
        template = sink.template or DEFAULT_TEMPLATES[sink.kind]
        alerts = list(message.get("alerts", []))
        shown = alerts[: sink.max_alerts_listed]
        more = int(message.get("alert_count", len(alerts))) - len(shown)
        context = {"message": message, "alerts": shown, "more": more, "sink": sink.name}
        note = message.get("note")
        for which in ("user", "bundled"):
            try:
                return self._render(
                    sink.kind,
                    which,
                    template if which == "user" else DEFAULT_TEMPLATES[sink.kind],
                    context,
                    str(note) if note else None,
                )
            except (jinja2.TemplateError, ValueError, TypeError) as exc:
                self.metrics.inc("triage_template_errors_total", sink=sink.name)
                _LOG.warning(
                    "sink %s: template %s failed (%s: %s); using the bundled one",
                    sink.name,
                    template,
                    type(exc).__name__,
                    str(exc)[:200],
                )
        raise RuntimeError("the bundled template failed")  # pragma: no cover

    def _render(
        self, kind: str, which: str, template: str, context: Mapping[str, Any], note: str | None = None
    ) -> bytes:
        """The body; a `note` (the message was shortened) is added whatever the template says:
        a `note` key in a JSON object, a last line in Slack text."""
        if kind == "webhook":
            text = self._json[which].get_template(template).render(context)
            parsed = json.loads(text)
            if note and isinstance(parsed, dict):
                parsed.setdefault("note", note)
                return json.dumps(parsed, ensure_ascii=False).encode()
            return text.encode()
        text = self._text[which].get_template(template).render(context).strip()
        if note:
            text = f"{text}\n:warning: _{slack_escape(note)}_"
        return json.dumps({"text": text}, ensure_ascii=False).encode()

    def page(self, context: Mapping[str, Any]) -> str:
        return self._html.get_template("annotation.html.j2").render(context)


@dataclass(frozen=True)
class Attempt:
    """The outcome of one HTTP attempt; `reason` is a metric label (http_503, unreachable, error_body).

    `too_large`: the sink refused the message for its size (HTTP 413, or Slack's
    `msg_too_long` in a 4xx body or a 200 `{"ok": false}`); shortening it may pass.
    """

    ok: bool
    error: str = ""
    reason: str = ""
    too_large: bool = False


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


def post(url: str, body: bytes, key: str, timeout: float) -> Attempt:
    """POST once; never raises, never puts the URL in the error."""
    request = urllib.request.Request(
        url,
        data=body,
        method="POST",
        headers={
            "Content-Type": "application/json",
            "Idempotency-Key": key,
            "User-Agent": f"llm-triage/{__version__}",
        },
    )
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    try:
        with opener.open(request, timeout=timeout) as response:
            reply = response.read(65536)
            status = response.status
    except urllib.error.HTTPError as exc:
        code = _error_code(exc)
        too_large = exc.code == 413 or code in TOO_LARGE_ERRORS
        return Attempt(
            False,
            f"HTTP {exc.code}" + (f": {code}" if code in TOO_LARGE_ERRORS else ""),
            f"http_{exc.code}",
            too_large,
        )
    except (urllib.error.URLError, OSError, ValueError) as exc:
        reason = getattr(exc, "reason", exc)
        if isinstance(reason, socket.gaierror):
            # A name that does not resolve (yet): retried like a refused connection, said apart.
            return Attempt(False, f"unreachable (DNS: {_dns_text(reason)})", "unreachable")
        return Attempt(False, f"unreachable: {type(reason).__name__}", "unreachable")
    if not 200 <= status < 300:
        return Attempt(False, f"HTTP {status}", f"http_{status}")
    try:
        parsed = json.loads(reply) if reply.strip().startswith(b"{") else None
    except ValueError:
        parsed = None
    if isinstance(parsed, dict) and parsed.get("ok") is False:
        error = str(parsed.get("error", ""))[:100]
        return Attempt(
            False, f"HTTP {status} with an error body: {error}", "error_body", error in TOO_LARGE_ERRORS
        )
    return Attempt(True)


def _error_code(exc: urllib.error.HTTPError) -> str:
    """Slack's error code in a 4xx body (`msg_too_long`, as text or `{"error": ...}`), else ''."""
    try:
        raw = exc.read(4096)
    except (OSError, ValueError):
        return ""
    text = raw.decode("utf-8", "replace").strip()
    if text.startswith("{"):
        try:
            parsed = json.loads(text)
        except ValueError:
            return ""
        return str(parsed.get("error", "")) if isinstance(parsed, dict) else ""
    return text if text.replace("_", "").isalnum() and len(text) <= 64 else ""


def _dns_text(error: socket.gaierror) -> str:
    if error.errno == socket.EAI_AGAIN:
        return "lookup failed for now"
    return "name not resolved"


class Dispatcher:
    """One delivery thread per sink, reading the outbox."""

    def __init__(
        self,
        store: Store,
        sinks: Mapping[str, SinkSettings],
        urls: Mapping[str, str],
        renderer: Renderer,
        metrics: Metrics,
    ) -> None:
        self.store = store
        self.sinks = dict(sinks)
        self.urls = dict(urls)
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
        while not self._stop.is_set():
            try:
                rows = self.store.due_messages(name, time.time())
            except self.store.backend.unavailable as exc:
                _LOG.warning("sink %s: cannot read the outbox (%s)", name, type(exc).__name__)
                self._stop.wait(1.0)
                continue
            except Exception:
                _LOG.exception("sink %s: cannot read the outbox", name)
                self._stop.wait(1.0)
                continue
            if not rows:
                wake.wait(2.0)
                wake.clear()
                continue
            row = rows[0]
            wait = row.next_at - time.time()
            if wait > 0:
                wake.wait(min(wait, 2.0))
                wake.clear()
                continue
            try:
                claimed = self.store.claim_message(name, self.store.lease)
            except self.store.backend.unavailable as exc:
                _LOG.warning("sink %s: cannot claim a message (%s)", name, type(exc).__name__)
                self._stop.wait(1.0)
                continue
            if claimed is None:  # another replica is sending it, or sent it meanwhile
                self._stop.wait(CLAIMED_ELSEWHERE_WAIT)
                continue
            try:
                self.deliver(sink, claimed)
            except self.store.backend.unavailable as exc:
                # The outcome could not be recorded: the claim's lease runs out and the
                # message goes again, under the same Idempotency-Key.
                _LOG.warning("sink %s: cannot record a delivery (%s)", name, type(exc).__name__)
                self._stop.wait(1.0)
            except Exception:  # a defect: logged whole, and this sink's thread goes on
                _LOG.exception(
                    "sink %s: message %s failed; it goes again when its claim runs out", name, claimed.id
                )
                self._stop.wait(1.0)

    def deliver(self, sink: SinkSettings, row: OutboxRow) -> bool:
        body = self.renderer.body(sink, row.message)
        attempt = post(self.urls[sink.name], body, row.key, sink.timeout)
        if attempt.too_large:
            attempt = self._shorten(sink, row, attempt)
        if attempt.ok:
            self.store.delivered(row)
            self.metrics.inc("triage_sink_deliveries_total", sink=sink.name, outcome="delivered")
            return True
        self.metrics.inc("triage_sink_failures_total", sink=sink.name, reason=attempt.reason)
        tries = row.attempts + 1
        if attempt.too_large or tries >= sink.max_tries:
            if attempt.too_large:
                attempt = Attempt(
                    False, f"too large even when shortened ({attempt.error})", attempt.reason, True
                )
            self.store.failed(row, attempt.error, None)
            self.metrics.inc("triage_sink_deliveries_total", sink=sink.name, outcome="dead_letter")
            _LOG.warning(
                "sink %s: message %s is a dead letter after %d tries (%s)",
                sink.name,
                row.id,
                tries,
                attempt.error,
            )
            return False
        delay = min(sink.max_backoff, sink.backoff * 2 ** (tries - 1)) * random.uniform(0.5, 1.0)
        self.store.failed(row, attempt.error, time.time() + delay)
        _LOG.info("sink %s: attempt %d failed (%s); next in %.1fs", sink.name, tries, attempt.error, delay)
        return False

    def _shorten(self, sink: SinkSettings, row: OutboxRow, refused: Attempt) -> Attempt:
        """Send the message shorter and shorter, at once, until the sink takes it.

        The outcome of the last try: ok (counted in `triage_sink_shortened_total`), a
        failure of another kind (retried as usual), or still too large at its shortest.
        """
        message = row.message
        alerts = list(message.get("alerts", []))
        total = int(message.get("alert_count", len(alerts)))
        attempt = refused
        for shown in shortenings(min(len(alerts), sink.max_alerts_listed)):
            self.metrics.inc("triage_sink_failures_total", sink=sink.name, reason=attempt.reason)
            body = self.renderer.body(sink, shortened(message, shown, total))
            attempt = post(self.urls[sink.name], body, row.key, sink.timeout)
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


def read_template_folder(folder: str | None) -> str | None:
    """The folder, if it exists; ValueError naming it otherwise."""
    if folder is not None and not Path(folder).is_dir():
        raise ValueError(f"{folder} is not a folder")
    return folder
