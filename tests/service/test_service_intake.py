"""The intake: authentication, limits, bad input, deduplication, resolve, heartbeat, truncation.

In process (Starlette's TestClient drives the real ASGI app and its lifespan) against
a Prometheus address where nothing listens: nothing here needs signals, and the
intake must not care whether Prometheus answers. Numbers in the test names refer to
reliability.md §6.
"""

from __future__ import annotations

import base64
import json
import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from signals.errors import InputErrors
from triage.service.app import create_app
from triage.service.runtime import Service

from .payloads import alert, notification
from .servicekit import PAYLOADS, StoreAt, closed_port_url, count, make_service, rows, wait_until

TOKEN = "s3cret-token-9f2"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
T0 = 1_795_000_000.0


@pytest.fixture
def served(store: StoreAt) -> Iterator[tuple[TestClient, Service, StoreAt]]:
    db = store
    service = make_service(db, closed_port_url(), token=TOKEN, max_body_bytes=64 * 1024, max_alerts=100)
    with TestClient(create_app(service)) as client:
        yield client, service, db


def post(client: TestClient, payload: Any, headers: dict[str, str] | None = None) -> Any:
    return client.post("/api/alertmanager", json=payload, headers=AUTH if headers is None else headers)


def test_1_v4_contract_round_trip(served: tuple[TestClient, Service, Path]) -> None:
    client, _, db = served
    payload = notification(
        [alert("fa", T0, instance="a"), alert("fb", T0 + 5, instance="b")],
        truncated=7,
        notification_reason="first notification",
        routeLabels={"team": "llm"},
        somethingNew={"nested": [1, 2]},
    )
    r = post(client, payload)
    assert r.status_code == 200, r.text
    assert r.json()["new"] == 2
    stored = rows(
        db, "SELECT fingerprint, starts_at, ends_at, status, truncated FROM annotations ORDER BY id"
    )
    assert [(s["fingerprint"], s["starts_at"], s["ends_at"], s["status"]) for s in stored] == [
        ("fa", T0, None, "firing"),
        ("fb", T0 + 5, None, "firing"),
    ]
    assert {s["truncated"] for s in stored} == {7}
    one = client.get("/api/annotations/1").json()
    assert one["ends_at"] is None and one["truncated_alerts"] == 7 and one["status"] == "firing"


def test_real_alertmanager_payloads_are_accepted(served: tuple[TestClient, Service, Path]) -> None:
    client, _, db = served
    assert post(client, PAYLOADS[0]).json()["new"] == 2
    second = post(client, PAYLOADS[1]).json()
    assert second["duplicates"] == 2 and second["resolved"] == 1
    closed = rows(
        db,
        "SELECT status, ends_at - starts_at AS lasted FROM annotations WHERE fingerprint = ?",
        ["dbd9a0ec021158be"],
    )[0]
    assert closed["status"] == "resolved" and closed["lasted"] == 8.0


@pytest.mark.parametrize(
    ("headers", "query"),
    [
        ({}, ""),
        ({"Authorization": "Bearer wrong"}, ""),
        ({}, f"?token={TOKEN}"),
        ({"Authorization": f"Basic {base64.b64encode(f'x:{TOKEN}'.encode()).decode()}"}, ""),
        ({"Authorization": TOKEN}, ""),
    ],
    ids=["none", "wrong", "in-query-string", "basic-instead-of-bearer", "no-scheme"],
)
def test_9_auth_is_required_and_nothing_is_stored_without_it(
    served: tuple[TestClient, Service, Path], headers: dict[str, str], query: str
) -> None:
    client, _, db = served
    r = client.post(f"/api/alertmanager{query}", json=PAYLOADS[0], headers=headers)
    assert r.status_code == 401
    assert TOKEN not in r.text
    assert count(db, "annotations") == 0 and count(db, "groups") == 0


def test_9_token_never_reaches_logs_store_or_api(
    served: tuple[TestClient, Service, Path], caplog: pytest.LogCaptureFixture
) -> None:
    client, service, db = served
    caplog.set_level(logging.DEBUG)
    client.post("/api/alertmanager", json=PAYLOADS[0], headers={"Authorization": "Bearer nope"})
    assert post(client, PAYLOADS[0]).status_code == 200
    texts = [
        client.get(p).text
        for p in (
            "/api/annotations",
            "/api/annotations/1",
            "/metrics",
            "/readyz",
            "/openapi.json",
            "/annotations/1",
        )
    ]
    assert all(TOKEN not in t for t in texts)
    assert TOKEN not in caplog.text
    assert TOKEN not in repr(service.secrets) and TOKEN not in repr(service.config)
    if isinstance(db, Path):
        files = list(db.parent.glob(f"{db.name}*"))
        assert files and all(TOKEN.encode() not in path.read_bytes() for path in files)
    else:
        tables = ("groups", "work", "annotations", "outbox", "meta")
        stored = [tuple(r) for table in tables for r in rows(db, f"SELECT * FROM {table}")]
        assert stored and TOKEN not in repr(stored)


