"""The PostgreSQL store shared by several replicas: races, leases, migrations and an unreachable database.

Each "replica" here is a `Store` (or a whole in-process `Service`) of its own on one
fresh database of a real PostgreSQL; they race from threads, as replicas behind one
Service would. What SQLite guarantees by having one writer, PostgreSQL must guarantee
across connections: one annotation per episode, one work row per group and moment,
each work item and each message claimed by one replica at a time, and nothing
acknowledged that was not committed.
"""

from __future__ import annotations

import contextlib
import json
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import psycopg
import pytest
from fastapi.testclient import TestClient
from stallproxy import StallProxy, url_via

from triage.service.app import create_app
from triage.service.payload import parse_notification
from triage.service.store import Store, WorkItem, WorkResult
from triage.service.store.backend import StoreOpenError
from triage.service.store.schema import POSTGRESQL

from .harness.sink import RecordingSink
from .payloads import alert, notification
from .servicekit import closed_port_url, count, make_service, rows, wait_until

T0 = 1_795_000_000.0
TOKEN = "shared-store-token"
AUTH = {"Authorization": f"Bearer {TOKEN}"}


def builder(
    db: Any, group_key: str, kind: str, episode: int, work_id: int | None, brief: Any = None
) -> dict[str, Any]:
    return {"kind": kind, "group": group_key, "episode": episode}


def symptom(labels: Any) -> tuple[str, str]:
    return ("tpot_slow", "alert label")


def result(signature: str = "tpot_slow:kv_pressure") -> WorkResult:
    return WorkResult(signature, "tpot_slow", "kv_pressure", {"cause": "kv_pressure"}, "s", "h", None, 1)


@pytest.fixture
def replicas(postgres_url: str) -> Iterator[tuple[Store, Store]]:
    a = Store(postgres_url, ["hook"], builder=builder, lease=60)
    b = Store(postgres_url, ["hook"], builder=builder, lease=60)
    try:
        yield a, b
    finally:
        a.close()
        b.close()


def storm(groups: int, alerts: int) -> list[bytes]:
    """Every group's snapshot, firing, as Alertmanager would send it."""
    return [
        json.dumps(
            notification(
                [alert(f"g{g}-a{i}", T0 + i, instance=f"10.0.{g}.{i}:8000") for i in range(alerts)],
                group=f"G{g}",
            )
        ).encode()
        for g in range(groups)
    ]


def race(jobs: list[Callable[[], Any]], threads: int = 8) -> list[Any]:
    """Run the jobs from a pool of threads, all released at once."""
    start = threading.Barrier(min(threads, len(jobs)))

    def run(job: Callable[[], Any]) -> Any:
        with contextlib.suppress(threading.BrokenBarrierError):  # the last, smaller round of jobs
            start.wait(timeout=10)
        return job()

    with ThreadPoolExecutor(threads) as pool:
        return list(pool.map(run, jobs))


def test_both_replicas_taking_every_notification_store_one_annotation_per_episode(
    replicas: tuple[Store, Store], postgres_url: str
) -> None:
    """Each of 20 group snapshots reaches both replicas at once, three times (HA pair, repeats)."""
    bodies = storm(groups=20, alerts=5)
    notes = [parse_notification(b, 1000) for b in bodies]
    jobs = [
        (lambda store=store, note=note: store.intake(note, symptom, 60, "Watchdog"))
        for note in notes
        for store in replicas
        for _ in range(3)
    ]
    results = race(jobs)
    assert sum(r.new for r in results) == 100
    assert sum(r.duplicates for r in results) == 100 * 5
    assert sum(r.new_work for r in results) == 20
    assert count(postgres_url, "annotations") == 100
    assert count(postgres_url, "work") == 20
    per_group = rows(postgres_url, "SELECT group_key, notifications FROM groups ORDER BY group_key")
    assert len(per_group) == 20 and {r["notifications"] for r in per_group} == {6}


