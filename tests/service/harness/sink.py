"""A recording HTTP receiver on loopback: stands in for Slack, a JSON webhook, or the service itself.

The webhook service delivers to sinks and Alertmanager delivers to the service; both
sides need a receiver whose every request can be inspected and whose health can be
switched at will. `RecordingSink` is a real threaded HTTP server on 127.0.0.1 that
records each request (method, path, headers, raw body, parsed JSON) and answers with
a configurable reply. It can

- fail with a status (503 by default, optionally with `Retry-After`), for the next N
  requests or until `recover()`, because 5xx is what makes Alertmanager and the
  service's delivery loop retry;
- stall each request (released at once by `stop()`), to exercise client timeouts;
- `stop()` and `restart()` on the same port, so a client sees *connection refused*
  during the outage and the same URL working afterwards, which is what a real
  receiver outage looks like (a 503 proves only that the process is up).

Every response carries `Connection: close`, so no keep-alive connection survives a
`stop()` and keeps being served by a handler thread of the old server.

Tests wait with `wait_for`, which blocks on a `threading.Condition` notified on each
request, never on a fixed sleep: a passing test takes as long as the system needs
and a failing one fails at its timeout with what was received.
"""

from __future__ import annotations

import errno
import json
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any


@dataclass(frozen=True)
class Received:
    """One request as the sink received it, and the status it was answered with.

    `json` is the parsed body, or None when the body is empty or not JSON.
    `headers` keeps the names as sent; use `header()` for a case-insensitive lookup.
    `at` is `time.monotonic()` on arrival, for measuring intervals between deliveries.
    """

    method: str
    path: str
    headers: dict[str, str]
    body: bytes
    json: Any
    status: int
    at: float

    def header(self, name: str) -> str | None:
        lowered = name.lower()
        for key, value in self.headers.items():
            if key.lower() == lowered:
                return value
        return None


@dataclass(frozen=True)
class _Reply:
    status: int = 200
    body: bytes = b'{"status":"ok"}'
    headers: tuple[tuple[str, str], ...] = (("Content-Type", "application/json"),)
    stall: float = 0.0


@dataclass
class _Mode:
    """The reply given now; `failing` replies `remaining` more times (None: until recovered)."""

    healthy: _Reply = field(default_factory=_Reply)
    failing: _Reply | None = None
    remaining: int | None = None


Predicate = Callable[[list[Received]], bool]


