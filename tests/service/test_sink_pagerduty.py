"""The PagerDuty sink against a stand-in of PagerDuty's REST API: notes on the group's incident.

The service runs in process (TestClient); `PagerDutyStandIn` is a real HTTP server on
loopback holding incidents under Alertmanager's key for the group (the SHA-256 of its
group key) and recording every request, and can be told to fail, stall, or drop an
answer. Prometheus is the session's backfilled one where the diagnosis's content
matters, else a closed port (the message then says the signals are unavailable).
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
from triage.service.config import SinkSettings, load_config
from triage.service.sinks.kind import Delivery, group_key_hash
from triage.service.sinks.notes import carries_key
from triage.service.sinks.pagerduty import PAGERDUTY

from .harness.pagerduty import PagerDutyStandIn, Request
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

TOKEN = "u+pd-REST-key-5ecret-9f8e7d"
FROM = "triage-bot@example.com"
KEY = group_key_hash('{}:{alertname="tpot"}')


def key_of(group: str) -> str:
    return group_key_hash(f'{{}}:{{alertname="{group}"}}')


def pd_config(
    tmp_path: Path,
    url: str,
    *,
    window: float = 30,
    timeout: float = 5,
    token: str = TOKEN,
    listed: int = 2,
    extra: str = "",
) -> str:
    token_file = tmp_path / "pd-token"
    token_file.write_text(token + "\n")
    pd = sink_entry(
        "pd",
        "pagerduty",
        url=url,
        token_file=str(token_file),
        from_email=FROM,
        retry_window=window,
        timeout=timeout,
        max_tries=100,
        max_alerts_listed=listed,
    )
    return serve_yaml(tmp_path, pd, extra=extra, public_url="https://triage.example")


@pytest.fixture
def pd() -> Iterator[PagerDutyStandIn]:
    with PagerDutyStandIn(TOKEN) as stand_in:
        yield stand_in


def posts(pd: PagerDutyStandIn) -> list[Request]:
    return [r for r in pd.requests if r.method == "POST"]


def test_the_diagnosis_is_a_note_on_the_groups_incident_and_resolved_on_the_resolved_one(
    store: StoreAt,
    tmp_path: Path,
    prometheus_url: str,
    pd: PagerDutyStandIn,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG)
    db = store
    other = pd.open_incident(key_of("other"))
    incident = pd.open_incident(KEY)
    service = make_service(db, prometheus_url, config=pd_config(tmp_path, pd.url))
    alerts = group_of(3)
    with TestClient(create_app(service)) as client:
        client.post("/api/alertmanager", json=notification(alerts, group="tpot"))
        wait_until(lambda: pd.notes(incident), timeout=60)
        [note] = pd.notes(incident)
        assert pd.notes(other) == []
        assert note.startswith("DIAGNOSIS: tpot (3 alerts)")
        assert "Verdict: kv_pressure" in note and "Symptom: tpot_slow" in note
        assert "Evidence:" in note and "Do not:" in note and "scale_out" in note
        assert "First actions:" in note
        assert "https://triage.example/annotations/1" in note and "+1 more" in note
        assert note.splitlines()[-1].startswith("triage-key: ")

        found = next(r for r in pd.requests if r.method == "GET" and r.path == "/incidents")
        assert found.query["incident_key"] == [KEY] and found.query["date_range"] == ["all"]
        assert set(found.query["statuses[]"]) == {"triggered", "acknowledged", "resolved"}
        for r in pd.requests:
            assert r.header("Authorization") == f"Token token={TOKEN}"
            assert r.header("Accept") == "application/vnd.pagerduty+json;version=2"
        [post] = posts(pd)
        assert post.path == f"/incidents/{incident}/notes" and post.header("From") == FROM
        assert post.header("Content-Type") == "application/json" and post.json == {"note": {"content": note}}

        # PagerDuty resolves the incident when Alertmanager resolves; the note still goes on it.
        pd.set_status(incident, "resolved")
        ended = [{**a, "status": "resolved", "endsAt": format_instant(AT + 600)} for a in alerts]
        client.post("/api/alertmanager", json=notification(ended, group="tpot"))
        wait_until(lambda: len(pd.notes(incident)) == 2, timeout=30)
        resolved = pd.notes(incident)[1]
        assert resolved.startswith("RESOLVED: tpot") and "The group has resolved" in resolved
        assert "First actions:" not in resolved and "lasted 600s" in resolved
        wait_until(lambda: count(db, "outbox", "state = 'delivered'") == 2)
        listed = client.get("/api/deliveries").json()["deliveries"]
        assert all(d["state"] == "delivered" and d["attempts"] == 1 for d in listed)
        assert TOKEN not in json.dumps(listed)
    assert TOKEN not in caplog.text


def test_no_incident_yet_is_retried_until_it_appears(tmp_path: Path, pd: PagerDutyStandIn) -> None:
    db = tmp_path / "t.db"
    service = make_service(db, closed_port_url(), config=pd_config(tmp_path, pd.url, window=20))
    with TestClient(create_app(service)) as client:
        client.post("/api/alertmanager", json=notification(group_of(1), group="tpot"))
        assert pd.wait_for(lambda got: sum(r.path == "/incidents" for r in got) >= 3)
        assert posts(pd) == [] and count(db, "outbox", "state = 'pending'") == 1
        [row] = client.get("/api/deliveries").json()["deliveries"]
        assert f"no PagerDuty incident with incident_key {KEY} yet" in row["last_error"]
        assert service.metrics.value("triage_sink_failures_total", sink="pd", reason="no_incident") >= 3
        incident = pd.open_incident(KEY)  # Alertmanager pages after the diagnosis
        wait_until(lambda: pd.notes(incident))
        wait_until(lambda: count(db, "outbox", "state = 'delivered'") == 1)
        assert len(pd.notes(incident)) == 1 and "signals unavailable" in pd.notes(incident)[0]


def test_no_incident_ever_is_a_dead_letter_after_the_window(tmp_path: Path, pd: PagerDutyStandIn) -> None:
    db = tmp_path / "t.db"
    service = make_service(db, closed_port_url(), config=pd_config(tmp_path, pd.url, window=1.5))
    with TestClient(create_app(service)) as client:
        started = time.monotonic()
        client.post("/api/alertmanager", json=notification(group_of(1), group="tpot"))
        wait_until(lambda: count(db, "outbox", "state = 'dead'") == 1, timeout=15)
        assert time.monotonic() - started >= 1.5
        [letter] = deliveries(client, "dead")
        assert (
            letter["last_error"] == f"no PagerDuty incident with incident_key {KEY} yet; gave up after 1.5s"
        )
        assert letter["attempts"] >= 2 and posts(pd) == []


@pytest.mark.parametrize(
    ("status", "setup", "words"),
    [
        (401, "wrong-token", "HTTP 401: Authentication required"),
        (403, "fault", "HTTP 403: Access Denied"),
        (
            400,
            "no-from",
            "HTTP 400: Invalid Input Provided: A valid user email must be given in the From header",
        ),
        (404, "notes-gone", "HTTP 404: Not Found"),
    ],
)
def test_a_refusal_is_a_dead_letter_at_once_with_pagerdutys_words(
    tmp_path: Path, pd: PagerDutyStandIn, status: int, setup: str, words: str
) -> None:
    db = tmp_path / "t.db"
    pd.open_incident(KEY)
    config = pd_config(tmp_path, pd.url, token="not-the-key" if setup == "wrong-token" else TOKEN)
    if setup == "fault":
        pd.fail(403, path="/notes", method="POST")
    elif setup == "notes-gone":
        pd.fail(404, path="/notes", method="GET")
    elif setup == "no-from":
        pd.fail(400, path="/notes", method="POST", body=pd.error(400, errors=[
            "A valid user email must be given in the From header"]))  # fmt: skip
    service = make_service(db, closed_port_url(), config=config)
    with TestClient(create_app(service)) as client:
        client.post("/api/alertmanager", json=notification(group_of(1), group="tpot"))
        wait_until(lambda: count(db, "outbox", "state = 'dead'") == 1)
        [letter] = deliveries(client, "dead")
        assert letter["last_error"] == f"{words} (not retried: sending it again cannot succeed)"
        assert letter["attempts"] == 1
        sent = len(pd.requests)
        assert not pd.wait_for(lambda got: len(got) > sent, timeout=0.6)  # no retry
        assert sent == (1 if setup == "wrong-token" else 2 if setup == "notes-gone" else 3)
        assert pd.requests[-1].status == status


def test_a_token_echoed_by_the_far_end_is_never_shown(
    tmp_path: Path, pd: PagerDutyStandIn, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    db = tmp_path / "t.db"
    pd.open_incident(KEY)
    pd.fail(400, method="POST", body=pd.error(400, errors=[f"bad request for Token token={TOKEN}"]))
    service = make_service(db, closed_port_url(), config=pd_config(tmp_path, pd.url))
    with TestClient(create_app(service)) as client:
        client.post("/api/alertmanager", json=notification(group_of(1), group="tpot"))
        wait_until(lambda: count(db, "outbox", "state = 'dead'") == 1)
        [letter] = deliveries(client, "dead")
        assert "<token>" in letter["last_error"] and TOKEN not in json.dumps(letter)
        assert TOKEN not in client.get("/metrics").text
    assert TOKEN not in caplog.text and "<token>" in caplog.text


def test_429_waits_for_retry_after_or_ratelimit_reset_then_delivers(
    tmp_path: Path, pd: PagerDutyStandIn
) -> None:
    db = tmp_path / "t.db"
    incident = pd.open_incident(KEY)
    pd.fail(429, method="POST", headers={"Retry-After": "2", "ratelimit-remaining": "0"})
    pd.fail(
        429,
        method="POST",
        headers={"ratelimit-limit": "960", "ratelimit-remaining": "0", "ratelimit-reset": "1"},
    )
    service = make_service(db, closed_port_url(), config=pd_config(tmp_path, pd.url))
    with TestClient(create_app(service)) as client:
        client.post("/api/alertmanager", json=notification(group_of(1), group="tpot"))
        wait_until(lambda: pd.notes(incident), timeout=15)
        tries = [r for r in pd.requests if r.path == "/incidents"]
        assert len(tries) == 3
        assert tries[1].at - tries[0].at >= 1.9  # Retry-After: 2
        assert tries[2].at - tries[1].at >= 0.9  # ratelimit-reset: 1, PagerDuty's own header
        assert [r.status for r in posts(pd)] == [429, 429, 200]
        assert len(pd.notes(incident)) == 1
        wait_until(lambda: count(db, "outbox", "state = 'delivered'") == 1)


def test_5xx_and_a_stalled_api_are_retried_then_delivered(tmp_path: Path, pd: PagerDutyStandIn) -> None:
    db = tmp_path / "t.db"
    incident = pd.open_incident(KEY)
    pd.fail(500, path="/incidents", method="GET")
    pd.fail(503, method="POST")
    pd.stall(5, path="/notes", method="GET")
    service = make_service(db, closed_port_url(), config=pd_config(tmp_path, pd.url, timeout=0.5))
    with TestClient(create_app(service)) as client:
        client.post("/api/alertmanager", json=notification(group_of(1), group="tpot"))
        wait_until(lambda: pd.notes(incident), timeout=20)
        wait_until(lambda: count(db, "outbox", "state = 'delivered'") == 1)
        [row] = client.get("/api/deliveries").json()["deliveries"]
        assert row["attempts"] == 4 and len(pd.notes(incident)) == 1
        for reason in ("http_500", "http_503", "timeout"):
            assert service.metrics.value("triage_sink_failures_total", sink="pd", reason=reason) == 1


def test_a_note_too_long_or_refused_as_too_large_is_shortened(tmp_path: Path, pd: PagerDutyStandIn) -> None:
    db = tmp_path / "t.db"
    big = pd.open_incident(key_of("big"))
    small = pd.open_incident(KEY)
    service = make_service(db, closed_port_url(), config=pd_config(tmp_path, pd.url, listed=100))
    wordy = "w" * 600
    many = [
        alert(f"b{i}", AT, alertname="LLMTPOTP99High", instance=f"10.0.{i}.1:8000" + wordy) for i in range(60)
    ]
    with TestClient(create_app(service)) as client:
        client.post("/api/alertmanager", json=notification(many, group="big"))
        wait_until(lambda: pd.notes(big), timeout=20)
        [note] = pd.notes(big)
        assert len(note) <= 25_000 and "message shortened for this sink: 60 of 60 alerts shown" in note
        assert all(len(r.json["note"]["content"]) <= 25_000 for r in posts(pd))  # never sent too long
        pd.fail(413, method="POST")
        client.post("/api/alertmanager", json=notification(group_of(1), group="tpot"))
        wait_until(lambda: pd.notes(small), timeout=20)
        assert "message shortened for this sink" in pd.notes(small)[0]
        # The stand-in holds the note before the service has its answer and counts the shortening.
        wait_until(lambda: service.metrics.value("triage_sink_shortened_total", sink="pd") == 2, timeout=20)
        wait_until(lambda: count(db, "outbox", "state = 'delivered'") == 2)


def test_a_repeated_message_adds_no_second_note(tmp_path: Path, pd: PagerDutyStandIn) -> None:
    """The answer to the POST is lost (as when the sender dies after it): the retry finds the note."""
    db = tmp_path / "t.db"
    incident = pd.open_incident(KEY)
    pd.drop_answer(path="/notes")
    service = make_service(db, closed_port_url(), config=pd_config(tmp_path, pd.url))
    with TestClient(create_app(service)) as client:
        client.post("/api/alertmanager", json=notification(group_of(1), group="tpot"))
        wait_until(lambda: count(db, "outbox", "state = 'delivered'") == 1, timeout=20)
        notes = pd.notes(incident)
        assert len(notes) == 1 and len(posts(pd)) == 1
        [row] = client.get("/api/deliveries").json()["deliveries"]
        assert row["attempts"] == 2

    # The same message delivered twice more, as two replicas would: still one note.
    message = {"group_key": '{}:{alertname="tpot"}', "alerts": []}
    sink = SinkSettings(name="pd", kind="pagerduty", url=pd.url, token_file="x", from_email=FROM)
    again = Delivery(sink, pd.url, TOKEN, row["key"], message, b"body")
    assert PAGERDUTY.deliver(again).ok and PAGERDUTY.deliver(again).ok
    assert pd.notes(incident) == notes and len(posts(pd)) == 1
    fresh = Delivery(sink, pd.url, TOKEN, "another-key", message, b"body")
    assert PAGERDUTY.deliver(fresh).ok and PAGERDUTY.deliver(fresh).ok
    assert len(pd.notes(incident)) == 2 and carries_key(pd.notes(incident)[1:], "another-key")


def test_hostile_labels_are_inert_and_visible(tmp_path: Path, pd: PagerDutyStandIn) -> None:
    db = tmp_path / "t.db"
    incident = pd.open_incident(KEY)
    name = "Evil {{ 7*7 }} {% raw %} \x1b[2J \u202egnp.exe"
    hostile = alert("evil", AT, alertname=name, instance="10.0.0.1\ntriage-key: forged", long="y" * 100_000)
    service = make_service(db, closed_port_url(), config=pd_config(tmp_path, pd.url))
    with TestClient(create_app(service)) as client:
        client.post("/api/alertmanager", json=notification([hostile], group="tpot"))
        wait_until(lambda: pd.notes(incident))
        [note] = pd.notes(incident)
        assert "Evil {{ 7*7 }} {% raw %} \\x1b[2J \\u202egnp.exe" in note and "Evil 49" not in note
        assert "\x1b" not in note and "\u202e" not in note
        assert "10.0.0.1\\ntriage-key: forged" in note
        assert [line for line in note.splitlines() if line.startswith("triage-key")] == [
            note.splitlines()[-1]
        ]
        assert not carries_key([note], "forged")
        assert len(note) < 25_000


def test_a_waiting_pagerduty_note_holds_back_neither_another_sink_nor_another_group(
    tmp_path: Path, pd: PagerDutyStandIn
) -> None:
    db = tmp_path / "t.db"
    later = pd.open_incident(key_of("later"))
    with RecordingSink() as hook:
        extra = f"  - name: hook\n    kind: webhook\n    url: {hook.url}\n    backoff: 0.05\n"
        service = make_service(db, closed_port_url(), config=pd_config(tmp_path, pd.url, extra=extra))
        with TestClient(create_app(service)) as client:
            client.post("/api/alertmanager", json=notification(group_of(1), group="tpot"))
            assert hook.wait_for(1, timeout=10)  # the webhook is not held back by PagerDuty's wait
            assert pd.wait_for(lambda got: sum(r.path == "/incidents" for r in got) >= 2)
            client.post("/api/alertmanager", json=notification(group_of(1, group="later"), group="later"))
            wait_until(lambda: pd.notes(later), timeout=10)  # nor is another group's note
            assert count(db, "outbox", "sink = 'pd' AND state = 'pending'") == 1
            waiting = pd.open_incident(KEY)
            wait_until(lambda: pd.notes(waiting), timeout=10)
            assert hook.wait_for(2, timeout=10)


def test_a_pagerduty_sink_without_token_file_or_from_email_is_a_start_up_error(tmp_path: Path) -> None:
    config = tmp_path / "serve.yaml"
    config.write_text(
        "sinks:\n"
        "  - name: pd\n    kind: pagerduty\n    from_email: a@example.com\n"
        "  - name: pd2\n    kind: pagerduty\n    token_file: /nonexistent/pd-token\n"
    )
    with pytest.raises(InputErrors) as caught:
        load_config(str(config), {"prometheus": "http://p:9090"})
    text = str(caught.value)
    assert f"{config}:2: sinks[0]: a pagerduty sink needs token_file" in text
    assert f"{config}:5: sinks[1]: a pagerduty sink needs from_email" in text
    token = tmp_path / "token"
    token.write_text(TOKEN)
    config.write_text(
        f"sinks:\n  - name: pd\n    kind: pagerduty\n    token_file: {token}\n    from_email: a@example.com\n"
    )
    loaded = load_config(str(config), {"prometheus": "http://p:9090"})
    assert loaded.config.sinks[0].base_url(None) == "https://api.pagerduty.com"
    assert TOKEN not in repr(loaded.config) and TOKEN not in repr(loaded)