def test_concurrent_claims_take_each_item_once(replicas: tuple[Store, Store], postgres_url: str) -> None:
    for note in storm(groups=30, alerts=1):
        replicas[0].intake(parse_notification(note, 1000), symptom, 60, "Watchdog")
    claimed: list[WorkItem] = []
    lock = threading.Lock()

    def drain(store: Store) -> None:
        while (item := store.claim()) is not None:
            with lock:
                claimed.append(item)

    race([lambda s=s: drain(s) for s in replicas for _ in range(4)])
    assert sorted(i.id for i in claimed) == sorted(r["id"] for r in rows(postgres_url, "SELECT id FROM work"))
    assert len({i.claim for i in claimed}) == 30
    assert count(postgres_url, "work", "state = 'running' AND lease_until IS NOT NULL") == 30


def test_a_lease_that_runs_out_passes_the_work_on_and_the_late_result_is_dropped(postgres_url: str) -> None:
    first = Store(postgres_url, ["hook"], builder=builder, lease=1.0)
    second = Store(postgres_url, ["hook"], builder=builder, lease=30.0)
    try:
        first.intake(parse_notification(storm(1, 2)[0], 1000), symptom, 60, "Watchdog")
        dead = first.claim()
        assert dead is not None and second.claim() is None  # held while the lease runs
        taken = wait_until(second.claim, timeout=10)
        assert taken.id == dead.id and taken.claim != dead.claim and taken.attempts == 2
        assert first.renew([dead]) == 0  # the first replica learns it lost the item
        assert first.complete(dead, result("late:one"), None) == 0
        assert (
            count(postgres_url, "outbox") == 0
            and count(postgres_url, "annotations", "state = 'annotated'") == 0
        )
        assert second.complete(taken, result(), None) == 2
        work = rows(postgres_url, "SELECT state, signature, claim FROM work")
        assert [tuple(w) for w in work] == [("done", "tpot_slow:kv_pressure", None)]
        assert [r["kind"] for r in rows(postgres_url, "SELECT kind FROM outbox")] == ["diagnosis"]
    finally:
        first.close()
        second.close()


def test_renewed_leases_keep_the_work(postgres_url: str) -> None:
    store = Store(postgres_url, ["hook"], builder=builder, lease=1.0)
    other = Store(postgres_url, ["hook"], builder=builder, lease=1.0)
    try:
        store.intake(parse_notification(storm(1, 1)[0], 1000), symptom, 60, "Watchdog")
        item = store.claim()
        assert item is not None
        for _ in range(6):
            time.sleep(0.3)
            assert store.renew([item]) == 1
            assert other.claim() is None
    finally:
        store.close()
        other.close()


def test_a_message_is_claimed_by_one_replica_and_recorded_only_under_its_claim(
    replicas: tuple[Store, Store], postgres_url: str
) -> None:
    a, b = replicas
    a.intake(parse_notification(storm(1, 1)[0], 1000), symptom, 60, "Watchdog")
    item = a.claim()
    assert item is not None and a.complete(item, result(), None) == 1
    claims = race([lambda s=s: s.claim_message("hook", 30) for s in (a, b) for _ in range(4)])
    won = [c for c in claims if c is not None]
    assert len(won) == 1 and won[0].kind == "diagnosis"
    stale = type(won[0])(*[*list(won[0].__dict__.values())[:-1], "not-the-claim"])
    a.delivered(stale)
    assert rows(postgres_url, "SELECT state FROM outbox")[0]["state"] == "pending"
    b.delivered(won[0])
    assert rows(postgres_url, "SELECT state, claim FROM outbox")[0][:] == ("delivered", None)


