"""Two `triage serve` replicas on one PostgreSQL, behind one address, fed by a clustered Alertmanager pair.

The deployment `docs/serve.md` describes, made of real parts: two clustered Alertmanager
0.25 members post to one address that spreads connections over two `triage serve`
processes (as a Kubernetes Service does over ready pods, `stallproxy.balancer`); both
replicas share a real PostgreSQL; diagnoses read the session's real Prometheus; messages
go to a recording sink. Each test pushes a storm of alert groups to both members and
breaks something mid-storm:

- one replica is SIGKILLed (and nothing it started may outlive it by 5 s);
- PostgreSQL is restarted;
- the network path to PostgreSQL stops forwarding (a proxy that goes silent).

Each then asserts the same: every alert annotated once (0 lost, 0 duplicate annotations),
one message per group event at the sink (0 duplicates), and `/api/annotations` the same
from every replica still up. While the store cannot commit, the replicas answer 503 and
Alertmanager retries, so nothing is acknowledged unstored. The sink refuses deliveries
while the fault is on, so no message can be sent in the instant a replica dies between a
sink's 2xx and its record (the case the Idempotency-Key exists for): what is counted is
exactly what the replicas recorded.
"""

from __future__ import annotations

import contextlib
from collections import Counter
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
from stallproxy import StallProxy, balancer, url_via
from test_live import AT

from .harness.alertmanager import AlertmanagerPair, ha_pair, make_alert
from .harness.sink import RecordingSink
from .servicekit import ServeProcess, count, descendants, http, rows, wait_until
from .test_service_e2e import TOKEN, metric, serve_args

GROUPS = 12
ALERTS_PER_GROUP = 4
LEASE = "3s"


def cmdline(pid: int) -> str:
    return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")


def niceness(pid: int) -> int:
    """A process's nice value (field 19 of /proc/PID/stat)."""
    return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[16])


def storm() -> list[list[dict[str, Any]]]:
    """Alert groups (one alertname each) that started at the incident's end, each alert on its own replica."""
    starts = datetime.fromtimestamp(AT, UTC)
    return [
        [
            make_alert(
                f"LLMTPOTHigh{g:02d}", starts_at=starts, symptom="tpot_slow", instance=f"10.42.0.{i + 1}:8000"
            )
            for i in range(ALERTS_PER_GROUP)
        ]
        for g in range(GROUPS)
    ]


class HaService:
    """The two replicas, the address in front of them and the Alertmanager pair; `db` is read directly."""

    def __init__(
        self, replicas: list[ServeProcess], front: StallProxy, pair: AlertmanagerPair, db: str
    ) -> None:
        self.replicas = replicas
        self.front = front
        self.pair = pair
        self.db = db

    def push(self, groups: list[list[dict[str, Any]]]) -> None:
        for alerts in groups:
            self.pair.push(alerts)

    def up(self) -> list[ServeProcess]:
        return [r for r in self.replicas if r.process is not None and r.process.poll() is None]

    def accepted(self) -> float:
        return sum(metric(r.url, 'triage_webhook_requests_total{outcome="accepted"}') for r in self.up())


def refused(service: HaService) -> float:
    """Notifications the replicas still up answered 503 because the store could not commit them."""
    return sum(
        metric(r.url, 'triage_webhook_requests_total{outcome="store_unavailable"}') for r in service.up()
    )


@contextlib.contextmanager
def ha_service(
    tmp_path: Path, store_url: str, db: str, prometheus_url: str, sink: RecordingSink, binary: str
) -> Iterator[HaService]:
    replicas = [
        ServeProcess(
            serve_args(
                tmp_path,
                prometheus_url,
                sink,
                "--store",
                store_url,
                "--store-lease",
                LEASE,
                "--store-timeout",
                "2s",
                "--diagnosis-processes",
                "1",
            ),
            tmp_path / f"serve-{n}.log",
        )
        for n in range(2)
    ]
    with contextlib.ExitStack() as stack:
        for replica in replicas:
            stack.enter_context(replica)
        front = stack.enter_context(balancer([("127.0.0.1", r.port) for r in replicas]))
        pair = stack.enter_context(
            ha_pair(
                f"http://127.0.0.1:{front.port}/api/alertmanager",
                bearer_token=TOKEN,
                binary=binary,
                group_wait="1s",
                group_interval="2s",
                repeat_interval="1h",
                peer_timeout="1s",
            )
        )
        yield HaService(replicas, front, pair, db)
        for n, replica in enumerate(replicas):
            if replica.process is not None and replica.process.poll() is None:
                assert replica.terminate() == 0
            log = (tmp_path / f"serve-{n}.log").read_text()
            assert "Traceback" not in log, log[-3000:]


