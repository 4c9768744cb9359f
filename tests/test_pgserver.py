"""The PostgreSQL harness itself: a real server that restarts and cleans up, and a proxy that stalls.

The fault tests of the webhook service's store are only as good as these two: a restart
that silently lost committed rows, a "stall" that leaked a FIN, or a postmaster left
running after the session would each make those tests pass or fail for the wrong reason.
"""

from __future__ import annotations

import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import psycopg
import pytest
from stallproxy import StallProxy, url_via

import tools.pgserver as pgserver
from tools.pgserver import (
    PostgresUnavailable,
    TemporaryPostgres,
    find_postgres_bindir,
    require_postgres,
)

STALL_PROBE = 1.0
"""How long a stalled query must stay unanswered; a loopback query takes milliseconds."""


class Background:
    """`call()` in a thread of its own, its result or exception kept, so a test can check that
    it has *not* finished yet."""

    def __init__(self, call: Callable[[], object]) -> None:
        self.result: object = None
        self.error: BaseException | None = None
        self._call = call
        self._thread = threading.Thread(target=self._run, name="pgserver-test", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        try:
            self.result = self._call()
        except BaseException as exc:
            self.error = exc

    def finished_within(self, seconds: float) -> bool:
        self._thread.join(timeout=seconds)
        return not self._thread.is_alive()


def _processes() -> dict[int, tuple[int, int]]:
    """Every live process's (parent pid, process group), read from /proc."""
    found: dict[int, tuple[int, int]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            text = (entry / "stat").read_text()
        except OSError:
            continue
        fields = text.rsplit(")", 1)[1].split()
        if fields[0] != "Z":
            found[int(entry.name)] = (int(fields[1]), int(fields[2]))
    return found


def _one_value(url: str, query: str) -> object:
    with psycopg.connect(url, connect_timeout=10) as conn:
        row = conn.execute(query).fetchone()
    assert row is not None
    return row[0]


@pytest.fixture
def own_server() -> Iterator[TemporaryPostgres]:
    """A server of the test's own, for the tests that stop it."""
    with TemporaryPostgres(bindir=require_postgres()) as server:
        yield server


# ------------------------------------------------------------------ the server


def test_the_server_answers_on_loopback(postgres_server: TemporaryPostgres) -> None:
    assert postgres_server.url == f"postgresql://postgres@127.0.0.1:{postgres_server.port}/postgres"
    assert postgres_server.host == "127.0.0.1"
    assert _one_value(postgres_server.url, "SELECT 1") == 1
    assert _one_value(postgres_server.url, "SHOW listen_addresses") == "127.0.0.1"
    assert _one_value(postgres_server.url, "SHOW synchronous_commit") == "on"
    assert _one_value(postgres_server.url, "SHOW max_connections") == "200"
    assert postgres_server.directory.name.startswith("llm-triage-pg-")


def test_each_database_is_a_test_of_its_own(postgres_server: TemporaryPostgres, postgres_url: str) -> None:
    other = postgres_server.create_database()
    assert other != postgres_url
    with psycopg.connect(postgres_url) as conn:
        conn.execute("CREATE TABLE alerts (fingerprint text PRIMARY KEY)")
        conn.execute("INSERT INTO alerts VALUES ('a1')")
    assert _one_value(postgres_url, "SELECT count(*) FROM alerts") == 1
    assert _one_value(other, "SELECT to_regclass('alerts') IS NULL") is True
    assert _one_value(other, "SELECT current_database()") == other.rsplit("/", 1)[1]
    named = postgres_server.create_database("store test")
    assert named.endswith("/store%20test")
    assert _one_value(named, "SELECT current_database()") == "store test"
    postgres_server.drop_database("store test")
    postgres_server.drop_database(other.rsplit("/", 1)[1])
    with pytest.raises(psycopg.OperationalError, match="does not exist"):
        psycopg.connect(named, connect_timeout=10)


def test_committed_rows_survive_fast_and_immediate_restarts_on_the_same_port(
    own_server: TemporaryPostgres,
) -> None:
    url = own_server.create_database()
    port, first_pid = own_server.port, own_server.pid
    with psycopg.connect(url) as conn:
        conn.execute("CREATE TABLE sent (n int)")
        conn.execute("INSERT INTO sent VALUES (1)")

    own_server.restart("fast")
    assert (own_server.port, own_server.url.endswith(f":{port}/postgres")) == (port, True)
    assert own_server.pid != first_pid
    with psycopg.connect(url) as conn:
        conn.execute("INSERT INTO sent VALUES (2)")
        conn.commit()
        # A session open across a crash-like stop: what it committed must survive.
        conn.execute("INSERT INTO sent VALUES (3)")
        conn.commit()
        own_server.restart("immediate")
        with pytest.raises(psycopg.OperationalError):
            conn.execute("SELECT 1")
    assert own_server.port == port
    assert _one_value(url, "SELECT array_agg(n ORDER BY n) FROM sent") == [1, 2, 3]
    assert "database system was interrupted" in (own_server.directory / "postgres.log").read_text()


def test_a_stopped_server_refuses_then_starts_again(own_server: TemporaryPostgres) -> None:
    url = own_server.url
    own_server.stop("fast")
    assert not own_server.running
    with pytest.raises(psycopg.OperationalError):
        psycopg.connect(url, connect_timeout=2)
    own_server.start()
    assert own_server.url == url
    assert _one_value(url, "SELECT 1") == 1
    with pytest.raises(RuntimeError, match="already running"):
        own_server.start()
    with pytest.raises(ValueError, match="unknown stop mode"):
        own_server.stop("gently")


def test_close_leaves_no_process_and_no_folder() -> None:
    server = TemporaryPostgres(bindir=require_postgres())
    server.start()
    postmaster, directory = server.pid, server.directory
    assert postmaster is not None
    conn = psycopg.connect(server.url, autocommit=True)  # a backend process too
    try:
        conn.execute("SELECT 1")
        children = {pid for pid, (parent, _) in _processes().items() if parent == postmaster}
        assert len(children) >= 3, children  # checkpointer, writers, this session's backend...
        server.close()
    finally:
        conn.close()
    alive = _processes()
    assert not ({postmaster} | children) & set(alive)
    assert not [pid for pid, (_, group) in alive.items() if group == postmaster]
    assert not directory.exists()
    server.close()  # idempotent


def test_missing_binaries_are_a_clear_error_or_a_loud_skip(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(pgserver, "find_postgres_bindir", lambda: None)
    before = set(Path(tempfile.gettempdir()).glob("llm-triage-pg-*"))
    with pytest.raises(PostgresUnavailable, match="Debian package `postgresql`"):
        TemporaryPostgres().start()
    assert set(Path(tempfile.gettempdir()).glob("llm-triage-pg-*")) == before
    monkeypatch.delenv("CI", raising=False)
    with pytest.raises(pytest.skip.Exception, match="NOT RUN"):
        require_postgres()
    monkeypatch.setenv("CI", "true")
    with pytest.raises(pytest.fail.Exception, match="NOT RUN"):
        require_postgres()


def test_the_newest_server_directory_is_found() -> None:
    bindir = require_postgres()
    assert bindir == find_postgres_bindir()
    assert (bindir / "postgres").exists() and (bindir / "initdb").exists()


# ------------------------------------------------------------------ the proxy


def test_the_proxy_forwards_queries(postgres_server: TemporaryPostgres, postgres_url: str) -> None:
    with StallProxy(postgres_server.host, postgres_server.port) as proxy:
        via = url_via(postgres_url, proxy)
        assert via.endswith(f"@127.0.0.1:{proxy.port}/{postgres_url.rsplit('/', 1)[1]}")
        assert _one_value(via, "SELECT inet_server_port()") == postgres_server.port
        assert _one_value(via, "SELECT length(repeat('x', 3000000))") == 3_000_000
        assert proxy.address == ("127.0.0.1", proxy.port)


def test_a_stall_holds_existing_and_new_connections_until_resumed(
    postgres_server: TemporaryPostgres, postgres_url: str
) -> None:
    with StallProxy(postgres_server.host, postgres_server.port) as proxy:
        via = url_via(postgres_url, proxy)
        conn = psycopg.connect(via)
        try:
            proxy.stall()
            query = Background(lambda: conn.execute("SELECT 42").fetchone())
            fresh = Background(lambda: _one_value(via, "SELECT 43"))
            assert not query.finished_within(STALL_PROBE)
            assert not fresh.finished_within(0.1)
            assert proxy.connections == 2  # the new one accepted and held open, not refused
            proxy.resume()
            assert query.finished_within(10) and fresh.finished_within(10)
            assert (query.error, fresh.error) == (None, None)
            assert (query.result, fresh.result) == ((42,), 43)
        finally:
            conn.close()


def test_a_cut_resets_the_connections_and_new_ones_pass(
    postgres_server: TemporaryPostgres, postgres_url: str
) -> None:
    with StallProxy(postgres_server.host, postgres_server.port) as proxy:
        via = url_via(postgres_url, proxy)
        with psycopg.connect(via) as conn:
            assert conn.execute("SELECT 1").fetchone() == (1,)
            proxy.cut()
            with pytest.raises(psycopg.OperationalError):
                conn.execute("SELECT 1")
        assert proxy.connections == 0
        assert _one_value(via, "SELECT 2") == 2


def test_a_closed_proxy_leaves_no_thread_and_refuses(
    postgres_server: TemporaryPostgres, postgres_url: str
) -> None:
    before = set(threading.enumerate())
    proxy = StallProxy(postgres_server.host, postgres_server.port)
    via = url_via(postgres_url, proxy)
    held = psycopg.connect(via)
    proxy.stall()
    proxy.close()
    deadline = time.monotonic() + 5
    while set(threading.enumerate()) - before and time.monotonic() < deadline:
        time.sleep(0.01)
    assert set(threading.enumerate()) - before == set()
    with pytest.raises(psycopg.OperationalError):
        held.execute("SELECT 1")
    held.close()
    with pytest.raises(psycopg.OperationalError):
        psycopg.connect(via, connect_timeout=2)
    proxy.close()  # idempotent
    with pytest.raises(RuntimeError, match="closed"):
        proxy.stall()


def test_url_via_keeps_the_user_database_and_options() -> None:
    with StallProxy("127.0.0.1", 9) as proxy:
        port = proxy.port
        url = "postgresql://postgres:secret@db.example:5432/store?sslmode=disable"
        assert url_via(url, proxy) == f"postgresql://postgres:secret@127.0.0.1:{port}/store?sslmode=disable"
        assert url_via("postgresql://db:5432/x", proxy) == f"postgresql://127.0.0.1:{port}/x"
