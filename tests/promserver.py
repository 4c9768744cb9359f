"""A tiny stand-in for a Prometheus HTTP API, for fault tests, and the binaries guard.

A real Prometheus cannot be made to answer 503 with `Retry-After`, stall, serve an auth
proxy's HTML page or hang up mid-request, so `PromStandIn` does it on 127.0.0.1:0. It
plays a script of `Reply`s (the last one repeats), optionally per PromQL query, counts
the requests (and the most in flight at once) and records their headers, and can
forward to a real server to give a canned success. Stalls wait on an event that
`stop()` sets, so a stalled handler never holds the test suite.
"""

from __future__ import annotations

import json
import os
import shutil
import ssl
import threading
import urllib.error
import urllib.request
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from urllib.parse import parse_qs, urlsplit

import pytest

JSON = (("Content-Type", "application/json"),)


def require_prometheus_binaries() -> None:
    """Skip loudly without `prometheus`/`promtool`; under CI=true fail, since CI must run them."""
    missing = [name for name in ("prometheus", "promtool") if shutil.which(name) is None]
    if not missing:
        return
    reason = (
        f"!!! {' and '.join(missing)} not on PATH: real-Prometheus tests NOT RUN "
        "(install the Debian package `prometheus`) !!!"
    )
    if os.environ.get("CI") == "true":
        pytest.fail(reason)
    pytest.skip(reason)


@dataclass(frozen=True)
class Reply:
    """What the stand-in does with one request."""

    status: int = 200
    body: bytes = b""
    headers: tuple[tuple[str, str], ...] = JSON
    stall: float = 0.0
    hang_up: bool = False
    proxy_to: str | None = None
    cut_after: int | None = None
    """Send this many bytes of the body, announced whole, then close the connection."""

    @staticmethod
    def success(
        result: object = None,
        result_type: str = "matrix",
        warnings: Sequence[str] | None = None,
        infos: Sequence[str] | None = None,
    ) -> Reply:
        envelope: dict[str, object] = {
            "status": "success",
            "data": {"resultType": result_type, "result": [] if result is None else result},
        }
        if warnings is not None:
            envelope["warnings"] = list(warnings)
        if infos is not None:
            envelope["infos"] = list(infos)
        return Reply(body=json.dumps(envelope).encode())

    @staticmethod
    def names(names: Sequence[str]) -> Reply:
        return Reply(body=json.dumps({"status": "success", "data": list(names)}).encode())

    @staticmethod
    def error(error_type: str, message: str, status: int) -> Reply:
        body = {"status": "error", "errorType": error_type, "error": message}
        return Reply(status=status, body=json.dumps(body).encode())

    @staticmethod
    def unavailable(retry_after: str | None = None) -> Reply:
        headers = JSON + ((("Retry-After", retry_after),) if retry_after is not None else ())
        body = {"status": "error", "errorType": "unavailable", "error": "overloaded"}
        return Reply(status=503, body=json.dumps(body).encode(), headers=headers)

    @staticmethod
    def html(status: int = 200) -> Reply:
        page = b"<!doctype html><html><body><form action=/login>Sign in</form></body></html>"
        return Reply(status=status, body=page, headers=(("Content-Type", "text/html; charset=utf-8"),))

    @staticmethod
    def stalled(seconds: float, then: Reply | None = None) -> Reply:
        after = then or Reply.success()
        return Reply(after.status, after.body, after.headers, stall=seconds)

    @staticmethod
    def closed() -> Reply:
        return Reply(hang_up=True)

    @staticmethod
    def cut(after: Reply, size: int) -> Reply:
        """`after`, its body cut off after `size` bytes (the server dies mid-reply)."""
        return Reply(after.status, after.body, after.headers, cut_after=size)

    @staticmethod
    def proxied(url: str) -> Reply:
        return Reply(proxy_to=url.rstrip("/"))


@dataclass(frozen=True)
class Seen:
    """One request as the stand-in received it."""

    method: str
    path: str
    params: dict[str, list[str]]
    headers: dict[str, str] = field(default_factory=dict)


