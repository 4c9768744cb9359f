"""The exporters' `/metrics` endpoints: one threaded HTTP server per target, on its own IP.

Each pod binds its own loopback address (127.x.y.z) on the exporter's real port, so the
scrape goes over real TCP to the address Kubernetes would have given the pod. A server
answers `GET /metrics` with its page and 404 otherwise. Stopping shuts all servers down
at once (each `shutdown` waits up to one poll interval), so a hundred targets stop in well
under a second.
"""

from __future__ import annotations

import errno
import socket
import threading
from collections.abc import Iterable, Mapping
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
POLL_INTERVAL = 0.2


class AddressInUse(OSError):
    """A target's address is taken (another cluster or program on the same loopback range)."""


def split(address: str) -> tuple[str, int]:
    host, port = address.rsplit(":", 1)
    return host, int(port)


def first_taken(addresses: Iterable[str]) -> str | None:
    """The first address that cannot be bound right now, or None when all are free."""
    for address in addresses:
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                sock.bind(split(address))
            except OSError:
                return address
    return None


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False
    allow_reuse_address = True
    page: bytes = b""

    def handle_error(self, request: object, client_address: object) -> None:
        """A scraper that hangs up mid-response is no news."""


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _Server

    def do_GET(self) -> None:
        if self.path.split("?", 1)[0] != "/metrics":
            self.send_error(404)
            return
        body = self.server.page
        self.send_response(200)
        self.send_header("Content-Type", CONTENT_TYPE)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:
        """Quiet: Prometheus scrapes every second."""


class ExpositionServers:
    """Serve `pages` ({"ip:port": exposition text}) until `stop`; a context manager."""

    def __init__(self, pages: Mapping[str, str]) -> None:
        self._pages = dict(pages)
        self._servers: dict[str, _Server] = {}
        self._threads: list[threading.Thread] = []

    @property
    def addresses(self) -> tuple[str, ...]:
        return tuple(self._servers)

    def start(self) -> None:
        """Bind every address; `AddressInUse` names the first taken one (nothing is left running)."""
        try:
            for address, text in self._pages.items():
                try:
                    server = _Server(split(address), _Handler)
                except OSError as exc:
                    if exc.errno == errno.EADDRINUSE:
                        raise AddressInUse(f"{address} is already in use") from exc
                    raise
                server.page = text.encode()
                self._servers[address] = server
                thread = threading.Thread(
                    target=server.serve_forever, args=(POLL_INTERVAL,), name=f"metrics {address}", daemon=True
                )
                thread.start()
                self._threads.append(thread)
        except BaseException:
            self.stop()
            raise

    def set_page(self, address: str, text: str) -> None:
        self._servers[address].page = text.encode()

    def stop(self) -> None:
        """Shut every server down in parallel, close its socket and join its thread. Idempotent."""
        servers, self._servers = list(self._servers.values()), {}
        stoppers = [threading.Thread(target=s.shutdown, daemon=True) for s in servers]
        for stopper in stoppers:
            stopper.start()
        for stopper in stoppers:
            stopper.join(timeout=5)
        for server in servers:
            server.server_close()
        threads, self._threads = self._threads, []
        for thread in threads:
            thread.join(timeout=5)

    def __enter__(self) -> ExpositionServers:
        self.start()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()
