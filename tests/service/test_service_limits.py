"""Limits met on the way out and in: a sink that refuses a message as too large, names that do not
resolve, and a Prometheus answer with far more series than a fleet.

Sinks are `RecordingSink`s answering 413 (or Slack's `msg_too_long`) above a body size;
Prometheus is the session's real one, behind `PromStandIn` where one answer must be huge.
Numbers in the test names refer to reliability.md section 6.
"""

from __future__ import annotations

import json
import socket
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from promserver import PromStandIn, Reply
from test_live import AT

from triage.service.app import create_app
from triage.service.sinks import shortenings

from .harness.sink import RecordingSink
from .payloads import alert, notification
from .servicekit import closed_port_url, count, deliveries, make_service, rows, wait_until
from .test_service_delivery import group_of, sink_config

LISTED = 40


def big_group(n: int = 120) -> list[dict[str, Any]]:
    """`n` alerts, each with a long label, so that listing 40 of them is a large message."""
    return [
        alert(f"big-{i}", AT, instance=f"10.42.1.{i}:8000", symptom="tpot_slow", detail="d" * 300)
        for i in range(n)
    ]


def test_19_a_413_is_answered_by_a_shorter_message_with_a_note(tmp_path: Path) -> None:
    db = tmp_path / "t.db"
    with RecordingSink(max_body=8000) as hook:
        config = sink_config(tmp_path, ("hook", "webhook", hook.url), listed=LISTED)
        service = make_service(db, closed_port_url(), config=config, public_url="https://triage.example")
        with TestClient(create_app(service)) as client:
            client.post("/api/alertmanager", json=notification(big_group(), group="big"))
            wait_until(lambda: count(db, "outbox", "state = 'delivered'") == 1)
            got = hook.received
            assert got[0].status == 413 and len(got[0].body) == 0  # the full message was refused
            (delivered,) = hook.accepted()
            message = delivered.json
            shown = len(message["alerts"])
            assert 0 < shown < LISTED and shown in shortenings(LISTED)
            assert len(delivered.body) <= 8000
            assert message["alert_count"] == 120 and message["more_alerts"] == 120 - shown
            assert message["note"] == (
                f"message shortened for this sink: {shown} of 120 alerts shown; "
                f"full list at {message['external_url']}"
            )
            assert all(len(v) <= 80 for a in message["alerts"] for v in a["labels"].values())
            assert message["alerts"][0]["url"] == "https://triage.example/annotations/1"  # links never cut
            assert {r.header("Idempotency-Key") for r in got} == {got[0].header("Idempotency-Key")}
            assert service.metrics.value("triage_sink_shortened_total", sink="hook") == 1
            assert (
                service.metrics.value("triage_sink_failures_total", sink="hook", reason="http_413")
                == len(got) - 1
            )
            assert "triage_sink_shortened_total" in client.get("/metrics").text
            assert deliveries(client, "dead") == []


def test_19_slack_msg_too_long_is_shortened_with_a_visible_line(tmp_path: Path) -> None:
    db = tmp_path / "t.db"
    with RecordingSink(max_body=2500, too_large=(400, b"msg_too_long")) as slack:
        slack.reply_with(200, "ok", {"Content-Type": "text/plain"})
        config = sink_config(tmp_path, ("chat", "slack", slack.url), listed=LISTED)
        service = make_service(db, closed_port_url(), config=config)
        with TestClient(create_app(service)) as client:
            client.post("/api/alertmanager", json=notification(big_group(), group="big"))
            wait_until(lambda: count(db, "outbox", "state = 'delivered'") == 1)
            assert slack.received[0].status == 400
            (delivered,) = slack.accepted()
            text = delivered.json["text"]
            shown = text.count("\n• ")
            assert 0 < shown < LISTED
            assert f":warning: _message shortened for this sink: {shown} of 120 alerts shown" in text
            assert f"+{120 - shown} more" in text
            assert service.metrics.value("triage_sink_failures_total", sink="chat", reason="http_400") >= 1


def test_19_too_large_even_at_its_shortest_is_a_dead_letter_at_once(tmp_path: Path) -> None:
    db = tmp_path / "t.db"
    with RecordingSink(max_body=300) as hook:
        config = sink_config(tmp_path, ("hook", "webhook", hook.url), listed=LISTED)
        service = make_service(db, closed_port_url(), config=config)
        with TestClient(create_app(service)) as client:
            client.post("/api/alertmanager", json=notification(big_group(), group="big"))
            wait_until(lambda: count(db, "outbox", "state = 'dead'") == 1)
            (dead,) = deliveries(client, "dead")
            assert (
                dead["last_error"] == "too large even when shortened (HTTP 413: too large)"
                and dead["attempts"] == 1
            )
            # The full message, then every shortening down to no alert listed: no more, no retry.
            assert len(hook.received) == 1 + len(shortenings(LISTED))
            assert all(r.status == 413 for r in hook.received)
            assert (
                service.metrics.value("triage_sink_deliveries_total", sink="hook", outcome="dead_letter") == 1
            )
            assert service.metrics.value("triage_sink_shortened_total", sink="hook") == 0


