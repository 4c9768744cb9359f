"""The Grafana sink against a stand-in annotations API: one region per group episode,
found again by its tags, closed on resolve; what each answer leads to."""

from __future__ import annotations

import json
import logging
import re
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from test_live import AT

from signals.errors import InputErrors
from signals.timeparse import format_instant, parse_instant
from triage.service.app import create_app
from triage.service.config import SinkSettings, load_config
from triage.service.sinks import Renderer
from triage.service.sinks.grafana import annotate
from triage.service.sinks.kind import Delivery, group_key_hash

from .harness.grafana import GrafanaAPI
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

TOKEN = "glsa_SECRET-token-71c2"

EVALUATED = re.compile(r"(?<![\d:.-])49(?![\d:.-])")
"""`{{7*7}}` evaluated: 49 on its own (not inside a port, a time or another number)."""


def config(tmp_path: Path, grafana: GrafanaAPI, hook: RecordingSink | None = None, **opts: Any) -> str:
    token_file = tmp_path / "grafana-token"
    token_file.write_text(TOKEN + "\n")
    annotations = sink_entry(
        "grafana",
        "grafana",
        url=grafana.url,
        token_file=str(token_file),
        org_id=grafana.org_id,
        timeout=opts.get("timeout", 5),
        max_tries=opts.get("max_tries", 100),
        max_alerts_listed=opts.get("listed", 2),
        **({"dashboard_uid": opts["dashboard"]} if opts.get("dashboard") else {}),
    )
    hooks = [sink_entry("hook", "webhook", url=hook.url)] if hook is not None else []
    return serve_yaml(tmp_path, annotations, *hooks)


@pytest.fixture
def grafana() -> Iterator[GrafanaAPI]:
    with GrafanaAPI(TOKEN, org_id=3) as api:
        yield api


def group(n: int, name: str = "tpot", **labels: str) -> list[dict[str, Any]]:
    return [
        alert(f"{name}-{i}", AT, instance=f"10.42.0.{i + 1}:8000", symptom="tpot_slow", **labels)
        for i in range(n)
    ]


