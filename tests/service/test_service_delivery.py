"""Diagnosis against a real Prometheus, and delivery to sinks: coalescing, messages per group, faults.

The service runs in process (TestClient) against the session's backfilled Prometheus
(a KV-pressure incident), sometimes through `PromStandIn` to make Prometheus fail and
recover; sinks are `RecordingSink`s, real HTTP servers that record what they get.
Numbers in the test names refer to reliability.md §6.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from promserver import PromStandIn, Reply
from test_live import AT

from signals.timeparse import format_instant
from triage.service.app import create_app

from .harness.sink import RecordingSink
from .payloads import alert, notification
from .servicekit import (
    StoreAt,
    closed_port_url,
    count,
    deliveries,
    make_service,
    rows,
    serve_yaml,
    sink_entry,
    wait_until,
)


def sink_config(tmp_path: Path, *sinks: tuple[str, str, str], extra: str = "", **opts: Any) -> str:
    """A config file with the given (name, kind, url) sinks and fast retries."""
    entries = (
        sink_entry(
            name,
            kind,
            url=url,
            max_backoff=0.2,
            max_tries=opts.get("max_tries", 100),
            max_alerts_listed=opts.get("listed", 2),
        )
        for name, kind, url in sinks
    )
    return serve_yaml(tmp_path, *entries, extra=extra)


@pytest.fixture
def hook() -> Iterator[RecordingSink]:
    with RecordingSink() as sink:
        yield sink


@pytest.fixture
def slack() -> Iterator[RecordingSink]:
    with RecordingSink() as sink:
        sink.reply_with(200, "ok", {"Content-Type": "text/plain"})
        yield sink


def group_of(n: int, start: float = AT, group: str = "tpot", **labels: str) -> list[dict[str, Any]]:
    return [
        alert(f"{group}-{i}", start, instance=f"10.42.0.{i + 1}:8000", symptom="tpot_slow", **labels)
        for i in range(n)
    ]


@pytest.mark.parametrize("processes", [1, 0], ids=["diagnosis-process", "diagnosis-in-threads"])
def test_a_group_is_fetched_once_diagnosed_once_and_sent_once(
    store: StoreAt,
    tmp_path: Path,
    prometheus_url: str,
    hook: RecordingSink,
    slack: RecordingSink,
    processes: int,
) -> None:
    db = store
    config = sink_config(tmp_path, ("hook", "webhook", hook.url), ("chat", "slack", slack.url))
    service = make_service(
        db, prometheus_url, config=config, public_url="https://triage.example", diagnosis_processes=processes
    )
    alerts = group_of(3)
    with TestClient(create_app(service)) as client:
        for _ in range(3):  # the first notification and two repeats
            assert (
                client.post("/api/alertmanager", json=notification(alerts, group="tpot")).status_code == 200
            )
        wait_until(lambda: count(db, "annotations", "state = 'annotated'") == 3, timeout=60)
        assert count(db, "work") == 1
        assert rows(db, "SELECT fetches FROM work")[0]["fetches"] == 1
        assert service.metrics.value("triage_signal_fetches_total") == 1
        one = client.get("/api/annotations/1").json()
        assert one["cause"] == "kv_pressure" and one["signals"] == "ok" and one["symptom"] == "tpot_slow"
        assert one["diagnosis"]["causes"][0]["cause"] == "kv_pressure"  # the VOCABULARY.md JSON
        assert "scale_out" in {f["action"] for f in one["diagnosis"]["forbidden"]}
        assert "VERDICT  kv_pressure" in one["summary"]
        assert "kv_pressure" in client.get("/annotations/1").text

        assert hook.wait_for(1) and slack.wait_for(1)
        message = hook.received[0].json
        assert message["kind"] == "diagnosis" and message["alert_count"] == 3
        assert message["diagnosis"]["cause"] == "kv_pressure"
        assert len(message["alerts"]) == 2 and message["more_alerts"] == 1  # listed compactly, +N more
        assert message["alerts"][0]["url"] == "https://triage.example/annotations/1"
        assert hook.received[0].header("Idempotency-Key")
        text = slack.received[0].json["text"]
        assert (
            "kv_pressure" in text and "+1 more" in text and "<https://triage.example/annotations/1|" in text
        )

        # Repeats after the diagnosis change nothing downstream.
        assert (
            client.post("/api/alertmanager", json=notification(alerts, group="tpot")).json()["duplicates"]
            == 3
        )
        assert count(db, "outbox") == 2

        # Resolve: closes with durations, one message, no second diagnosis.
        ended = [{**a, "status": "resolved", "endsAt": format_instant(AT + 600)} for a in alerts]
        assert (
            client.post("/api/alertmanager", json=notification(ended, group="tpot")).json()["resolved"] == 3
        )
        assert hook.wait_for(2) and slack.wait_for(2)
        resolved = hook.received[1].json
        assert resolved["kind"] == "resolved" and resolved["status"] == "resolved"
        assert all(a["duration_seconds"] == 600 for a in resolved["alerts"])
        assert resolved["diagnosis"]["cause"] == "kv_pressure"
        assert ":white_check_mark: *RESOLVED*" in slack.received[1].json["text"]
        assert client.get("/api/annotations/2").json()["duration_seconds"] == 600
        assert service.metrics.value("triage_signal_fetches_total") == 1
        assert (
            client.post("/api/alertmanager", json=notification(ended, group="tpot")).json()["resolved"] == 0
        )
        assert count(db, "outbox") == 4
    keys = [r.header("Idempotency-Key") for r in hook.received]
    assert len(keys) == len(set(keys)) == 2


def test_new_alerts_with_the_same_diagnosis_send_nothing_new(
    store: StoreAt, tmp_path: Path, prometheus_url: str, hook: RecordingSink
) -> None:
    db = store
    service = make_service(db, prometheus_url, config=sink_config(tmp_path, ("hook", "webhook", hook.url)))
    first = group_of(2)
    later = alert("tpot-9", AT - 600, instance="10.42.0.4:8000", symptom="tpot_slow")
    with TestClient(create_app(service)) as client:
        client.post("/api/alertmanager", json=notification(first, group="tpot"))
        wait_until(lambda: count(db, "annotations", "state = 'annotated'") == 2, timeout=60)
        client.post("/api/alertmanager", json=notification([*first, later], group="tpot"))
        wait_until(lambda: count(db, "annotations", "state = 'annotated'") == 3, timeout=60)
        assert count(db, "work") == 2
        signatures = {r["signature"] for r in rows(db, "SELECT signature FROM work")}
        sent = count(db, "outbox")
        # Same diagnosis: one message for the group; a different one would add a "changed" message.
        assert (sent, len(signatures)) in ((1, 1), (2, 2))


def test_11_prometheus_503_then_back(
    store: StoreAt, tmp_path: Path, prometheus_url: str, hook: RecordingSink
) -> None:
    db = store
    with PromStandIn(Reply.unavailable()) as stand_in:
        service = make_service(db, stand_in.url, config=sink_config(tmp_path, ("hook", "webhook", hook.url)))
        with TestClient(create_app(service)) as client:
            r = client.post("/api/alertmanager", json=notification(group_of(2), group="tpot"))
            assert r.status_code == 200
            wait_until(lambda: count(db, "annotations", "state = 'unavailable'") == 2, timeout=60)
            got = client.get("/api/annotations/1").json()
            assert got["signals"].startswith("unavailable: ") and "503" in got["signals"]
            assert service.metrics.total("triage_signals_unavailable_total") >= 1
            assert hook.wait_for(1)
            assert hook.received[0].json["diagnosis"]["signals"].startswith("unavailable")
            stand_in.play(Reply.proxied(prometheus_url))
            wait_until(lambda: count(db, "annotations", "state = 'annotated'") == 2, timeout=60)
            assert client.get("/api/annotations/1").json()["cause"] == "kv_pressure"
            assert hook.wait_for(2)
            changed = hook.received[1].json
            assert changed["kind"] == "changed" and changed["diagnosis"]["cause"] == "kv_pressure"
            assert service.metrics.value("triage_annotated_total") == 2
            assert count(db, "work", "state = 'done'") == 1


def test_19_sink_down_then_back_delivers_once_with_one_key(
    store: StoreAt, tmp_path: Path, hook: RecordingSink
) -> None:
    db = store
    hook.fail_with(503)
    service = make_service(db, closed_port_url(), config=sink_config(tmp_path, ("hook", "webhook", hook.url)))
    with TestClient(create_app(service)) as client:
        client.post("/api/alertmanager", json=notification(group_of(2), group="tpot"))
        assert hook.wait_for(3, timeout=30)
        assert (
            client.post("/api/alertmanager", json=notification(group_of(2), group="tpot")).status_code == 200
        )
        hook.stop()  # connection refused for a while
        wait_until(
            lambda: (
                service.metrics.value("triage_sink_failures_total", sink="hook", reason="unreachable") >= 3
            )
        )
        assert service.metrics.value("triage_sink_failures_total", sink="hook", reason="http_503") >= 3
        hook.restart()
        hook.recover()
        assert hook.wait_for(lambda got: any(r.status == 200 for r in got), timeout=30)
        wait_until(lambda: count(db, "outbox", "state = 'delivered'") == 1)
        keys = {r.header("Idempotency-Key") for r in hook.received}
        assert len(keys) == 1
        assert len(hook.accepted()) == 1
        listed = client.get("/api/deliveries").json()["deliveries"]
        assert listed[0]["state"] == "delivered" and listed[0]["attempts"] >= 4


def test_dead_letter_after_max_tries_is_visible(store: StoreAt, tmp_path: Path, hook: RecordingSink) -> None:
    db = store
    hook.fail_with(500)
    config = sink_config(tmp_path, ("hook", "webhook", hook.url), max_tries=3)
    service = make_service(db, closed_port_url(), config=config)
    with TestClient(create_app(service)) as client:
        client.post("/api/alertmanager", json=notification(group_of(1), group="tpot"))
        wait_until(lambda: count(db, "outbox", "state = 'dead'") == 1)
        assert len(hook.received) == 3
        dead = deliveries(client, "dead")
        assert (
            len(dead) == 1 and dead[0]["last_error"] == "HTTP 500: unavailable" and dead[0]["attempts"] == 3
        )
        assert hook.url not in json.dumps(dead)
        assert "triage_dead_letters 1" in client.get("/metrics").text


HOSTILE = {
    "template": "{{ 7*7 }}",
    "raw": "{% raw %}",
    "channel": "<!channel>",
    "link": "<https://evil.example|grafana>",
    "bold": "*x*",
    "control": "a\x00b\x1b[2Jc\u202ed",
    "script": "<script>alert(1)</script>",
    "long": "y" * 100_000,
    "Σ": "sigma",
    "🔥": "fire",
}


def test_20_hostile_labels_are_data(
    store: StoreAt, tmp_path: Path, hook: RecordingSink, slack: RecordingSink
) -> None:
    db = store
    config = sink_config(tmp_path, ("hook", "webhook", hook.url), ("chat", "slack", slack.url))
    service = make_service(db, closed_port_url(), config=config)
    hostile = alert("evil", AT, alertname="Evil {{ 7*7 }} <!channel>", **HOSTILE)
    with TestClient(create_app(service)) as client:
        assert client.post("/api/alertmanager", json=notification([hostile], group="evil")).status_code == 200
        assert hook.wait_for(1) and slack.wait_for(1)
        text = slack.received[0].json["text"]
        assert "Evil {{ 7*7 }}" in text and "Evil 49" not in text
        assert "&lt;!channel&gt;" in text and "<!channel>" not in text
        body = hook.received[0].json
        labels = body["alerts"][0]["labels"]
        assert labels["template"] == "{{ 7*7 }}" and labels["channel"] == "<!channel>"
        assert len(labels["long"]) == 512 and labels["Σ"] == "sigma" and labels["🔥"] == "fire"
        page = client.get("/annotations/1").text
        assert "<script>alert(1)</script>" not in page and "&lt;script&gt;" in page
        assert "{{ 7*7 }}" in page
        stored = client.get("/api/annotations/1").json()["labels"]
        assert stored["long"] == "y" * 100_000  # the store keeps the data; only messages truncate


def test_21_user_templates_run_sandboxed_with_fallback(
    store: StoreAt, tmp_path: Path, slack: RecordingSink
) -> None:
    folder = tmp_path / "templates"
    folder.mkdir()
    (folder / "slack.txt.j2").write_text("{{ ''.__class__.__mro__[1].__subclasses__() }}")
    (folder / "missing.txt.j2").write_text(
        "pod: {{ alerts[0].labels.pod }} group: {{ message.group_labels.alertname }}"
    )
    extra = "  - name: chat2\n    kind: slack\n    url: " + slack.url + "\n    template: missing.txt.j2\n"
    config = sink_config(tmp_path, ("chat", "slack", slack.url), extra="")
    Path(config).write_text(Path(config).read_text() + extra + f"templates: {folder}\n")
    db = store
    service = make_service(db, closed_port_url(), config=config)
    with TestClient(create_app(service)) as client:
        client.post("/api/alertmanager", json=notification(group_of(1), group="tpot"))
        assert slack.wait_for(2)
        texts = sorted(r.json["text"] for r in slack.received)
        assert any(t.startswith("pod: n/a group: tpot") for t in texts)  # a missing label reads n/a
        assert any("*Diagnosis:*" in t for t in texts)  # the sandbox refused; the bundled template was used
        assert all("subclasses" not in t and "<class" not in t for t in texts)
        assert service.metrics.value("triage_template_errors_total", sink="chat") == 1


def test_21_no_code_path_compiles_alert_data_as_a_template() -> None:
    root = Path(__file__).resolve().parents[2] / "triage" / "service"
    for path in root.rglob("*.py"):
        code = path.read_text()
        assert not re.search(r"\.from_string\(|jinja2\.Template\(|\bTemplate\(", code), path


def test_1_truncated_alerts_are_recorded_and_shown(
    store: StoreAt, tmp_path: Path, slack: RecordingSink
) -> None:
    db = store
    service = make_service(db, closed_port_url(), config=sink_config(tmp_path, ("chat", "slack", slack.url)))
    with TestClient(create_app(service)) as client:
        client.post("/api/alertmanager", json=notification(group_of(2), group="tpot", truncated=7))
        assert slack.wait_for(1)
        assert "+7 truncated by Alertmanager" in slack.received[0].json["text"]
        assert client.get("/api/annotations/1").json()["truncated_alerts"] == 7
        assert "7 alerts of the group truncated" in client.get("/annotations/1").text


def test_6_resolve_while_the_diagnosis_runs_sends_one_resolved_and_no_firing(
    store: StoreAt, tmp_path: Path, prometheus_url: str, hook: RecordingSink
) -> None:
    db = store
    with PromStandIn(Reply.stalled(2, Reply.names([]))) as slow:
        service = make_service(db, slow.url, config=sink_config(tmp_path, ("hook", "webhook", hook.url)))
        alerts = group_of(2)
        ended = [{**a, "status": "resolved", "endsAt": format_instant(AT + 60)} for a in alerts]
        with TestClient(create_app(service)) as client:
            client.post("/api/alertmanager", json=notification(alerts, group="tpot"))
            wait_until(lambda: slow.requests >= 1)  # the diagnosis is inside its fetch
            assert (
                client.post("/api/alertmanager", json=notification(ended, group="tpot")).json()["resolved"]
                == 2
            )
            slow.play(Reply.proxied(prometheus_url))
            wait_until(lambda: count(db, "annotations", "state = 'annotated'") == 2, timeout=60)
            assert hook.wait_for(1)
            assert not hook.wait_for(2, timeout=2)
            assert [r.json["kind"] for r in hook.received] == ["resolved"]
            assert count(db, "annotations", "status = 'resolved' AND cause = 'kv_pressure'") == 2


def test_2_a_stalled_prometheus_never_delays_the_ack_and_every_alert_is_stored_unavailable(
    store: StoreAt, tmp_path: Path, hook: RecordingSink
) -> None:
    """50 notifications while every Prometheus request hangs: all acked, all stored as timed out.

    After the first timeout, the other groups get the remembered failure at once
    instead of a timeout each; they are retried later.
    """
    db = store
    with PromStandIn(Reply.stalled(120)) as stalled:
        config = sink_config(tmp_path, ("hook", "webhook", hook.url))
        service = make_service(db, stalled.url, config=config, prometheus_timeout="2s")
        with TestClient(create_app(service)) as client:
            for g in range(50):
                one = alert(f"s{g}", AT - 600 * g, instance="10.42.0.1:8000", symptom="tpot_slow")
                assert (
                    client.post("/api/alertmanager", json=notification([one], group=f"g{g}")).status_code
                    == 200
                )
            assert count(db, "annotations") == 50
            wait_until(lambda: count(db, "annotations", "state = 'unavailable'") == 50, timeout=60)
            signals = {r["signals"] for r in rows(db, "SELECT signals FROM annotations")}
            assert all(s.startswith("unavailable: ") and "timeout" in s for s in signals), signals
            assert stalled.requests < 10  # not one timeout per group
            assert hook.wait_for(50, timeout=30)  # every group still hears about it


def test_18_html_from_an_auth_proxy_is_unavailable_not_a_crash(
    store: StoreAt, tmp_path: Path, hook: RecordingSink
) -> None:
    db = store
    with PromStandIn(Reply.html()) as proxy:
        service = make_service(db, proxy.url, config=sink_config(tmp_path, ("hook", "webhook", hook.url)))
        with TestClient(create_app(service)) as client:
            client.post("/api/alertmanager", json=notification(group_of(1), group="tpot"))
            wait_until(lambda: count(db, "annotations", "state = 'unavailable'") == 1)
            got = client.get("/api/annotations/1").json()
            assert "not JSON" in got["signals"] and "Traceback" not in got["summary"]
            assert hook.wait_for(1)
            assert hook.received[0].json["diagnosis"]["signals"] == got["signals"]


def test_19_a_200_with_an_error_body_is_retried(store: StoreAt, tmp_path: Path, hook: RecordingSink) -> None:
    db = store
    hook.reply_with(200, '{"ok": false, "error": "invalid_blocks"}')
    service = make_service(db, closed_port_url(), config=sink_config(tmp_path, ("hook", "webhook", hook.url)))
    with TestClient(create_app(service)) as client:
        client.post("/api/alertmanager", json=notification(group_of(1), group="tpot"))
        assert hook.wait_for(2)
        assert count(db, "outbox", "state = 'delivered'") == 0
        hook.reply_with(200, '{"ok": true}')
        wait_until(lambda: count(db, "outbox", "state = 'delivered'") == 1)
        assert len({r.header("Idempotency-Key") for r in hook.received}) == 1


def test_24_an_overdue_heartbeat_is_reported(tmp_path: Path) -> None:
    fresh = make_service(tmp_path / "a.db", closed_port_url(), heartbeat_max_age="1h")
    overdue = make_service(tmp_path / "b.db", closed_port_url(), heartbeat_max_age=0.2)
    beat = notification([alert("wd", AT, alertname="Watchdog")], group="Watchdog")
    with TestClient(create_app(fresh)) as client:
        assert client.get("/readyz").json()["heartbeat"]["stale"] is False
        client.post("/api/alertmanager", json=beat)
        assert client.get("/readyz").json()["heartbeat"]["stale"] is False
        assert "triage_heartbeat_stale 0" in client.get("/metrics").text
    with TestClient(create_app(overdue)) as client:
        wait_until(lambda: client.get("/readyz").json()["heartbeat"]["stale"] is True)
        ready = client.get("/readyz")
        assert ready.status_code == 200  # reported, not a reason to stop taking alerts
        assert "triage_heartbeat_stale 1" in client.get("/metrics").text
