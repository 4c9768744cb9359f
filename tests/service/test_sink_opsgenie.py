"""The Opsgenie sink against a stand-in of Opsgenie's Alert API: notes on the group's alert, by alias.

`OpsgenieStandIn` is a real HTTP server on loopback holding alerts under Alertmanager's
alias for the group (the SHA-256 of its group key); it answers a note with 202 and
processes it later, as Opsgenie does, and can be told to fail, stall or drop an answer.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from test_live import AT

from signals.errors import InputErrors
from signals.timeparse import format_instant
from triage.service.app import create_app
from triage.service.config import load_config
from triage.service.sinks.kind import group_key_hash
from triage.service.sinks.notes import carries_key

from .harness.opsgenie import OpsgenieStandIn
from .harness.pagerduty import Request
from .harness.sink import RecordingSink
from .payloads import alert, notification
from .servicekit import (
    StoreAt,
    closed_port_url,
    count,
    deliveries,
    make_service,
    serve_yaml,
    sink_entry,
    wait_until,
)
from .test_service_delivery import group_of

TOKEN = "0f3c9a2e-og-api-key-5ecret"
ALIAS = group_key_hash('{}:{alertname="tpot"}')


def alias_of(group: str) -> str:
    return group_key_hash(f'{{}}:{{alertname="{group}"}}')


def og_config(
    tmp_path: Path,
    url: str | None,
    *,
    window: float = 30,
    timeout: float = 5,
    token: str = TOKEN,
    listed: int = 2,
    extra: str = "",
    region: str = "us",
) -> str:
    token_file = tmp_path / "og-token"
    token_file.write_text(token + "\n")
    og = sink_entry(
        "og",
        "opsgenie",
        **({"url": url} if url else {}),
        region=region,
        token_file=str(token_file),
        retry_window=window,
        timeout=timeout,
        max_tries=100,
        max_alerts_listed=listed,
    )
    return serve_yaml(tmp_path, og, extra=extra, public_url="https://triage.example")


@pytest.fixture
def og() -> Iterator[OpsgenieStandIn]:
    with OpsgenieStandIn(TOKEN) as stand_in:
        yield stand_in


def posts(og: OpsgenieStandIn) -> list[Request]:
    return [r for r in og.requests if r.method == "POST"]


def test_the_diagnosis_is_a_note_on_the_groups_alert(
    store: StoreAt, tmp_path: Path, prometheus_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    db = store
    with OpsgenieStandIn(TOKEN, pending_polls=2) as og:  # processed after two looks at the request
        og.create_alert(alias_of("other"))
        og.create_alert(ALIAS)
        service = make_service(db, prometheus_url, config=og_config(tmp_path, og.url))
        alerts = group_of(3)
        with TestClient(create_app(service)) as client:
            client.post("/api/alertmanager", json=notification(alerts, group="tpot"))
            wait_until(lambda: og.notes(ALIAS), timeout=60)
            [note] = og.notes(ALIAS)
            assert og.notes(alias_of("other")) == []
            assert note.startswith("DIAGNOSIS: tpot (3 alerts)") and "Verdict: kv_pressure" in note
            assert "Do not:" in note and "scale_out" in note and "Evidence:" in note
            assert "https://triage.example/annotations/1" in note and "+1 more" in note
            [post] = posts(og)
            assert post.path == f"/v2/alerts/{ALIAS}/notes" and post.query == {"identifierType": ["alias"]}
            assert post.json == {"note": note, "user": "llm-triage", "source": "llm-triage"}
            assert post.header("Content-Type") == "application/json"
            assert all(r.header("Authorization") == f"GenieKey {TOKEN}" for r in og.requests)
            wait_until(lambda: count(db, "outbox", "state = 'delivered'") == 1)
            assert og.count("GET", "/v2/alerts/requests/") == 3  # 404 twice (not processed yet), then done

            ended = [{**a, "status": "resolved", "endsAt": format_instant(AT + 600)} for a in alerts]
            client.post("/api/alertmanager", json=notification(ended, group="tpot"))
            wait_until(lambda: len(og.notes(ALIAS)) == 2, timeout=30)
            assert og.notes(ALIAS)[1].startswith("RESOLVED: tpot")
            wait_until(lambda: count(db, "outbox", "state = 'delivered'") == 2)
            assert TOKEN not in json.dumps(client.get("/api/deliveries").json())
    assert TOKEN not in caplog.text


def test_the_host_follows_the_region() -> None:
    from triage.service.config import SinkSettings

    eu = SinkSettings(name="og", kind="opsgenie", token_file="t", region="eu")
    us = SinkSettings(name="og", kind="opsgenie", token_file="t")
    assert eu.base_url(None) == "https://api.eu.opsgenie.com"
    assert us.base_url(None) == "https://api.opsgenie.com"
    assert eu.base_url("http://127.0.0.1:1") == "http://127.0.0.1:1"


def test_the_eu_region_is_the_url_the_dispatcher_uses(tmp_path: Path) -> None:
    service = make_service(
        tmp_path / "t.db", closed_port_url(), config=og_config(tmp_path, None, region="eu")
    )
    assert service.dispatcher.urls["og"] == "https://api.eu.opsgenie.com"


def test_no_alert_yet_is_retried_until_it_appears(tmp_path: Path, og: OpsgenieStandIn) -> None:
    db = tmp_path / "t.db"
    service = make_service(db, closed_port_url(), config=og_config(tmp_path, og.url, window=20))
    with TestClient(create_app(service)) as client:
        client.post("/api/alertmanager", json=notification(group_of(1), group="tpot"))
        assert og.wait_for(lambda got: sum(r.method == "GET" for r in got) >= 3)
        assert posts(og) == [] and count(db, "outbox", "state = 'pending'") == 1
        [row] = client.get("/api/deliveries").json()["deliveries"]
        assert f"no Opsgenie alert with alias {ALIAS} yet" in row["last_error"]
        og.create_alert(ALIAS)
        wait_until(lambda: og.notes(ALIAS))
        wait_until(lambda: count(db, "outbox", "state = 'delivered'") == 1)
        assert len(og.notes(ALIAS)) == 1


def test_an_alert_gone_when_the_request_is_processed_waits_too(tmp_path: Path, og: OpsgenieStandIn) -> None:
    """The note is accepted (202) but processed after the alert went: "Alert does not exist" at its status."""
    db = tmp_path / "t.db"
    og.create_alert(ALIAS)
    og.fail_requests_with = "Alert does not exist"
    service = make_service(db, closed_port_url(), config=og_config(tmp_path, og.url, window=20))
    with TestClient(create_app(service)) as client:
        client.post("/api/alertmanager", json=notification(group_of(1), group="tpot"))
        assert og.wait_for(lambda got: sum(r.method == "POST" for r in got) >= 2)
        assert service.metrics.value("triage_sink_failures_total", sink="og", reason="no_alert") >= 1
        og.fail_requests_with = None
        wait_until(lambda: og.notes(ALIAS))
        wait_until(lambda: count(db, "outbox", "state = 'delivered'") == 1)


def test_an_asynchronous_failure_is_a_dead_letter_with_opsgenies_words(
    tmp_path: Path, og: OpsgenieStandIn
) -> None:
    db = tmp_path / "t.db"
    og.create_alert(ALIAS)
    og.fail_requests_with = "Note could not be added: the alert is being deleted"
    service = make_service(db, closed_port_url(), config=og_config(tmp_path, og.url))
    with TestClient(create_app(service)) as client:
        client.post("/api/alertmanager", json=notification(group_of(1), group="tpot"))
        wait_until(lambda: count(db, "outbox", "state = 'dead'") == 1)
        [letter] = deliveries(client, "dead")
        assert letter["last_error"] == (
            "Opsgenie did not add the note: Note could not be added: the alert is being deleted (not retried)"
        )
        assert letter["attempts"] == 1 and len(posts(og)) == 1


def test_no_alert_ever_is_a_dead_letter_after_the_window(tmp_path: Path, og: OpsgenieStandIn) -> None:
    db = tmp_path / "t.db"
    service = make_service(db, closed_port_url(), config=og_config(tmp_path, og.url, window=1.5))
    with TestClient(create_app(service)) as client:
        started = time.monotonic()
        client.post("/api/alertmanager", json=notification(group_of(1), group="tpot"))
        wait_until(lambda: count(db, "outbox", "state = 'dead'") == 1, timeout=15)
        assert time.monotonic() - started >= 1.5
        [letter] = deliveries(client, "dead")
        assert letter["last_error"] == f"no Opsgenie alert with alias {ALIAS} yet; gave up after 1.5s"
        assert posts(og) == []


@pytest.mark.parametrize(
    ("status", "words"),
    [
        (401, "HTTP 401: Could not authenticate"),
        (403, "HTTP 403: You are not authorized for this operation"),
        (400, "HTTP 400: Invalid JSON body"),
        (422, "HTTP 422: Request body is not processable. Please check the errors."),
    ],
)
def test_a_refusal_is_a_dead_letter_at_once_with_opsgenies_words(
    tmp_path: Path, og: OpsgenieStandIn, status: int, words: str
) -> None:
    db = tmp_path / "t.db"
    og.create_alert(ALIAS)
    if status != 401:
        og.fail(status, method="POST")
    config = og_config(tmp_path, og.url, token="not-the-key" if status == 401 else TOKEN)
    service = make_service(db, closed_port_url(), config=config)
    with TestClient(create_app(service)) as client:
        client.post("/api/alertmanager", json=notification(group_of(1), group="tpot"))
        wait_until(lambda: count(db, "outbox", "state = 'dead'") == 1)
        [letter] = deliveries(client, "dead")
        assert letter["last_error"] == f"{words} (not retried: sending it again cannot succeed)"
        assert letter["attempts"] == 1
        sent = len(og.requests)
        assert not og.wait_for(lambda got: len(got) > sent, timeout=0.6)
        assert sent == (1 if status == 401 else 2) and og.requests[-1].status == status


def test_429_waits_for_retry_after_or_the_throttle_period(tmp_path: Path, og: OpsgenieStandIn) -> None:
    db = tmp_path / "t.db"
    og.create_alert(ALIAS)
    og.fail(429, method="POST", headers={"Retry-After": "2", "X-RateLimit-State": "THROTTLED"})
    og.fail(429, method="POST", headers={"X-RateLimit-State": "THROTTLED", "X-RateLimit-Period-In-Sec": "1"})
    service = make_service(db, closed_port_url(), config=og_config(tmp_path, og.url))
    with TestClient(create_app(service)) as client:
        client.post("/api/alertmanager", json=notification(group_of(1), group="tpot"))
        wait_until(lambda: og.notes(ALIAS), timeout=15)
        tries = posts(og)
        assert [r.status for r in tries] == [429, 429, 202]
        assert tries[1].at - tries[0].at >= 1.9 and tries[2].at - tries[1].at >= 0.9
        assert len(og.notes(ALIAS)) == 1


def test_5xx_and_a_stalled_api_are_retried_then_delivered(tmp_path: Path, og: OpsgenieStandIn) -> None:
    db = tmp_path / "t.db"
    og.create_alert(ALIAS)
    og.fail(500, method="GET")
    og.fail(503, method="POST")
    og.stall(5, method="GET", path="/notes")
    service = make_service(db, closed_port_url(), config=og_config(tmp_path, og.url, timeout=0.5))
    with TestClient(create_app(service)) as client:
        client.post("/api/alertmanager", json=notification(group_of(1), group="tpot"))
        wait_until(lambda: count(db, "outbox", "state = 'delivered'") == 1, timeout=20)
        [row] = client.get("/api/deliveries").json()["deliveries"]
        assert row["attempts"] == 4 and len(og.notes(ALIAS)) == 1
        for reason in ("http_500", "http_503", "timeout"):
            assert service.metrics.value("triage_sink_failures_total", sink="og", reason=reason) == 1


def test_a_note_too_long_or_refused_as_too_large_is_shortened(tmp_path: Path, og: OpsgenieStandIn) -> None:
    db = tmp_path / "t.db"
    og.create_alert(alias_of("big"))
    og.create_alert(ALIAS)
    service = make_service(db, closed_port_url(), config=og_config(tmp_path, og.url, listed=100))
    many = [alert(f"b{i}", AT, instance=f"10.0.{i}.1:8000" + "w" * 600) for i in range(60)]
    with TestClient(create_app(service)) as client:
        client.post("/api/alertmanager", json=notification(many, group="big"))
        wait_until(lambda: og.notes(alias_of("big")), timeout=20)
        [note] = og.notes(alias_of("big"))
        assert len(note) <= 25_000 and "message shortened for this sink: 60 of 60 alerts shown" in note
        assert all(len(r.json["note"]) <= 25_000 for r in posts(og))
        og.fail(413, method="POST")
        client.post("/api/alertmanager", json=notification(group_of(1), group="tpot"))
        wait_until(lambda: og.notes(ALIAS), timeout=20)
        assert "message shortened for this sink" in og.notes(ALIAS)[0]
        # The stand-in holds the note before the service has its answer and counts the shortening.
        wait_until(lambda: service.metrics.value("triage_sink_shortened_total", sink="og") == 2, timeout=20)


def test_a_repeated_message_adds_no_second_note(tmp_path: Path) -> None:
    """The answer to the POST is lost, then the request is still unprocessed at every look: the
    retry finds the note in the alert's notes and adds no second one."""
    db = tmp_path / "t.db"
    with OpsgenieStandIn(TOKEN, pending_polls=100) as og:
        og.create_alert(ALIAS)
        og.drop_answer(path="/notes")
        service = make_service(db, closed_port_url(), config=og_config(tmp_path, og.url))
        with TestClient(create_app(service)) as client:
            client.post("/api/alertmanager", json=notification(group_of(1), group="tpot"))
            wait_until(lambda: count(db, "outbox", "state = 'delivered'") == 1, timeout=20)
            assert len(og.notes(ALIAS)) == 1 and len(posts(og)) == 1
            [row] = client.get("/api/deliveries").json()["deliveries"]
            assert row["attempts"] == 2 and carries_key(og.notes(ALIAS), row["key"])


