"""What a sink's answer leads to, for the sinks that POST to a URL (a JSON webhook, Slack).

Each status is answered by a real HTTP receiver (`RecordingSink`) and the outcome read
from the store and the API: a 4xx that cannot succeed is a dead letter at once with the
sink's own words; 429 waits for `Retry-After`; 5xx and timeouts are retried until
delivered; a failing sink holds back neither another sink nor another group. The sinks
with an API of their own (PagerDuty, Opsgenie, Teams, Grafana) have the same matrix
against their stand-ins in `test_sink_<kind>.py`.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from triage.service.app import create_app
from triage.service.runtime import Service

from .harness.sink import RecordingSink
from .payloads import notification
from .servicekit import closed_port_url, count, deliveries, make_service, serve_yaml, sink_entry, wait_until
from .test_service_delivery import group_of

KINDS = ("webhook", "slack")


def config(tmp_path: Path, *sinks: tuple[str, str, str], timeout: float = 2.0) -> str:
    """Sinks (name, kind, url) with fast retries and a short timeout."""
    return serve_yaml(
        tmp_path,
        *(
            sink_entry(name, kind, url=url, max_backoff=0.2, max_tries=20, timeout=timeout)
            for name, kind, url in sinks
        ),
    )


def serve(tmp_path: Path, *sinks: tuple[str, str, str], timeout: float = 2.0) -> Service:
    return make_service(
        tmp_path / "t.db", closed_port_url(), config=config(tmp_path, *sinks, timeout=timeout)
    )


@pytest.mark.parametrize("status", [400, 401, 403, 404])
@pytest.mark.parametrize("kind", KINDS)
def test_a_4xx_that_cannot_succeed_is_a_dead_letter_at_once_with_the_sinks_words(
    tmp_path: Path, kind: str, status: int
) -> None:
    with RecordingSink() as sink:
        sink.fail_with(status, body=f'{{"ok": false, "error": "refused_{status}"}}')
        service = serve(tmp_path, ("out", kind, sink.url))
        with TestClient(create_app(service)) as client:
            client.post("/api/alertmanager", json=notification(group_of(1), group="g"))
            (dead,) = wait_until(lambda: deliveries(client, "dead"))
            time.sleep(0.5)  # room for a retry that must not come
            assert len(sink.received) == 1
            assert dead["attempts"] == 1
            assert dead["last_error"] == (
                f"HTTP {status}: refused_{status} (not retried: sending it again cannot succeed)"
            )
            assert sink.url not in dead["last_error"]
            assert (
                service.metrics.value("triage_sink_failures_total", sink="out", reason=f"http_{status}") == 1
            )


@pytest.mark.parametrize("kind", KINDS)
def test_429_waits_for_retry_after_then_delivers(tmp_path: Path, kind: str) -> None:
    with RecordingSink() as sink:
        if kind == "slack":
            sink.reply_with(200, "ok", {"Content-Type": "text/plain"})
        sink.fail_with(429, retry_after="2", times=1, body='{"ok": false, "error": "rate_limited"}')
        service = serve(tmp_path, ("out", kind, sink.url))
        with TestClient(create_app(service)) as client:
            client.post("/api/alertmanager", json=notification(group_of(1), group="g"))
            wait_until(lambda: count(tmp_path / "t.db", "outbox", "state = 'delivered'") == 1)
            first, second = sink.received
            assert (first.status, second.status) == (429, 200)
            # Backoff alone would have tried again within 0.2 s.
            assert second.at - first.at >= 1.9
            assert first.header("Idempotency-Key") == second.header("Idempotency-Key")


@pytest.mark.parametrize("status", [500, 502, 503, 504, 408])
def test_a_5xx_or_408_is_retried_until_delivered(tmp_path: Path, status: int) -> None:
    with RecordingSink() as sink:
        sink.fail_with(status, times=3)
        service = serve(tmp_path, ("out", "webhook", sink.url))
        with TestClient(create_app(service)) as client:
            client.post("/api/alertmanager", json=notification(group_of(1), group="g"))
            wait_until(lambda: count(tmp_path / "t.db", "outbox", "state = 'delivered'") == 1)
            assert [r.status for r in sink.received] == [status, status, status, 200]
            assert deliveries(client, "dead") == []


def test_a_sink_that_does_not_answer_times_out_and_is_tried_again(tmp_path: Path) -> None:
    with RecordingSink() as sink:
        sink.stall(3.0, times=1)
        service = serve(tmp_path, ("out", "webhook", sink.url), timeout=0.5)
        with TestClient(create_app(service)) as client:
            client.post("/api/alertmanager", json=notification(group_of(1), group="g"))
            wait_until(lambda: count(tmp_path / "t.db", "outbox", "state = 'delivered'") == 1)
            assert len(sink.received) >= 2
            assert service.metrics.value("triage_sink_failures_total", sink="out", reason="timeout") >= 1


def test_a_failing_sink_holds_back_neither_another_sink_nor_another_group(tmp_path: Path) -> None:
    with RecordingSink() as broken, RecordingSink() as healthy:
        broken.fail_with(503)
        service = serve(tmp_path, ("broken", "webhook", broken.url), ("healthy", "webhook", healthy.url))
        with TestClient(create_app(service)) as client:
            client.post("/api/alertmanager", json=notification(group_of(1, group="a"), group="A"))
            client.post("/api/alertmanager", json=notification(group_of(1, group="b"), group="B"))
            # The healthy sink has both groups while the broken one still fails.
            assert healthy.wait_for(lambda got: len({r.json["group_key"] for r in got}) == 2, timeout=10)
            # The broken sink keeps trying both groups: a retried message holds back only its own.
            assert broken.wait_for(lambda got: len({r.json["group_key"] for r in got}) == 2, timeout=10)
            broken.recover()
            wait_until(lambda: count(tmp_path / "t.db", "outbox", "state = 'delivered'") == 4)
            assert deliveries(client, "dead") == []
