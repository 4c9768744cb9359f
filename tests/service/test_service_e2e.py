"""End to end: `triage serve` as a process, fed by a real Alertmanager 0.25, reading a real Prometheus.

Alerts enter through Alertmanager's own v2 API, as Prometheus would send them, and
reach the service as Alertmanager's real webhook notifications (bearer token from a
credentials file, repeats, resolves, both members of an HA pair). The service reads
the backfilled Prometheus of the live-signal tests, and delivers to a recording sink.
The crash tests SIGKILL the process at chosen moments and restart it on the same
store. Numbers in the test names refer to reliability.md §6.
"""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from promserver import PromStandIn, Reply
from test_live import AT

from signals.tempprom import free_loopback_port

from .harness.alertmanager import (
    TemporaryAlertmanager,
    ha_pair,
    make_alert,
    resolved,
)
from .harness.sink import RecordingSink
from .payloads import alert, notification
from .servicekit import ServeProcess, count, http, rows, wait_until

TOKEN = "e2e-token-51c"


def serve_args(tmp_path: Path, prometheus: str, sink: RecordingSink, *extra: str) -> list[str]:
    token = tmp_path / "token"
    token.write_text(TOKEN + "\n")
    config = tmp_path / "serve.yaml"
    config.write_text(
        "prometheus:\n  retry_unavailable: 0.5\nsinks:\n"
        f"  - name: hook\n    kind: webhook\n    url: {sink.url}\n    backoff: 0.1\n    max_backoff: 0.5\n"
        "    max_tries: 1000\n"
    )
    return [
        "--config", str(config), "--store", str(tmp_path / "triage.db"), "--prometheus", prometheus,
        "--token-file", str(token), "--workers", "2", *extra,
    ]  # fmt: skip


def am_alerts(n: int, name: str = "LLMTPOTP99High") -> list[dict[str, Any]]:
    """Alerts that started at the incident's end, each on its own replica, with the rules' symptom label."""
    starts = datetime.fromtimestamp(AT, UTC)
    return [
        make_alert(name, starts_at=starts, symptom="tpot_slow", instance=f"10.42.0.{i + 1}:8000")
        for i in range(n)
    ]


def metric(url: str, name: str) -> float:
    text = http("GET", f"{url}/metrics")[1]
    for line in text.splitlines():
        if line.startswith(name + " "):
            return float(line.split()[1])
    assert f"# TYPE {name.split('{')[0]} " in text, f"{name} is not exposed"
    return 0.0  # a labelled series appears with its first sample


def test_storm_of_repeats_then_resolve_through_a_real_alertmanager(
    tmp_path: Path, prometheus_url: str, sink: RecordingSink, binary: str
) -> None:
    db = tmp_path / "triage.db"
    with ServeProcess(serve_args(tmp_path, prometheus_url, sink), tmp_path / "serve.log") as serve:
        alerts = am_alerts(3)
        with TemporaryAlertmanager(
            f"{serve.url}/api/alertmanager", bearer_token=TOKEN, group_interval="1s", repeat_interval="2s",
            binary=binary,
        ) as am:  # fmt: skip
            am.push(alerts)
            # Alertmanager repeats the whole group every couple of seconds; wait for several repeats.
            wait_until(lambda: count(db, "groups", "notifications >= 4"), timeout=60)
            wait_until(lambda: count(db, "annotations", "state = 'annotated'") == 3, timeout=60)
            assert count(db, "annotations") == 3 and count(db, "work") == 1
            # The counter moves just after the store commits the notification: poll it too.
            wait_until(lambda: metric(serve.url, "triage_webhook_duplicates_total") >= 9, timeout=10)
            assert sink.wait_for(1, timeout=30)
            assert rows(db, "SELECT cause FROM annotations")[0]["cause"] == "kv_pressure"

            am.push([resolved(a) for a in alerts])
            wait_until(lambda: count(db, "annotations", "status = 'resolved'") == 3, timeout=60)
            assert sink.wait_for(2, timeout=30)
            assert not sink.wait_for(3, timeout=3)  # later repeats of the resolved group add nothing
        kinds = [r.json["kind"] for r in sink.accepted()]
        assert kinds == ["diagnosis", "resolved"]
        assert all(a["duration_seconds"] > 0 for a in sink.accepted()[1].json["alerts"])
        assert count(db, "work") == 1 and metric(serve.url, "triage_signal_fetches_total") == 1
        assert serve.terminate() == 0


def test_4_ha_pair_duplicates_make_one_annotation_per_episode(
    tmp_path: Path, prometheus_url: str, sink: RecordingSink, binary: str
) -> None:
    """Both members deliver after the receiver was unreachable (alertmanager#4108); one annotation each."""
    db = tmp_path / "triage.db"
    port = free_loopback_port()
    alerts = am_alerts(2)
    with ha_pair(
        f"http://127.0.0.1:{port}/api/alertmanager", bearer_token=TOKEN, peer_timeout="1s",
        repeat_interval="1h", binary=binary,
    ) as pair:  # fmt: skip
        pair.push(alerts)
        # Let both members try and fail (connection refused) before the service comes up.
        wait_until(lambda: all("connection refused" in m.log_tail(200) for m in pair), timeout=30)
        with ServeProcess(
            serve_args(tmp_path, prometheus_url, sink), tmp_path / "serve.log", port=port
        ) as serve:
            wait_until(
                lambda: metric(serve.url, 'triage_webhook_requests_total{outcome="accepted"}') >= 2, 60
            )
            wait_until(lambda: count(db, "annotations", "state = 'annotated'") == 2, timeout=60)
            assert count(db, "annotations") == 2 and count(db, "work") == 1
            # Every alert delivered past the two episodes is a duplicate (the other member's, or a
            # retry's), and there was one. How many depends on Alertmanager: a member's first
            # snapshot of a group may hold only the alerts it had at its first flush.
            received = metric(serve.url, "triage_webhook_alerts_received_total")
            duplicates = metric(serve.url, "triage_webhook_duplicates_total")
            assert duplicates >= 1 and duplicates == received - 2, (received, duplicates)
            assert sink.wait_for(1, timeout=30)
            assert not sink.wait_for(2, timeout=3)
            assert serve.terminate() == 0


