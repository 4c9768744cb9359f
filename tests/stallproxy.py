"""A TCP forwarder that can go silent: the network faults a real server cannot make.

A PostgreSQL that is down refuses connections, which the store's tests get from
`TemporaryPostgres.stop`. What they cannot get from the server is the worse fault of a
network that stalls: a peer that neither answers nor hangs up, so a client blocks until
its own timeouts fire. `StallProxy` sits between the client and the server on a
loopback port and can:

- `stall()`: stop moving bytes, both ways, on every open connection and on those accepted
  during the stall, keeping every socket open (no FIN, no RST: a silent peer). Bytes that
  arrive meanwhile wait in the proxy's buffers and the kernel's;
- `resume()`: move them again, delivering what waited;
- `cut()`: reset every current connection (RST to both ends), as a dropped NAT entry or a
  restarted load balancer does.

Given several servers (`balancer`), it spreads connections over them in turn and passes
over one that refuses, as a Kubernetes Service spreads them over the ready replicas: the
HA tests put one in front of the `triage serve` replicas.

One thread runs a `selectors` loop over every socket; the public methods hand it a
command and wait until it has been applied, so when `stall()` returns no further byte
passes. `close()` resets what is open, stops the thread and joins it.
"""

from __future__ import annotations

import collections
import contextlib
import logging
import selectors
import socket
import struct
import threading
from collections.abc import Callable, Sequence
from types import TracebackType
from typing import Self
from urllib.parse import urlsplit, urlunsplit

_LOG = logging.getLogger(__name__)
_CHUNK = 65536
_BUFFER_LIMIT = 1 << 20
"""Bytes held for a slow receiver before the proxy stops reading from its peer (back-pressure)."""
_LISTENER = "listener"
_WAKE = "wake"


class _Pair:
    """One proxied connection: the client's socket, the upstream one, the bytes waiting to be
    written to each, and which of them has sent its FIN."""

    def __init__(self, client: socket.socket, upstream: socket.socket) -> None:
        self.client = client
        self.upstream = upstream
        self.pending: dict[socket.socket, bytearray] = {client: bytearray(), upstream: bytearray()}
        self.eof: set[socket.socket] = set()
        self.closed = False

    def other(self, sock: socket.socket) -> socket.socket:
        return self.upstream if sock is self.client else self.client

    def done(self) -> bool:
        """Both ends have hung up and everything they sent was delivered."""
        return len(self.eof) == 2 and not any(self.pending.values())


def _abort(sock: socket.socket) -> None:
    """Close with SO_LINGER 0, so the peer gets an RST rather than an orderly FIN."""
    with contextlib.suppress(OSError):
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    sock.close()