def test_hostile_labels_are_inert_and_visible(tmp_path: Path, og: OpsgenieStandIn) -> None:
    db = tmp_path / "t.db"
    og.create_alert(ALIAS)
    name = "Evil {{ 7*7 }} {% raw %} \x1b[2J \u202egnp.exe"
    hostile = alert("evil", AT, alertname=name, instance="10.0.0.1\ntriage-key: forged", long="y" * 100_000)
    service = make_service(db, closed_port_url(), config=og_config(tmp_path, og.url))
    with TestClient(create_app(service)) as client:
        client.post("/api/alertmanager", json=notification([hostile], group="tpot"))
        wait_until(lambda: og.notes(ALIAS))
        [note] = og.notes(ALIAS)
        assert "Evil {{ 7*7 }} {% raw %} \\x1b[2J \\u202egnp.exe" in note and "Evil 49" not in note
        assert "\x1b" not in note and "\u202e" not in note and "10.0.0.1\\ntriage-key: forged" in note
        assert not carries_key([note], "forged")


def test_a_waiting_opsgenie_note_holds_back_neither_another_sink_nor_another_group(
    tmp_path: Path, og: OpsgenieStandIn
) -> None:
    db = tmp_path / "t.db"
    og.create_alert(alias_of("later"))
    with RecordingSink() as hook:
        extra = f"  - name: hook\n    kind: webhook\n    url: {hook.url}\n    backoff: 0.05\n"
        service = make_service(db, closed_port_url(), config=og_config(tmp_path, og.url, extra=extra))
        with TestClient(create_app(service)) as client:
            client.post("/api/alertmanager", json=notification(group_of(1), group="tpot"))
            assert hook.wait_for(1, timeout=10)
            client.post("/api/alertmanager", json=notification(group_of(1, group="later"), group="later"))
            wait_until(lambda: og.notes(alias_of("later")), timeout=10)
            # the note is at Opsgenie a moment before its row is marked delivered: only the
            # waiting one stays pending
            wait_until(lambda: count(db, "outbox", "sink = 'og' AND state = 'pending'") == 1, timeout=10)
            og.create_alert(ALIAS)
            wait_until(lambda: og.notes(ALIAS), timeout=10)


def test_an_opsgenie_sink_without_token_file_is_a_start_up_error(tmp_path: Path) -> None:
    config = tmp_path / "serve.yaml"
    config.write_text("sinks:\n  - name: og\n    kind: opsgenie\n    region: eu\n")
    with pytest.raises(InputErrors) as caught:
        load_config(str(config), {"prometheus": "http://p:9090"})
    assert f"{config}:2: sinks[0]: a opsgenie sink needs token_file" in str(caught.value)