def test_one_region_per_episode_closed_on_resolve(
    store: StoreAt, tmp_path: Path, prometheus_url: str, grafana: GrafanaAPI, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    db = store
    service = make_service(
        db,
        prometheus_url,
        config=config(tmp_path, grafana, dashboard="llm-serving"),
        public_url="https://triage.example",
    )
    alerts = group(3)
    with TestClient(create_app(service)) as client:
        client.post("/api/alertmanager", json=notification(alerts, group="tpot"))
        wait_until(lambda: count(db, "outbox", "state = 'delivered'") == 1, timeout=60)
        diagnosis = client.get("/api/annotations/1").json()["diagnosis"]
        assert len(grafana.annotations) == 1
        made = grafana.annotations[1]
        onset = diagnosis.get("onset") or format_instant(AT)
        assert made["time"] == round(parse_instant(onset) * 1000)
        assert made["timeEnd"] == round(parse_instant(diagnosis["at"]) * 1000)
        assert made["timeEnd"] >= made["time"]
        assert made["dashboardUID"] == "llm-serving"
        hashed = group_key_hash('{}:{alertname="tpot"}')[:16]
        assert {"triage", f"triage-group:{hashed}", "triage-episode:1", "symptom:tpot_slow"} <= set(
            made["tags"]
        )
        assert "cause:kv_pressure" in made["tags"] and "triage-state:firing" in made["tags"]
        assert any(t.startswith("fleet:") for t in made["tags"])
        assert all("," not in t and len(t) <= 64 for t in made["tags"])
        assert "<b>FIRING: tpot</b>" in made["text"] and "kv_pressure" in made["text"]
        assert '<a href="https://triage.example/annotations/1">' in made["text"]
        post = next(r for r in grafana.received if r.method == "POST")
        assert post.header("Authorization") == f"Bearer {TOKEN}" and post.header("X-Grafana-Org-Id") == "3"
        lookup = next(r for r in grafana.received if r.method == "GET")
        assert "dashboardUID=llm-serving" in lookup.path and "type=annotation" in lookup.path

        ended = [{**a, "status": "resolved", "endsAt": format_instant(AT + 600)} for a in alerts]
        client.post("/api/alertmanager", json=notification(ended, group="tpot"))
        wait_until(lambda: count(db, "outbox", "state = 'delivered'") == 2, timeout=30)
        assert len(grafana.annotations) == 1  # the same region, closed
        closed = grafana.annotations[1]
        assert closed["time"] == made["time"] and closed["timeEnd"] == round((AT + 600) * 1000)
        assert "triage-state:resolved" in closed["tags"] and "<b>RESOLVED: tpot</b>" in closed["text"]
        assert [r.method for r in grafana.received] == ["GET", "POST", "GET", "PATCH"]
        listed = client.get("/api/deliveries").json()
    assert TOKEN not in json.dumps(listed) and TOKEN not in caplog.text


def message(kind: str = "diagnosis", episode: int = 1) -> dict[str, Any]:
    start = format_instant(AT)
    return {
        "kind": kind,
        "group_key": '{}:{alertname="g"}',
        "episode": episode,
        "alerts": [
            {
                "alertname": "G",
                "starts_at": start,
                "ends_at": format_instant(AT + 300) if kind == "resolved" else None,
                "labels": {},
                "duration_seconds": None,
            }
        ],
        "diagnosis": {
            "symptom": "ttft_slow",
            "cause": None,
            "at": format_instant(AT + 60),
            "fleet": {"a": "x,y"},
        },
    }


def deliver(api: GrafanaAPI, msg: dict[str, Any], dashboard: str | None = None, token: str = TOKEN) -> Any:
    sink = SinkSettings(
        name="g",
        kind="grafana",
        url=api.url,
        token_file="/t",
        org_id=api.org_id,
        dashboard_uid=dashboard,
        timeout=2,
    )
    body = Renderer().body(sink, msg)
    return annotate(Delivery(sink, api.url, token, "key-1", msg, body))


def test_repeats_update_and_a_resolve_without_a_region_adds_it_closed(grafana: GrafanaAPI) -> None:
    assert deliver(grafana, message()).ok
    assert deliver(grafana, message()).ok  # at-least-once: the same message again
    assert len(grafana.annotations) == 1
    posted = json.loads(next(r.body for r in grafana.received if r.method == "POST"))
    assert "dashboardUID" not in posted  # organisation-wide without dashboard_uid
    assert posted["time"] == AT * 1000 and posted["timeEnd"] == (AT + 60) * 1000
    assert "fleet:x;y" in posted["tags"]
    # A late "changed" after the resolve never reopens the region.
    assert deliver(grafana, message("resolved")).ok
    assert deliver(grafana, message("changed")).ok
    assert len(grafana.annotations) == 1 and grafana.annotations[1]["timeEnd"] == (AT + 300) * 1000
    assert "triage-state:resolved" in grafana.annotations[1]["tags"]

    # The diagnosis of episode 2 never arrived (a dead letter): its resolve adds a closed region.
    assert deliver(grafana, message("resolved", episode=2)).ok
    second = grafana.annotations[2]
    assert second["time"] == AT * 1000 and second["timeEnd"] == (AT + 300) * 1000
    assert "triage-episode:2" in second["tags"] and "triage-state:resolved" in second["tags"]

    # A dashboard's annotation and an organisation-wide one of the same episode are told apart.
    grafana.annotations.clear()
    assert deliver(grafana, message(episode=3)).ok
    assert deliver(grafana, message(episode=3), dashboard="other").ok
    assert [a["dashboardUID"] for a in grafana.annotations.values()] == ["", "other"]


@pytest.mark.parametrize(
    ("status", "words"),
    [
        (400, "bad request data"),
        (401, "Unauthorized"),
        (
            403,
            "You'll need additional permissions to perform this action. Permissions needed: "
            "annotations:create",
        ),
        (404, "Not found"),
    ],
)
def test_a_refusal_is_a_dead_letter_at_once_with_grafana_words(
    tmp_path: Path, grafana: GrafanaAPI, caplog: pytest.LogCaptureFixture, status: int, words: str
) -> None:
    caplog.set_level(logging.INFO)
    grafana.fail_with(status, body=json.dumps({"message": words}))
    db = tmp_path / "t.db"
    service = make_service(db, closed_port_url(), config=config(tmp_path, grafana))
    with TestClient(create_app(service)) as client:
        client.post("/api/alertmanager", json=notification(group(1), group="tpot"))
        wait_until(lambda: count(db, "outbox", "state = 'dead'") == 1)
        dead = deliveries(client, "dead")
        assert not grafana.wait_for(2, timeout=0.5)
    assert len(grafana.received) == 1 and not grafana.annotations
    assert dead[0]["attempts"] == 1 and dead[0]["last_error"].startswith(f"HTTP {status}: {words[:40]}")
    assert TOKEN not in json.dumps(dead) and TOKEN not in caplog.text


def test_a_wrong_token_is_refused_by_the_api(grafana: GrafanaAPI) -> None:
    attempt = deliver(grafana, message(), token="glsa_wrong")
    assert not attempt.ok and not attempt.retry and attempt.error.startswith("HTTP 401: Unauthorized")
    assert "glsa_wrong" not in attempt.error and len(grafana.received) == 1


def test_429_5xx_and_stalls_are_retried(tmp_path: Path, grafana: GrafanaAPI) -> None:
    db = tmp_path / "t.db"
    grafana.fail_with(429, retry_after="2", times=1, body='{"message": "Too many requests"}')
    service = make_service(db, closed_port_url(), config=config(tmp_path, grafana, timeout=1))
    with TestClient(create_app(service)) as client:
        client.post("/api/alertmanager", json=notification(group(1, "g1"), group="g1"))
        wait_until(lambda: len(grafana.annotations) == 1, timeout=15)
        first, second = grafana.received[:2]
        assert first.status == 429 and second.at - first.at >= 1.9

        grafana.clear()
        grafana.fail_with(503, times=2)
        client.post("/api/alertmanager", json=notification(group(1, "g2"), group="g2"))
        wait_until(lambda: len(grafana.annotations) == 2, timeout=15)
        assert [r.status for r in grafana.received] == [503, 503, 200, 200]

        grafana.clear()
        grafana.stall(10, times=1)
        started = time.monotonic()
        client.post("/api/alertmanager", json=notification(group(1, "g3"), group="g3"))
        wait_until(lambda: len(grafana.annotations) == 3, timeout=15)
        assert time.monotonic() - started < 8
        wait_until(lambda: count(db, "outbox", "state = 'delivered'") == 3)
    assert service.metrics.value("triage_sink_failures_total", sink="grafana", reason="timeout") >= 1


def test_413_shortens_the_text(tmp_path: Path) -> None:
    db = tmp_path / "t.db"
    with GrafanaAPI(TOKEN, org_id=3, max_body=4000) as small:
        service = make_service(db, closed_port_url(), config=config(tmp_path, small, listed=20))
        with TestClient(create_app(service)) as client:
            client.post(
                "/api/alertmanager", json=notification(group(12, alertname="T" + "x" * 300), group="tpot")
            )
            wait_until(lambda: count(db, "outbox", "state = 'delivered'") == 1)
        assert next(r.status for r in small.received if r.method == "POST") == 413
        assert (
            len(small.annotations) == 1 and "message shortened for this sink" in small.annotations[1]["text"]
        )
    assert service.metrics.value("triage_sink_shortened_total", sink="grafana") == 1


def test_hostile_labels_are_escaped_text_and_tags(tmp_path: Path, grafana: GrafanaAPI) -> None:
    db = tmp_path / "t.db"
    evil = alert(
        "evil",
        AT,
        alertname='Evil <script>alert(1)</script> {{7*7}} "q" \\ a\nb \x1b[2J \u202e',
        instance="<img src=x onerror=alert(1)>",
        symptom="tpot_slow",
    )
    service = make_service(
        db, closed_port_url(), config=config(tmp_path, grafana), public_url="https://t.example"
    )
    with TestClient(create_app(service)) as client:
        client.post("/api/alertmanager", json=notification([evil], group="ev,il"))
        wait_until(lambda: len(grafana.annotations) == 1)
    text = grafana.annotations[1]["text"]
    assert "<script>" not in text and "&lt;script&gt;alert(1)&lt;/script&gt;" in text
    assert "<img" not in text and "&lt;img src=x onerror=alert(1)&gt;" in text
    assert "{{7*7}}" in text and not EVALUATED.search(text)
    assert "&quot;q&quot; \\ a b \\x1b[2J \\u202e" in text
    assert "\x1b" not in text and "\u202e" not in text
    assert all("," not in t for t in grafana.annotations[1]["tags"])


def test_a_failing_grafana_holds_back_no_other_sink(tmp_path: Path, grafana: GrafanaAPI) -> None:
    grafana.fail_with(503)
    db = tmp_path / "t.db"
    with RecordingSink() as hook:
        service = make_service(db, closed_port_url(), config=config(tmp_path, grafana, hook))
        with TestClient(create_app(service)) as client:
            started = time.monotonic()
            client.post("/api/alertmanager", json=notification(group(1), group="tpot"))
            assert hook.wait_for(1, timeout=10) and time.monotonic() - started < 5
            assert grafana.wait_for(3, timeout=10) and not grafana.annotations


def test_a_grafana_sink_without_a_token_is_a_start_up_error(tmp_path: Path) -> None:
    path = tmp_path / "serve.yaml"
    path.write_text("sinks:\n  - name: g\n    kind: grafana\n    url: http://grafana:3000\n")
    with pytest.raises(InputErrors) as caught:
        load_config(str(path), {"prometheus": "http://p:9090"})
    assert "token_file" in str(caught.value) and "grafana" in str(caught.value)