def test_basic_auth_from_config(tmp_path: Path) -> None:
    (tmp_path / "pw").write_text("hunter2\n")
    config = tmp_path / "serve.yaml"
    config.write_text(f"auth:\n  basic_auth:\n    username: am\n    password_file: {tmp_path / 'pw'}\n")
    service = make_service(tmp_path / "t.db", closed_port_url(), config=str(config))
    good = {"Authorization": "Basic " + base64.b64encode(b"am:hunter2").decode()}
    bad = {"Authorization": "Basic " + base64.b64encode(b"am:hunter3").decode()}
    with TestClient(create_app(service)) as client:
        assert post(client, PAYLOADS[0], bad).status_code == 401
        assert post(client, PAYLOADS[0], {"Authorization": "Basic %%%"}).status_code == 401
        assert post(client, PAYLOADS[0], good).status_code == 200


BAD_BODIES: list[tuple[str, bytes]] = [
    ("empty", b""),
    ("not-json", b"{not json"),
    ("json-list", b"[1, 2]"),
    ("version-3", json.dumps({**PAYLOADS[0], "version": "3"}).encode()),
    ("no-version", json.dumps({k: v for k, v in PAYLOADS[0].items() if k != "version"}).encode()),
    ("alerts-not-a-list", json.dumps({**PAYLOADS[0], "alerts": {"a": 1}}).encode()),
    (
        "missing-labels",
        json.dumps({**PAYLOADS[0], "alerts": [{**PAYLOADS[0]["alerts"][0], "labels": None}]}).encode(),
    ),
    (
        "label-not-string",
        json.dumps(
            {**PAYLOADS[0], "alerts": [{**PAYLOADS[0]["alerts"][0], "labels": {"alertname": 5}}]}
        ).encode(),
    ),
    (
        "bad-time",
        json.dumps(
            {**PAYLOADS[0], "alerts": [{**PAYLOADS[0]["alerts"][0], "startsAt": "yesterday"}]}
        ).encode(),
    ),
    (
        "zero-start",
        json.dumps(
            {**PAYLOADS[0], "alerts": [{**PAYLOADS[0]["alerts"][0], "startsAt": "0001-01-01T00:00:00Z"}]}
        ).encode(),
    ),
    ("bad-status", json.dumps({**PAYLOADS[0], "status": "maybe"}).encode()),
    ("negative-truncated", json.dumps({**PAYLOADS[0], "truncatedAlerts": -1}).encode()),
    ("deep-nesting", b'{"version": "4", "x": ' + b"[" * 100_000 + b"]" * 100_000 + b"}"),
    ("invalid-utf8", b'{"version": "4", "receiver": "\xff\xfe"}'),
]


@pytest.mark.parametrize("body", [b for _, b in BAD_BODIES], ids=[n for n, _ in BAD_BODIES])
def test_7_malformed_input_is_400_with_a_reason_and_nothing_is_stored(
    served: tuple[TestClient, Service, Path], body: bytes
) -> None:
    client, service, db = served
    r = client.post("/api/alertmanager", content=body, headers={**AUTH, "Content-Type": "application/json"})
    assert r.status_code in (400, 413), r.text
    assert r.json()["error"]
    assert count(db, "annotations") == 0 and count(db, "groups") == 0 and count(db, "work") == 0
    assert post(client, PAYLOADS[0]).status_code == 200  # the process keeps serving
    assert (
        service.metrics.value("triage_webhook_requests_total", outcome="bad_payload") >= 1
        or r.status_code == 413
    )


def test_8_body_over_the_cap_is_413_without_reading_it_all(served: tuple[TestClient, Service, Path]) -> None:
    client, _, db = served
    big = b'{"version": "4", "pad": "' + b"x" * (20 * 1024 * 1024) + b'"}'
    r = client.post("/api/alertmanager", content=big, headers={**AUTH, "Content-Type": "application/json"})
    assert r.status_code == 413 and "max_alerts" in r.json()["error"]
    assert count(db, "annotations") == 0
    assert client.get("/healthz").status_code == 200


def test_too_many_alerts_is_413(served: tuple[TestClient, Service, Path]) -> None:
    client, _, db = served
    many = notification([alert(f"f{i}", T0, instance=str(i)) for i in range(101)])
    r = post(client, many)
    assert r.status_code == 413 and "101 alerts" in r.json()["error"]
    assert count(db, "annotations") == 0