class PromStandIn:
    """A threaded HTTP server on 127.0.0.1:0 playing `Reply` scripts; use as a context manager.

    `script` is used for every request whose `query` parameter has no entry in
    `by_query`; each script plays in order and its last reply repeats. With `tls`
    (certificate file, key file) it speaks HTTPS; the handshake happens in the handler
    thread, so a client that rejects the certificate never blocks the accept loop.
    """

    def __init__(
        self,
        *script: Reply,
        by_query: Mapping[str, Sequence[Reply]] | None = None,
        tls: tuple[str, str] | None = None,
    ) -> None:
        self._lock = threading.Lock()
        self._release = threading.Event()
        self._scripts: dict[str | None, list[Reply]] = {None: list(script) or [Reply.success()]}
        for query, replies in (by_query or {}).items():
            self._scripts[query] = list(replies)
        self.seen: list[Seen] = []
        self.in_flight = 0
        self.max_in_flight = 0
        self._server = _QuietServer(("127.0.0.1", 0), _Handler)
        self._scheme = "http"
        if tls is not None:
            context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            context.load_cert_chain(*tls)
            self._server.socket = context.wrap_socket(
                self._server.socket, server_side=True, do_handshake_on_connect=False
            )
            self._scheme = "https"
        self._server.daemon_threads = True
        self._server.block_on_close = False
        self._server.stand_in = self  # type: ignore[attr-defined]
        self._thread = threading.Thread(target=self._server.serve_forever, args=(0.05,), daemon=True)

    @property
    def url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"{self._scheme}://{host!s}:{port}"

    @property
    def requests(self) -> int:
        with self._lock:
            return len(self.seen)

    def play(self, *script: Reply) -> None:
        """Replace the default script (per-query scripts stay)."""
        with self._lock:
            self._scripts[None] = list(script)

    def __enter__(self) -> PromStandIn:
        self._thread.start()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()

    def stop(self) -> None:
        self._release.set()
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)

    def _next(self, seen: Seen) -> Reply:
        queries = seen.params.get("query")
        query = queries[0] if queries else None
        with self._lock:
            self.seen.append(seen)
            script = self._scripts.get(query) or self._scripts[None]
            return script.pop(0) if len(script) > 1 else script[0]

    def _answer(self, handler: BaseHTTPRequestHandler) -> None:
        with self._lock:
            self.in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self.in_flight)
        try:
            self._reply(handler)
        finally:
            with self._lock:
                self.in_flight -= 1

    def _reply(self, handler: BaseHTTPRequestHandler) -> None:
        parts = urlsplit(handler.path)
        params = parse_qs(parts.query)
        length = int(handler.headers.get("Content-Length") or 0)
        if length:
            params.update(parse_qs(handler.rfile.read(length).decode()))
        reply = self._next(Seen(handler.command, parts.path, params, dict(handler.headers.items())))
        if reply.stall and self._release.wait(reply.stall):
            handler.close_connection = True
            return
        if reply.hang_up:
            handler.close_connection = True
            return
        status, headers, body = reply.status, reply.headers, reply.body
        if reply.proxy_to is not None:
            status, headers, body = _forward(reply.proxy_to + handler.path)
        handler.send_response(status)
        for name, value in headers:
            handler.send_header(name, value)
        handler.send_header("Content-Length", str(len(body)))
        handler.end_headers()
        if reply.cut_after is not None:
            handler.wfile.write(body[: reply.cut_after])
            handler.close_connection = True
            return
        handler.wfile.write(body)


_NO_PROXY = urllib.request.build_opener(urllib.request.ProxyHandler({}))


def _forward(url: str) -> tuple[int, tuple[tuple[str, str], ...], bytes]:
    try:
        with _NO_PROXY.open(url, timeout=10) as response:
            return response.status, JSON, response.read()
    except urllib.error.HTTPError as exc:
        return exc.code, JSON, exc.read()


class _QuietServer(ThreadingHTTPServer):
    def handle_error(self, request: object, client_address: object) -> None:
        """Failed TLS handshakes and clients that hung up are expected here, not news."""


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def do_GET(self) -> None:
        self.server.stand_in._answer(self)  # type: ignore[attr-defined]

    def do_POST(self) -> None:
        self.server.stand_in._answer(self)  # type: ignore[attr-defined]

    def log_message(self, format: str, *args: object) -> None:
        """Quiet: the tests assert on `seen`, not on stderr."""