def assert_served_once(service: HaService, sink: RecordingSink) -> None:
    """Every alert annotated once, one message per group, the same annotations from every replica."""
    alerts = GROUPS * ALERTS_PER_GROUP
    wait_until(lambda: count(service.db, "annotations", "state = 'annotated'") == alerts, timeout=120)
    assert count(service.db, "annotations") == alerts
    assert count(service.db, "annotations", "cause = 'kv_pressure'") == alerts
    episodes = rows(service.db, "SELECT fingerprint, starts_at FROM annotations")
    assert len({(r[0], r[1]) for r in episodes}) == alerts
    assert count(service.db, "work", "state = 'done'") == count(service.db, "work") == GROUPS

    wait_until(lambda: count(service.db, "outbox", "state = 'delivered'") == GROUPS, timeout=60)
    assert not sink.wait_for(lambda got: len([r for r in got if 200 <= r.status < 300]) > GROUPS, timeout=3)
    delivered = sink.accepted()
    keys = Counter(r.header("Idempotency-Key") for r in delivered)
    assert len(delivered) == GROUPS and set(keys.values()) == {1}
    assert Counter(r.json["kind"] for r in delivered) == {"diagnosis": GROUPS}
    assert len({r.json["group_key"] for r in delivered}) == GROUPS
    # A group's message lists the alerts it had when diagnosed: Alertmanager flushes a new group
    # whose alerts started long ago at once, so its first snapshot may lack the alerts pushed
    # with the first; they join the diagnosis when they arrive, without a second message.
    assert all(1 <= r.json["alert_count"] <= ALERTS_PER_GROUP for r in delivered)

    views = []
    for replica in service.replicas:
        if replica.process is not None and replica.process.poll() is None:
            status, body = http(
                "GET",
                f"{replica.url}/api/annotations?limit=1000",
                headers={"Authorization": f"Bearer {TOKEN}"},
            )
            assert status == 200
            views.append(sorted((a["fingerprint"], a["cause"], a["state"]) for a in body["annotations"]))
    assert views and all(view == views[0] for view in views) and len(views[0]) == alerts


def all_ready(service: HaService, status: int) -> None:
    """Wait until every replica still up answers `/readyz` with `status` (503: the store is unreachable)."""
    for replica in service.up():
        wait_until(lambda r=replica: http("GET", f"{r.url}/readyz", timeout=10)[0] == status, timeout=30)


def storm_with_fault(
    service: HaService,
    sink: RecordingSink,
    fault: Callable[[], None],
    heal: Callable[[], None],
    refusals: bool = True,
) -> None:
    """Half the storm, the fault while the other half arrives, then the cure; deliveries refused meanwhile.

    With `refusals`, the cure waits until a replica has answered 503 to the second half:
    Alertmanager met the fault and must retry.
    """
    groups = storm()
    sink.fail_with(503)
    service.push(groups[: GROUPS // 2])
    wait_until(lambda: service.accepted() >= 2, timeout=60)
    fault()
    service.push(groups[GROUPS // 2 :])
    if refusals:
        wait_until(lambda: refused(service) > 0, timeout=30)
    heal()
    sink.recover()


@pytest.fixture
def served_ha(
    tmp_path: Path, postgres_url: str, prometheus_url: str, sink: RecordingSink, binary: str
) -> Iterator[HaService]:
    with ha_service(tmp_path, postgres_url, postgres_url, prometheus_url, sink, binary) as service:
        yield service


def test_sigkill_of_one_replica_mid_storm_loses_nothing_and_duplicates_nothing(
    served_ha: HaService, sink: RecordingSink
) -> None:
    victim = served_ha.replicas[0]

    def kill() -> None:
        assert victim.process is not None
        pid = victim.process.pid

        def diagnosing_behind_the_intake() -> bool:
            # The diagnosis process lowers its priority once started (an import's time after spawning).
            diagnosing = [p for p in descendants(pid) if "multiprocessing.spawn" in cmdline(p)]
            return bool(diagnosing) and all(niceness(p) == niceness(pid) + 10 for p in diagnosing)

        wait_until(diagnosing_behind_the_intake, timeout=30)
        victim.kill(leftovers_within=5.0)  # asserts that no process it started survives it

    def wait_for_the_other() -> None:
        # The survivor takes the dead replica's claimed work once its leases run out.
        wait_until(lambda: count(served_ha.db, "work", "state = 'running'") == 0, timeout=60)

    storm_with_fault(served_ha, sink, kill, wait_for_the_other, refusals=False)
    assert_served_once(served_ha, sink)


def test_a_postgresql_restart_mid_storm_loses_nothing_and_duplicates_nothing(
    served_ha: HaService, sink: RecordingSink, postgres_server: Any
) -> None:
    def restart() -> None:
        postgres_server.stop("immediate")
        all_ready(served_ha, 503)

    def start() -> None:
        postgres_server.start()
        all_ready(served_ha, 200)

    storm_with_fault(served_ha, sink, restart, start)
    assert_served_once(served_ha, sink)


def test_a_network_stall_to_postgresql_mid_storm_loses_nothing_and_duplicates_nothing(
    tmp_path: Path, postgres_url: str, prometheus_url: str, sink: RecordingSink, binary: str
) -> None:
    parts = urlsplit(postgres_url)
    with (
        StallProxy(parts.hostname or "127.0.0.1", parts.port or 5432) as proxy,
        ha_service(
            tmp_path, url_via(postgres_url, proxy), postgres_url, prometheus_url, sink, binary
        ) as service,
    ):

        def stall() -> None:
            proxy.stall()
            all_ready(service, 503)

        def resume() -> None:
            proxy.resume()
            all_ready(service, 200)

        storm_with_fault(service, sink, stall, resume)
        assert_served_once(service, sink)