def test_a_groups_messages_go_in_order_and_groups_do_not_wait_for_each_other(
    replicas: tuple[Store, Store], postgres_url: str
) -> None:
    """A replica never sends a group's second message while another holds its first; another
    group's message goes meanwhile."""
    a, b = replicas
    for note in storm(2, 1):
        a.intake(parse_notification(note, 1000), symptom, 60, "Watchdog")
    for store in (a, b):
        item = store.claim()
        assert item is not None and store.complete(item, result(), None) == 1
    resolved = notification([alert("g0-a0", T0, status="resolved", ends_at=T0 + 60)], group="G0")
    a.intake(parse_notification(json.dumps(resolved).encode(), 2000), symptom, 60, "Watchdog")
    first = a.claim_message("hook", 30)
    assert first is not None and (first.group_key, first.kind) == ('{}:{alertname="G0"}', "diagnosis")
    other = b.claim_message("hook", 30)
    assert other is not None and (other.group_key, other.kind) == ('{}:{alertname="G1"}', "diagnosis")
    assert b.claim_message("hook", 30) is None  # G0's resolved waits for its diagnosis
    a.delivered(first)
    second = b.claim_message("hook", 30)
    assert second is not None and (second.group_key, second.kind) == (first.group_key, "resolved")


def v1_store(url: str) -> None:
    """A store as version 1 of the layout left it, with a row of each kind."""
    with psycopg.connect(url, autocommit=True) as conn, conn.transaction():
        conn.execute(
            "CREATE TABLE schema_migrations (version INTEGER PRIMARY KEY, description TEXT NOT NULL, "
            "applied_at TEXT NOT NULL)"
        )
        for statement in POSTGRESQL[0].statements():
            conn.execute(statement)  # type: ignore[call-overload]
        conn.execute("INSERT INTO schema_migrations VALUES (1, 'v1', '2026-01-01T00:00:00Z')")
        conn.execute(
            "INSERT INTO work (group_key, at, symptom, symptom_source, state, next_at, created_at) "
            "VALUES ('g', 100.0, 'tpot_slow', 'alert label', 'pending', 0, 0)"
        )
        conn.execute(
            "INSERT INTO outbox (sink, key, group_key, kind, message, next_at, created_at) "
            "VALUES ('hook', 'k1', 'g', 'diagnosis', '{}', 0, 0)"
        )


def test_an_existing_store_is_upgraded_in_place_with_every_row(postgres_url: str) -> None:
    v1_store(postgres_url)
    store = Store(postgres_url, ["hook"], builder=builder)
    try:
        item = store.claim()
        assert item is not None and item.group_key == "g" and item.claim  # the lease columns exist now
        message = store.claim_message("hook", 30)
        assert message is not None and message.key == "k1"
    finally:
        store.close()
    versions = rows(postgres_url, "SELECT version, description FROM schema_migrations ORDER BY version")
    assert [tuple(v) for v in versions] == [(1, "v1"), (2, POSTGRESQL[1].description)]


def test_replicas_starting_together_migrate_once(postgres_url: str) -> None:
    stores = race([lambda: Store(postgres_url) for _ in range(6)], threads=6)
    for store in stores:
        store.close()
    assert [r["version"] for r in rows(postgres_url, "SELECT version FROM schema_migrations")] == [
        m.version for m in POSTGRESQL
    ]


def test_a_store_newer_than_the_code_is_refused_by_name(postgres_url: str) -> None:
    Store(postgres_url).close()
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        conn.execute("INSERT INTO schema_migrations VALUES (99, 'from the future', 'x')")
    with pytest.raises(StoreOpenError, match=r"schema is at version 99, newer than the 2 this triage knows"):
        Store(postgres_url)


def test_an_unreachable_database_is_a_clear_error_at_start() -> None:
    port = closed_port_url().rsplit(":", 1)[1]
    with pytest.raises(
        StoreOpenError, match=rf"cannot open the store at postgresql://triage@127.0.0.1:{port}/t"
    ):
        Store(f"postgresql://triage@127.0.0.1:{port}/t")