def resolves_at_once(name: str) -> bool:
    try:
        socket.getaddrinfo(name, 80)
    except socket.gaierror as exc:
        return exc.errno == socket.EAI_NONAME
    return False


@pytest.fixture
def unresolvable() -> str:
    """A name that never resolves (`.invalid`, RFC 2606); skipped, loudly, without a resolver to say so."""
    if not resolves_at_once("prometheus.invalid"):
        pytest.skip("!!! the resolver does not answer 'no such name' for .invalid: DNS tests NOT RUN !!!")
    return "prometheus.invalid"


def test_14_an_unresolvable_prometheus_is_signals_unavailable_by_dns(
    tmp_path: Path, unresolvable: str
) -> None:
    db = tmp_path / "t.db"
    with RecordingSink() as hook:
        config = sink_config(tmp_path, ("hook", "webhook", hook.url))
        service = make_service(db, f"http://{unresolvable}:9090", config=config)
        with TestClient(create_app(service)) as client:
            assert (
                client.post("/api/alertmanager", json=notification(group_of(2), group="tpot")).status_code
                == 200
            )
            wait_until(lambda: count(db, "annotations", "state = 'unavailable'") == 2, timeout=60)
            got = client.get("/api/annotations/1").json()
            assert got["signals"].startswith("unavailable: unreachable: DNS: name not resolved")
            assert "signals unavailable (unreachable: DNS: name not resolved" in got["summary"]
            assert service.metrics.value("triage_signals_unavailable_total", reason="unreachable") >= 1
            assert hook.wait_for(1)
            sent = hook.received[0].json["diagnosis"]["signals"]
            assert "DNS: name not resolved" in sent and "Traceback" not in sent


def test_19_an_unresolvable_sink_is_retried_with_the_reason_not_dead(
    tmp_path: Path, unresolvable: str
) -> None:
    db = tmp_path / "t.db"
    config = sink_config(
        tmp_path, ("hook", "webhook", f"http://sink.{unresolvable}:8080/hook"), max_tries=100
    )
    service = make_service(db, closed_port_url(), config=config)
    with TestClient(create_app(service)) as client:
        client.post("/api/alertmanager", json=notification(group_of(1), group="tpot"))
        wait_until(
            lambda: rows(db, "SELECT attempts FROM outbox")[0]["attempts"] >= 3 if count(db, "outbox") else 0
        )
        (pending,) = deliveries(client, "pending")
        assert pending["last_error"] == "unreachable (DNS: name not resolved)"
        assert deliveries(client, "dead") == []
        assert service.metrics.value("triage_sink_failures_total", sink="hook", reason="unreachable") >= 3
        assert "invalid" not in json.dumps(pending)  # the sink's URL is a secret, never shown


def test_16_a_ten_thousand_series_answer_is_capped_in_the_stored_diagnosis(
    tmp_path: Path, prometheus_url: str
) -> None:
    """The session's Prometheus, with the KV replica query answered by 10,000 series instead."""
    seen_db = tmp_path / "seen.db"
    with PromStandIn(Reply.proxied(prometheus_url)) as watching:
        service = make_service(seen_db, watching.url)
        with TestClient(create_app(service)) as client:
            client.post("/api/alertmanager", json=notification(group_of(2), group="tpot"))
            wait_until(lambda: count(seen_db, "annotations", "state = 'annotated'") == 2, timeout=60)
        asked = {q for s in watching.seen for q in s.params.get("query", [])}
    (kv,) = {q for q in asked if q.startswith("max by (") and "kv_cache_usage_perc" in q}
    huge = [
        {
            "metric": {"instance": f"10.99.{i // 250}.{i % 250}:8000"},
            "values": [[AT - 60, "0.5"], [AT, "0.5"]],
        }
        for i in range(10_000)
    ]
    db = tmp_path / "t.db"
    with PromStandIn(Reply.proxied(prometheus_url), by_query={kv: [Reply.success(huge)]}) as stand_in:
        service = make_service(db, stand_in.url)
        with TestClient(create_app(service)) as client:
            client.post("/api/alertmanager", json=notification(group_of(2), group="tpot"))
            wait_until(lambda: count(db, "annotations", "state = 'annotated'") == 2, timeout=60)
            got = client.get("/api/annotations/1").json()
    problems = got["diagnosis"]["signal_problems"]
    capped = "capped: 2000 of 10000 series (the first 2000 by labels kept, 8000 dropped)"
    assert problems == {"kv_usage_ratio": f"partial data: {capped}"}
    assert "capped: 2000 of 10000 series" in got["summary"]