class RecordingSink:
    """A threaded HTTP server on 127.0.0.1 that records every request; a context manager.

    `port=0` picks a free port; `restart()` reuses whichever port was chosen.
    `max_body` bounds what is kept of one request, so a runaway client cannot
    exhaust the test process's memory: a larger body is read and thrown away (so the
    client sees the answer, not a reset) and answered `too_large`, 413 by default;
    Slack answers `(400, b"msg_too_long")`.
    """

    def __init__(
        self,
        port: int = 0,
        *,
        max_body: int = 64 * 1024 * 1024,
        too_large: tuple[int, bytes] = (413, b'{"error":"too large"}'),
    ) -> None:
        self._too_large = too_large
        self._cond = threading.Condition()
        self._received: list[Received] = []
        self._mode = _Mode()
        self._release = threading.Event()
        self._max_body = max_body
        self._port = port
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None

    # -- lifecycle -------------------------------------------------------------------

    def __enter__(self) -> RecordingSink:
        self.start()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()

    def start(self) -> None:
        """Listen (again) on the sink's port; after a `stop()` this is the same port."""
        if self._server is not None:
            return
        self._release.clear()
        self._server = _bind(self._port)
        self._server.sink = self
        self._port = self._server.server_address[1]
        self._thread = threading.Thread(
            target=self._server.serve_forever, args=(0.05,), name=f"sink:{self._port}", daemon=True
        )
        self._thread.start()

    def stop(self) -> None:
        """Close the listening socket: new connections are refused until `restart()`.

        Stalled handlers are released first, so a stalled request never holds the
        test suite; they answer nothing and close their connection.
        """
        server, thread = self._server, self._thread
        if server is None:
            return
        self._release.set()
        server.shutdown()
        server.server_close()
        if thread is not None:
            thread.join(timeout=5)
        self._server = None
        self._thread = None

    def restart(self) -> None:
        """`stop()` if running, then listen again on the same port (the URL stays valid)."""
        self.stop()
        self.start()

    @property
    def running(self) -> bool:
        return self._server is not None

    @property
    def port(self) -> int:
        return self._port

    @property
    def url(self) -> str:
        """`http://127.0.0.1:PORT`; append the path the client should post to, if any."""
        return f"http://127.0.0.1:{self._port}"

    # -- behaviour -------------------------------------------------------------------

    def reply_with(
        self,
        status: int = 200,
        body: bytes | str = b'{"status":"ok"}',
        headers: Mapping[str, str] | None = None,
    ) -> None:
        """Set the healthy reply (Slack answers `ok` as text/plain, for instance)."""
        raw = body.encode() if isinstance(body, str) else body
        hdrs = tuple((headers or {"Content-Type": "application/json"}).items())
        with self._cond:
            self._mode.healthy = _Reply(status, raw, hdrs)

    def fail_with(
        self,
        status: int = 503,
        *,
        retry_after: str | None = None,
        times: int | None = None,
        body: bytes | str = b'{"status":"error","error":"unavailable"}',
    ) -> None:
        """Answer `status` (and `Retry-After` if given) to the next `times` requests, or until `recover()`."""
        raw = body.encode() if isinstance(body, str) else body
        headers: tuple[tuple[str, str], ...] = (("Content-Type", "application/json"),)
        if retry_after is not None:
            headers += (("Retry-After", retry_after),)
        with self._cond:
            self._mode.failing = _Reply(status, raw, headers)
            self._mode.remaining = times

    def stall(self, seconds: float, *, times: int | None = None) -> None:
        """Hold each request for `seconds` before answering the healthy reply (or until `stop()`)."""
        with self._cond:
            healthy = self._mode.healthy
            self._mode.failing = _Reply(healthy.status, healthy.body, healthy.headers, stall=seconds)
            self._mode.remaining = times

    def recover(self) -> None:
        """Back to the healthy reply."""
        with self._cond:
            self._mode.failing = None
            self._mode.remaining = None

    # -- what was received -----------------------------------------------------------

    @property
    def received(self) -> list[Received]:
        """A copy of everything received so far, in arrival order (failed requests included)."""
        with self._cond:
            return list(self._received)

    def accepted(self) -> list[Received]:
        """The requests answered with a 2xx: what a client would count as delivered."""
        return [r for r in self.received if 200 <= r.status < 300]

    def clear(self) -> None:
        with self._cond:
            self._received.clear()

    def wait_for(self, what: int | Predicate, timeout: float = 10.0) -> bool:
        """Block until `what` holds, or `timeout` seconds pass; True if it holds.

        `what` is a number of requests received (any status), or a predicate over the
        list of `Received` so far. Woken on every request, so it returns as soon as
        the condition is met. Returns False on timeout instead of raising, because
        "no second delivery within T" is itself a result some tests assert.
        """
        predicate: Predicate = (lambda got: len(got) >= what) if isinstance(what, int) else what
        deadline = time.monotonic() + timeout
        with self._cond:
            while True:
                if predicate(list(self._received)):
                    return True
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return False
                self._cond.wait(remaining)

    # -- server side -----------------------------------------------------------------

    def _next_reply(self) -> _Reply:
        with self._cond:
            mode = self._mode
            if mode.failing is None:
                return mode.healthy
            reply = mode.failing
            if mode.remaining is not None:
                mode.remaining -= 1
                if mode.remaining <= 0:
                    mode.failing = None
                    mode.remaining = None
            return reply

    def _record(self, item: Received) -> None:
        with self._cond:
            self._received.append(item)
            self._cond.notify_all()

    def _handle(self, handler: BaseHTTPRequestHandler) -> None:
        arrived = time.monotonic()
        handler.close_connection = True
        length = int(handler.headers.get("Content-Length") or 0)
        headers = dict(handler.headers.items())
        if length > self._max_body:
            left = length
            while left > 0:
                chunk = handler.rfile.read(min(left, 65536))
                if not chunk:
                    break
                left -= len(chunk)
            status, text = self._too_large
            self._record(Received(handler.command, handler.path, headers, b"", None, status, arrived))
            _send(handler, _Reply(status, text))
            return
        body = handler.rfile.read(length) if length else b""
        reply = self._next_reply()
        parsed: Any = None
        if body:
            try:
                parsed = json.loads(body)
            except ValueError:
                parsed = None
        self._record(Received(handler.command, handler.path, headers, body, parsed, reply.status, arrived))
        if reply.stall and self._release.wait(reply.stall):
            return
        _send(handler, reply)


def _send(handler: BaseHTTPRequestHandler, reply: _Reply) -> None:
    try:
        handler.send_response(reply.status)
        for name, value in reply.headers:
            handler.send_header(name, value)
        handler.send_header("Content-Length", str(len(reply.body)))
        handler.send_header("Connection", "close")
        handler.end_headers()
        handler.wfile.write(reply.body)
    except (BrokenPipeError, ConnectionResetError):
        pass


def _bind(port: int) -> _Server:
    """Bind 127.0.0.1:port, retrying briefly when a just-closed socket still holds it."""
    deadline = time.monotonic() + 5.0
    while True:
        try:
            server = _Server(("127.0.0.1", port), _Handler)
        except OSError as exc:
            if exc.errno != errno.EADDRINUSE or port == 0 or time.monotonic() > deadline:
                raise
            time.sleep(0.05)
            continue
        server.daemon_threads = True
        server.block_on_close = False
        return server


class _Server(ThreadingHTTPServer):
    allow_reuse_address = True
    # socketserver's default backlog of 5 overflows under a few dozen concurrent
    # clients, and the kernel then drops SYNs that are retried 1s later: a latency
    # artefact of the sink, not of the client under test.
    request_queue_size = 128
    sink: RecordingSink

    def handle_error(self, request: object, client_address: object) -> None:
        """Clients hanging up mid-request are expected in fault tests, not news."""


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _Server

    def do_POST(self) -> None:
        self.server.sink._handle(self)

    def do_PUT(self) -> None:
        self.server.sink._handle(self)

    def do_GET(self) -> None:
        self.server.sink._handle(self)

    def log_message(self, format: str, *args: object) -> None:
        """Quiet: tests assert on `received`, not on stderr."""