def test_a_stalled_database_gets_503_and_retry_after_and_readyz_false_then_recovers(
    postgres_url: str,
) -> None:
    """While the network path to PostgreSQL forwards nothing, nothing is acknowledged; after, all of it is."""
    from urllib.parse import urlsplit

    parts = urlsplit(postgres_url)
    with StallProxy(parts.hostname or "127.0.0.1", parts.port or 5432) as proxy:
        url = url_via(postgres_url, proxy)
        service = make_service(url, closed_port_url(), token=TOKEN, store_timeout="1s")
        with TestClient(create_app(service)) as client:
            ok = client.post(
                "/api/alertmanager", json=notification([alert("a0", T0)], group="before"), headers=AUTH
            )
            assert ok.status_code == 200 and client.get("/readyz").json()["store_writable"] is True
            proxy.stall()
            started = time.monotonic()
            refused = client.post(
                "/api/alertmanager", json=notification([alert("a1", T0)], group="during"), headers=AUTH
            )
            waited = time.monotonic() - started
            assert refused.status_code == 503 and refused.headers["Retry-After"] == "5"
            assert "cannot commit" in refused.json()["error"]
            assert waited < 4.0  # bounded by store_timeout, never Alertmanager's own timeout
            ready = client.get("/readyz")
            assert ready.status_code == 503 and ready.json()["store_writable"] is False
            assert client.get("/api/annotations").status_code == 503
            proxy.resume()
            wait_until(lambda: client.get("/readyz").status_code == 200, timeout=20)
            again = client.post(
                "/api/alertmanager", json=notification([alert("a1", T0)], group="during"), headers=AUTH
            )
            assert again.status_code == 200 and again.json()["new"] == 1
    fingerprints = [
        r["fingerprint"] for r in rows(postgres_url, "SELECT fingerprint FROM annotations ORDER BY id")
    ]
    assert fingerprints == ["a0", "a1"]


def test_a_database_restart_is_503_until_it_is_back(
    postgres_server: Any, postgres_url: str, sink: RecordingSink
) -> None:
    """The outage answers 503; every worker and sink thread outlives it, and work goes on after."""
    service = make_service(
        postgres_url,
        closed_port_url(),
        token=TOKEN,
        store_timeout="2s",
        store_lease="3s",
        sink_webhook=[sink.url],
    )
    with TestClient(create_app(service)) as client:
        assert (
            client.post("/api/alertmanager", json=notification([alert("b0", T0)]), headers=AUTH).status_code
            == 200
        )
        postgres_server.stop("immediate")
        try:
            down = client.post("/api/alertmanager", json=notification([alert("b1", T0)]), headers=AUTH)
            assert down.status_code == 503 and "Retry-After" in down.headers
            assert client.get("/readyz").json()["store_writable"] is False
            service.pool._sleep()  # a worker that found no work asks when work is due: not fatal now
            time.sleep(6)  # longer than a worker's and a sink thread's polls: each meets the outage
        finally:
            postgres_server.start()
        wait_until(
            lambda: (
                client.post(
                    "/api/alertmanager", json=notification([alert("b1", T0)]), headers=AUTH
                ).status_code
                == 200
            ),
            timeout=20,
        )
        threads = [*service.pool._threads, *service.dispatcher._threads]
        assert threads and all(t.is_alive() for t in threads)
        # The work of both alerts is done after the outage (signals unavailable: no Prometheus).
        wait_until(lambda: count(postgres_url, "annotations", "state = 'pending'") == 0, timeout=30)
    assert count(postgres_url, "annotations") == 2


def test_a_password_in_the_store_url_is_refused_without_being_echoed() -> None:
    from signals.errors import InputErrors
    from triage.service.config import load_config

    with pytest.raises(InputErrors) as refused:
        load_config(None, {"prometheus": "http://p:9090", "store": "postgresql://triage:hunter2@db:5432/t"})
    assert "PGPASSWORD" in str(refused.value) and "hunter2" not in str(refused.value)
    assert load_config(
        None, {"prometheus": "http://p:9090", "store": "postgresql://triage@db/t"}
    ).config.store