def test_4_repeats_and_ha_duplicates_make_one_annotation_per_episode(
    served: tuple[TestClient, Service, Path],
) -> None:
    client, service, db = served
    payload = notification([alert("fa", T0, instance="a"), alert("fb", T0, instance="b")])
    peer = {**payload, "externalURL": "http://alertmanager-1:9093"}
    for _ in range(25):
        assert post(client, payload).status_code == 200
        assert post(client, peer).status_code == 200
    assert count(db, "annotations") == 2
    assert count(db, "work") == 1  # one group at one moment: one diagnosis for both
    assert {r["seen"] for r in rows(db, "SELECT seen FROM annotations")} == {50}
    assert service.metrics.value("triage_webhook_duplicates_total") == 98
    # A later episode of the same alert (same fingerprint, new startsAt) is a new annotation.
    assert post(client, notification([alert("fa", T0 + 3600, instance="a")])).json()["new"] == 1
    assert count(db, "annotations") == 3


def test_5_snapshot_semantics_and_repeat(served: tuple[TestClient, Service, Path]) -> None:
    client, _, db = served
    a, b, c = (
        alert("fa", T0, instance="a"),
        alert("fb", T0, instance="b"),
        alert("fc", T0 + 600, instance="c"),
    )
    assert post(client, notification([a, b])).json()["new"] == 2
    assert post(client, notification([a, b, c], notification_reason="new alerts added")).json()["new"] == 1
    again = post(client, notification([a, b, c], notification_reason="repeat interval elapsed")).json()
    assert again["new"] == 0 and again["duplicates"] == 3
    assert count(db, "annotations") == 3
    assert count(db, "work") == 2  # {a, b} share a moment; c started ten minutes later
    d = alert("fd", T0 + 120, instance="d")
    assert post(client, notification([a, b, c, d])).json()["new"] == 1
    assert count(db, "work") == 2  # two minutes after a: within the coalescing window, same diagnosis


def test_6_resolve_before_firing_ends_resolved(served: tuple[TestClient, Service, Path]) -> None:
    client, _, db = served
    firing = alert("fa", T0, instance="a")
    done = alert("fa", T0, status="resolved", ends_at=T0 + 90, instance="a")
    assert post(client, notification([done])).status_code == 200
    assert post(client, notification([firing])).status_code == 200
    row = rows(db, "SELECT status, ends_at FROM annotations")
    assert len(row) == 1 and row[0]["status"] == "resolved" and row[0]["ends_at"] == T0 + 90


def test_24_heartbeat_is_not_diagnosed_and_is_exposed(served: tuple[TestClient, Service, Path]) -> None:
    client, _, db = served
    assert client.get("/readyz").json()["heartbeat"]["last_seen"] is None
    beat = notification([alert("wd", T0, alertname="Watchdog")], group="Watchdog")
    assert post(client, beat).json()["heartbeats"] == 1
    assert count(db, "annotations") == 0 and count(db, "work") == 0
    ready = client.get("/readyz").json()
    assert ready["heartbeat"]["last_seen"] is not None and ready["heartbeat"]["age_seconds"] < 60
    metrics = client.get("/metrics").text
    line = next(
        x for x in metrics.splitlines() if x.startswith("triage_heartbeat_last_seen_timestamp_seconds ")
    )
    assert float(line.split()[1]) > 1.7e9
    assert "triage_heartbeats_total 1" in metrics


def test_readyz_reports_prometheus_without_requiring_it(served: tuple[TestClient, Service, Path]) -> None:
    client, _, _ = served
    r = client.get("/readyz")
    assert r.status_code == 200
    body = r.json()
    assert body["ready"] and body["store_writable"] and body["playbooks_loaded"]
    assert body["prometheus_reachable"] is False


def test_openapi_publishes_the_webhook_schema(served: tuple[TestClient, Service, Path]) -> None:
    client, _, _ = served
    spec = client.get("/openapi.json").json()
    schema = spec["paths"]["/api/alertmanager"]["post"]["requestBody"]["content"]["application/json"][
        "schema"
    ]
    assert set(schema["required"]) >= {"version", "status", "groupKey", "alerts"}
    assert "fingerprint" in schema["properties"]["alerts"]["items"]["properties"]
    for path in ("/api/annotations", "/api/annotations/{annotation_id}", "/healthz", "/readyz", "/metrics"):
        assert path in spec["paths"]