def test_3_7_sigkill_after_ack_then_restart_loses_nothing(
    tmp_path: Path, prometheus_url: str, sink: RecordingSink
) -> None:
    db = tmp_path / "triage.db"
    groups = {f"g{g}": [alert(f"g{g}-{i}", AT, instance=f"10.42.0.{i % 4 + 1}:8000", symptom="tpot_slow")
                        for i in range(10)] for g in range(10)}  # fmt: skip
    with (
        PromStandIn(Reply.stalled(120)) as stalled,
        ServeProcess(
            serve_args(tmp_path, stalled.url, sink, "--prometheus-timeout", "60s"), tmp_path / "serve.log"
        ) as serve,
    ):
        for name, alerts in groups.items():
            status, body = http("POST", f"{serve.url}/api/alertmanager", notification(alerts, group=name),
                                {"Authorization": f"Bearer {TOKEN}"})  # fmt: skip
            assert status == 200 and body["new"] == 10
        wait_until(lambda: stalled.requests >= 1)  # a diagnosis is inside its fetch
        serve.kill()  # SIGKILL right after the last 2xx, with diagnoses in flight
    assert count(db, "annotations") == 100 and count(db, "annotations", "state = 'pending'") == 100
    assert count(db, "work", "state = 'running'") >= 1  # cut off mid-work

    # Restart with the sink failing: diagnoses complete, deliveries wait in the outbox.
    sink.fail_with(503)
    with ServeProcess(serve_args(tmp_path, prometheus_url, sink), tmp_path / "serve.log") as serve:
        wait_until(lambda: count(db, "annotations", "state = 'annotated'") == 100, timeout=120)
        wait_until(lambda: count(db, "outbox") == 10)
        assert sink.wait_for(5, timeout=30)
        serve.kill()  # SIGKILL again, with every delivery still pending
    first_keys = {r.header("Idempotency-Key") for r in sink.received}

    sink.recover()
    with ServeProcess(serve_args(tmp_path, prometheus_url, sink), tmp_path / "serve.log") as serve:
        wait_until(lambda: count(db, "outbox", "state = 'delivered'") == 10, timeout=60)
        assert serve.terminate() == 0
    delivered = sink.accepted()
    by_group = {r.json["group_key"]: r.header("Idempotency-Key") for r in delivered}
    assert len(by_group) == 10 and len(delivered) == 10  # every group once; no duplicate downstream
    assert first_keys <= set(by_group.values())  # the keys survived the crash unchanged
    assert sum(r.json["alert_count"] for r in delivered) == 100
    assert count(db, "annotations") == 100
    assert count(db, "annotations", "cause = 'kv_pressure' AND annotated_at IS NOT NULL") == 100
    assert count(db, "work") == 10 and count(db, "work", "state = 'done'") == 10


def test_25_sigterm_drains_and_exits_zero(tmp_path: Path, prometheus_url: str, sink: RecordingSink) -> None:
    db = tmp_path / "triage.db"
    with (
        PromStandIn(Reply.stalled(3)) as slow,
        ServeProcess(
            serve_args(tmp_path, slow.url, sink, "--prometheus-timeout", "2s"), tmp_path / "serve.log"
        ) as serve,
    ):
        alerts = [
            alert(f"t-{i}", AT, instance=f"10.42.0.{i + 1}:8000", symptom="tpot_slow") for i in range(4)
        ]
        status, _ = http("POST", f"{serve.url}/api/alertmanager", notification(alerts, group="t"),
                         {"Authorization": f"Bearer {TOKEN}"})  # fmt: skip
        assert status == 200
        wait_until(lambda: slow.requests >= 1)
        assert serve.terminate(timeout=40) == 0
        assert "Traceback" not in (tmp_path / "serve.log").read_text()
    assert count(db, "annotations") == 4
    with ServeProcess(serve_args(tmp_path, prometheus_url, sink), tmp_path / "serve.log") as serve:
        wait_until(lambda: count(db, "annotations", "state = 'annotated'") == 4, timeout=60)
        assert serve.terminate() == 0


def test_bad_config_is_one_line_per_problem_and_exit_2(tmp_path: Path) -> None:
    config = tmp_path / "serve.yaml"
    config.write_text(
        "listen: nowhere\nworkers: 0\nsinks:\n  - name: x\n    kind: pager\n    url: ftp://x\nbogus: 1\n"
    )
    import subprocess
    import sys

    result = subprocess.run(
        [sys.executable, "-m", "triage.cli.main", "serve", "--config", str(config), "--prometheus", "http://p:9090"],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert result.returncode == 2
    err = result.stderr
    assert f"{config}:1: listen: " in err and f"{config}:2: workers: " in err
    assert f"{config}:5: sinks[0].kind: " in err and f"{config}:7: bogus: unknown key" in err
    assert "Traceback" not in err