class StallProxy:
    """Forward 127.0.0.1:`port` to `(host, port)` of the server, with `stall`, `resume` and `cut`.

    `connect_timeout` bounds the upstream connect made for each accepted client (in the loop
    thread; a refused loopback connect is immediate, and the client is then closed, as a
    down server would do).
    """

    def __init__(
        self, host: str, port: int, *, connect_timeout: float = 5.0, more: Sequence[tuple[str, int]] = ()
    ) -> None:
        self._targets = [(host, port), *more]
        self._turn = 0
        self._connect_timeout = connect_timeout
        self._selector = selectors.DefaultSelector()
        self._listener = socket.create_server(("127.0.0.1", 0))
        self._listener.setblocking(False)
        self._wake_reader, self._wake_writer = socket.socketpair()
        self._wake_reader.setblocking(False)
        self._selector.register(self._listener, selectors.EVENT_READ, _LISTENER)
        self._selector.register(self._wake_reader, selectors.EVENT_READ, _WAKE)
        self._pairs: list[_Pair] = []
        self._interest: dict[socket.socket, int] = {}
        self._stalled = False
        self._closing = False
        self._lock = threading.Lock()
        self._commands: collections.deque[tuple[Callable[[], None], threading.Event]] = collections.deque()
        self._thread = threading.Thread(target=self._loop, name=f"stallproxy:{self.port}", daemon=True)
        self._thread.start()

    @property
    def port(self) -> int:
        port: int = self._listener.getsockname()[1]
        return port

    @property
    def address(self) -> tuple[str, int]:
        """Where clients connect instead of the server."""
        return ("127.0.0.1", self.port)

    @property
    def stalled(self) -> bool:
        return self._stalled

    @property
    def connections(self) -> int:
        """How many connections are open through the proxy right now."""
        return len(self._pairs)

    def stall(self) -> None:
        """Stop forwarding on every connection, current and new, keeping them open."""
        self._command(lambda: setattr(self, "_stalled", True))

    def resume(self) -> None:
        """Forward again; what was held is delivered."""
        self._command(lambda: setattr(self, "_stalled", False))

    def cut(self) -> None:
        """Reset every current connection, both ends; the proxy keeps accepting new ones."""
        self._command(self._cut)

    def close(self) -> None:
        """Reset every connection, stop the loop and join its thread. Idempotent."""
        if self._thread.is_alive():
            self._command(lambda: setattr(self, "_closing", True))
            self._thread.join(timeout=10)
        self._wake_writer.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    # ------------------------------------------------------------------ the loop thread

    def _command(self, action: Callable[[], None]) -> None:
        """Run `action` in the loop thread and wait until it has run (and the loop has taken
        the new state into account), so the caller's next line sees its effect."""
        if not self._thread.is_alive():
            raise RuntimeError("StallProxy is closed")
        done = threading.Event()
        with self._lock:
            self._commands.append((action, done))
        with contextlib.suppress(OSError):
            self._wake_writer.send(b"x")
        if not done.wait(timeout=10):
            raise RuntimeError("StallProxy's loop did not answer within 10 s")

    def _loop(self) -> None:
        try:
            while not self._closing:
                for key, events in self._selector.select():
                    if key.data == _WAKE:
                        self._run_commands()
                    elif key.data == _LISTENER:
                        self._accept()
                    elif isinstance(key.data, _Pair):
                        self._service(key.data, key.fileobj, events)  # type: ignore[arg-type]
                self._update_interest()
        except Exception:
            _LOG.exception("stall proxy loop failed")
        finally:
            for pair in self._pairs:
                _abort(pair.client)
                _abort(pair.upstream)
            self._pairs.clear()
            self._run_commands()
            self._selector.close()
            self._listener.close()
            self._wake_reader.close()

    def _run_commands(self) -> None:
        with contextlib.suppress(OSError):
            while self._wake_reader.recv(4096):
                pass
        with self._lock:
            commands, self._commands = list(self._commands), collections.deque()
        for action, done in commands:
            try:
                action()
            finally:
                done.set()

    def _accept(self) -> None:
        try:
            client, _ = self._listener.accept()
        except BlockingIOError:
            return
        upstream = self._connect_upstream()
        if upstream is None:
            client.close()
            return
        client.setblocking(False)
        upstream.setblocking(False)
        for sock in (client, upstream):
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self._pairs.append(_Pair(client, upstream))

    def _connect_upstream(self) -> socket.socket | None:
        """A connection to the next server in turn, passing over those that refuse; None if all do."""
        for _ in range(len(self._targets)):
            target = self._targets[self._turn % len(self._targets)]
            self._turn += 1
            try:
                return socket.create_connection(target, timeout=self._connect_timeout)
            except OSError as exc:
                _LOG.debug("stall proxy: upstream %s:%d unreachable: %s", *target, exc)
        return None

    def _service(self, pair: _Pair, sock: socket.socket, events: int) -> None:
        """Move bytes for one ready socket; a reset or error on either end resets the pair.

        A socket the same `select` reported before a command in its batch stalled the proxy
        (or cut the pair) is left alone: once `stall()` has returned, nothing moves."""
        if self._stalled or pair.closed:
            return
        try:
            if events & selectors.EVENT_READ:
                data = sock.recv(_CHUNK)
                if data:
                    pair.pending[pair.other(sock)] += data
                else:
                    pair.eof.add(sock)
                    if not pair.pending[pair.other(sock)]:
                        pair.other(sock).shutdown(socket.SHUT_WR)
            if events & selectors.EVENT_WRITE:
                pending = pair.pending[sock]
                del pending[: sock.send(pending)]
                if not pending and pair.other(sock) in pair.eof:
                    sock.shutdown(socket.SHUT_WR)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            self._drop(pair, abort=True)
            return
        if pair.done():
            self._drop(pair, abort=False)

    def _cut(self) -> None:
        for pair in list(self._pairs):
            self._drop(pair, abort=True)

    def _drop(self, pair: _Pair, *, abort: bool) -> None:
        pair.closed = True
        for sock in (pair.client, pair.upstream):
            if self._interest.pop(sock, 0):
                self._selector.unregister(sock)
            if abort:
                _abort(sock)
            else:
                sock.close()
        self._pairs.remove(pair)

    def _update_interest(self) -> None:
        """(Un)register each socket for what it may do now: nothing while stalled; else read
        while its peer's buffer has room and it has not hung up, write while bytes wait for it."""
        for pair in self._pairs:
            for sock in (pair.client, pair.upstream):
                wanted = 0
                if not self._stalled:
                    if sock not in pair.eof and len(pair.pending[pair.other(sock)]) < _BUFFER_LIMIT:
                        wanted |= selectors.EVENT_READ
                    if pair.pending[sock]:
                        wanted |= selectors.EVENT_WRITE
                current = self._interest.get(sock, 0)
                if wanted == current:
                    continue
                if not wanted:
                    self._selector.unregister(sock)
                    del self._interest[sock]
                elif not current:
                    self._selector.register(sock, wanted, pair)
                    self._interest[sock] = wanted
                else:
                    self._selector.modify(sock, wanted, pair)
                    self._interest[sock] = wanted


def balancer(addresses: Sequence[tuple[str, int]]) -> StallProxy:
    """One address in front of several servers, a connection to each in turn."""
    (host, port), *more = addresses
    return StallProxy(host, port, more=more)


def url_via(url: str, proxy: StallProxy) -> str:
    """`url` (`postgresql://user@host:port/db?...`) with its host and port replaced by the proxy's."""
    parts = urlsplit(url)
    userinfo, _, _ = parts.netloc.rpartition("@")
    host, port = proxy.address
    netloc = f"{userinfo}@{host}:{port}" if userinfo else f"{host}:{port}"
    return urlunsplit(parts._replace(netloc=netloc))