def test_read_api_filters(served: tuple[TestClient, Service, Path]) -> None:
    client, _, _ = served
    post(client, notification([alert("fa", T0, instance="a"), alert("fb", T0 + 600, instance="b")]))
    post(client, notification([alert("fc", T0, alertname="LLMErrors", instance="c")], group="errs"))
    post(
        client,
        notification(
            [
                alert("fa", T0, status="resolved", ends_at=T0 + 60, instance="a"),
                alert("fb", T0 + 600, instance="b"),
            ]
        ),
    )

    def ids(query: str) -> list[str]:
        r = client.get(f"/api/annotations{query}")
        assert r.status_code == 200, r.text
        return sorted(a["fingerprint"] for a in r.json()["annotations"])

    assert ids("") == ["fa", "fb", "fc"]
    assert ids("?status=resolved") == ["fa"]
    assert ids("?alertname=LLMErrors") == ["fc"]
    assert ids(f"?since={T0 + 300}") == ["fb"]
    assert ids("?until=2026-11-01T00:00:00Z") == []
    assert ids("?symptom=nothing") == []
    assert client.get("/api/annotations?since=yesterday").status_code == 400
    assert client.get("/api/annotations/999").status_code == 404
    assert client.get("/annotations/999").status_code == 404


def test_metrics_are_valid_exposition(served: tuple[TestClient, Service, Path]) -> None:
    client, _, _ = served
    post(client, PAYLOADS[0])
    post(client, PAYLOADS[0])
    text = client.get("/metrics").text
    samples = {}
    for line in text.splitlines():
        if line.startswith("#"):
            assert line.startswith(("# HELP ", "# TYPE "))
            continue
        name, value = line.rsplit(" ", 1)
        samples[name] = float(value)
    assert samples["triage_webhook_alerts_received_total"] == 4
    assert samples["triage_webhook_duplicates_total"] == 2
    assert samples['triage_webhook_requests_total{outcome="accepted"}'] == 2
    assert samples["triage_annotations"] == 2
    for name in (
        "triage_backlog",
        "triage_dead_letters",
        "triage_outbox_pending",
        "triage_diagnosis_seconds_count",
        "triage_signal_fetches_total",
        "triage_sink_failures_total",
    ):
        assert name in samples


def test_14_unreachable_prometheus_is_stored_as_unavailable(served: tuple[TestClient, Service, Path]) -> None:
    client, _, db = served
    post(client, PAYLOADS[0])
    wait_until(lambda: count(db, "annotations", "state = 'unavailable'") == 2, timeout=30)
    got = client.get("/api/annotations/1").json()
    assert got["signals"].startswith("unavailable: ") and "refused" in got["signals"]
    assert got["diagnosis"] is None and "Traceback" not in got["summary"]
    assert count(db, "work", "state = 'pending' AND attempts = 1") == 1  # queued for a retry
    assert 'triage_signals_unavailable_total{reason="unreachable"} 1' in client.get("/metrics").text


def test_a_group_firing_again_after_it_resolved_is_a_new_episode(
    served: tuple[TestClient, Service, Path],
) -> None:
    client, _, db = served
    post(client, notification([alert("fa", T0, instance="a")]))
    post(client, notification([alert("fa", T0, status="resolved", ends_at=T0 + 30, instance="a")]))
    wait_until(lambda: count(db, "groups", "closed = 1") == 1)
    # The same labels fire again a minute later: within the coalescing window of the
    # first episode's work, but a new episode gets its own diagnosis.
    assert post(client, notification([alert("fa", T0 + 60, instance="a")])).json()["new"] == 1
    assert count(db, "work") == 2
    assert rows(db, "SELECT episode, closed FROM groups")[0][:] == (2, 0)


def test_an_unopenable_store_is_a_configuration_error(tmp_path: Path) -> None:
    with pytest.raises(InputErrors, match=r"store: cannot open .*missing/t\.db"):
        make_service(tmp_path / "missing" / "t.db", closed_port_url())


def test_an_episode_twice_in_one_notification_is_stored_once(
    served: tuple[TestClient, Service, StoreAt],
) -> None:
    client, _, db = served
    twice = alert("twice", T0, instance="a")
    answer = post(client, notification([twice, alert("once", T0, instance="b"), dict(twice)]))
    assert answer.status_code == 200
    assert (answer.json()["new"], answer.json()["duplicates"]) == (2, 1)
    seen = {r["fingerprint"]: r["seen"] for r in rows(db, "SELECT fingerprint, seen FROM annotations")}
    assert seen == {"twice": 2, "once": 1}
    again = post(client, notification([twice, dict(twice)]))
    assert (again.json()["new"], again.json()["duplicates"]) == (0, 2)
    assert rows(db, "SELECT seen FROM annotations WHERE fingerprint = 'twice'")[0]["seen"] == 4
