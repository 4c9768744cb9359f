"""The Microsoft Teams sink against a stand-in Workflows webhook: the card, its escaping,
and what each answer leads to (202 delivered; 400/401/403/404 a dead letter at once;
429 waits for Retry-After; 5xx and timeouts retried; 413 shortened)."""

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

from signals.timeparse import format_instant
from triage.service.app import create_app
from triage.service.config import SinkSettings
from triage.service.sinks import Renderer
from triage.service.sinks.kind import Delivery
from triage.service.sinks.teams import MAX_CARD_BYTES, post_card, teams_text

from .harness.sink import RecordingSink
from .harness.teams import TeamsWorkflow
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

EVALUATED = re.compile(r"(?<![\d:.-])49(?![\d:.-])")
"""`{{7*7}}` evaluated: 49 on its own (not inside a port, a time or another number)."""


def config(tmp_path: Path, teams: TeamsWorkflow, hook: RecordingSink | None = None, **opts: Any) -> str:
    """serve.yaml with a Teams sink whose URL is in a file, and optionally a plain webhook."""
    url_file = tmp_path / "teams-url"
    url_file.write_text(teams.webhook_url + "\n")
    card = sink_entry(
        "teams",
        "teams",
        url_file=str(url_file),
        timeout=opts.get("timeout", 5),
        max_tries=opts.get("max_tries", 100),
        max_alerts_listed=opts.get("listed", 2),
    )
    hooks = [sink_entry("hook", "webhook", url=hook.url)] if hook is not None else []
    return serve_yaml(tmp_path, card, *hooks, extra=opts.get("extra", ""))


@pytest.fixture
def teams() -> Iterator[TeamsWorkflow]:
    with TeamsWorkflow() as workflow:
        yield workflow


def group(n: int, name: str = "tpot", **labels: str) -> list[dict[str, Any]]:
    return [
        alert(f"{name}-{i}", AT, instance=f"10.42.0.{i + 1}:8000", symptom="tpot_slow", **labels)
        for i in range(n)
    ]


def texts(card: dict[str, Any]) -> list[str]:
    out = []
    for item in card["body"]:
        if item["type"] == "TextBlock":
            out.append(item["text"])
        elif item["type"] == "FactSet":
            out += [f"{f['title']}: {f['value']}" for f in item["facts"]]
    return out


def test_the_card_carries_the_diagnosis_and_the_resolve(
    store: StoreAt,
    tmp_path: Path,
    prometheus_url: str,
    teams: TeamsWorkflow,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG)
    db = store
    service = make_service(
        db, prometheus_url, config=config(tmp_path, teams), public_url="https://triage.example"
    )
    alerts = group(3)
    with TestClient(create_app(service)) as client:
        client.post("/api/alertmanager", json=notification(alerts, group="tpot"))
        assert teams.wait_for(1, timeout=60)
        first = teams.received[0]
        assert first.status == 202 and first.header("Content-Type") == "application/json"
        assert first.header("Idempotency-Key")
        message = first.json
        assert message["type"] == "message" and len(message["attachments"]) == 1
        card = message["attachments"][0]["content"]
        assert card["type"] == "AdaptiveCard" and card["version"] == "1.4"
        lines = texts(card)
        assert lines[0] == "🚨 FIRING: tpot"
        assert any(
            t.startswith("**Verdict:** kv\\_pressure") or t.startswith("**Verdict:** kv_pressure")
            for t in lines
        )
        assert "Symptom: tpot_slow" in lines
        evidence = lines[lines.index("**Evidence**") + 1 : lines.index("**First actions**")]
        assert evidence and all(len(e) > 3 for e in evidence)
        actions = lines[lines.index("**First actions**") + 1 :]
        assert actions[0].startswith("1. ")
        do_not = [t for t in lines if t.startswith("⛔ ")]
        assert any("scale\\_out" in t or "scale_out" in t for t in do_not)
        assert all(": " in t for t in do_not)  # each with its reason
        assert "+1 more" in lines  # max_alerts_listed 2 of 3
        opens = {a["title"]: a["url"] for a in card["actions"]}
        assert opens["Open the diagnosis"] == "https://triage.example/annotations/1"
        assert any("(https://triage.example/annotations/1)" in t for t in lines)

        ended = [{**a, "status": "resolved", "endsAt": format_instant(AT + 600)} for a in alerts]
        client.post("/api/alertmanager", json=notification(ended, group="tpot"))
        assert teams.wait_for(2, timeout=30)
        resolved = texts(teams.cards()[1])
        assert resolved[0] == "✅ RESOLVED: tpot"
        assert "**First actions**" not in resolved and not any(t.startswith("⛔") for t in resolved)
        assert any("lasted 600s" in t for t in resolved)
        wait_until(lambda: count(db, "outbox", "state = 'delivered'") == 2)
        listed = client.get("/api/deliveries").json()
    keys = [r.header("Idempotency-Key") for r in teams.received]
    assert len(set(keys)) == 2
    assert "SECRET-SIG" not in json.dumps(listed) and "SECRET-SIG" not in caplog.text


@pytest.mark.parametrize(
    ("status", "code", "words"),
    [
        (400, "InvalidRequestContent", "The request content was invalid"),
        (401, "DirectApiAuthorizationRequired", "The request must be authenticated"),
        (403, "AuthorizationFailed", "The caller is not allowed to run this workflow"),
        (404, "TriggerNotFound", "The workflow trigger could not be found"),
    ],
)
def test_a_refusal_is_a_dead_letter_at_once_with_teams_words(
    tmp_path: Path, teams: TeamsWorkflow, caplog: pytest.LogCaptureFixture, status: int, code: str, words: str
) -> None:
    caplog.set_level(logging.INFO)
    teams.fail_teams(status, code, words)
    db = tmp_path / "t.db"
    service = make_service(db, closed_port_url(), config=config(tmp_path, teams))
    with TestClient(create_app(service)) as client:
        client.post("/api/alertmanager", json=notification(group(1), group="tpot"))
        wait_until(lambda: count(db, "outbox", "state = 'dead'") == 1)
        dead = deliveries(client, "dead")
        assert not teams.wait_for(2, timeout=0.5)
    assert len(teams.received) == 1
    assert dead[0]["attempts"] == 1 and dead[0]["last_error"].startswith(f"HTTP {status}: {words}")
    assert "not retried" in dead[0]["last_error"]
    assert "SECRET-SIG" not in json.dumps(dead) and "SECRET-SIG" not in caplog.text


def test_429_waits_for_retry_after_and_5xx_and_stalls_are_retried(
    tmp_path: Path, teams: TeamsWorkflow
) -> None:
    db = tmp_path / "t.db"
    teams.fail_teams(429, "TooManyRequests", "Rate limit is exceeded", retry_after="2", times=1)
    service = make_service(db, closed_port_url(), config=config(tmp_path, teams, timeout=1))
    with TestClient(create_app(service)) as client:

        def client_post(alerts: list[dict[str, Any]], name: str) -> None:
            assert client.post("/api/alertmanager", json=notification(alerts, group=name)).status_code == 200

        client_post(group(1, "g1"), "g1")
        assert teams.wait_for(lambda got: any(r.status == 202 for r in got), timeout=15)
        first, second = teams.received[:2]
        assert first.status == 429 and second.status == 202
        assert second.at - first.at >= 1.9  # the Retry-After, not the 0.05s backoff

        teams.clear()
        teams.fail_teams(503, "ServiceUnavailable", "try later", times=2)
        client_post(group(1, "g2"), "g2")
        assert teams.wait_for(lambda got: any(r.status == 202 for r in got), timeout=15)
        assert [r.status for r in teams.received] == [503, 503, 202]

        teams.clear()
        teams.stall(10, times=1)
        started = time.monotonic()
        client_post(group(1, "g3"), "g3")
        assert teams.wait_for(lambda got: any(r.status == 202 and r.json for r in got[1:]), timeout=15)
        assert time.monotonic() - started < 8  # the stalled try timed out after 1s
        wait_until(lambda: count(db, "outbox", "state = 'delivered'") == 3)
        keys = {r.header("Idempotency-Key") for r in teams.received}
        assert len(keys) == 1  # the timed-out try and its retry are one message
    assert service.metrics.value("triage_sink_failures_total", sink="teams", reason="timeout") >= 1


def test_413_shortens_the_card(tmp_path: Path) -> None:
    db = tmp_path / "t.db"
    with TeamsWorkflow(max_body=5000) as small:
        long = {"alertname": "TPOT" + "x" * 300}
        service = make_service(db, closed_port_url(), config=config(tmp_path, small, listed=20))
        with TestClient(create_app(service)) as client:
            client.post("/api/alertmanager", json=notification(group(12, **long), group="tpot"))
            wait_until(lambda: count(db, "outbox", "state = 'delivered'") == 1)
        statuses = [r.status for r in small.received]
        assert statuses[0] == 413 and statuses[-1] == 202
        lines = texts(small.cards()[0])
        assert any("message shortened for this sink" in t for t in lines)
        assert len(small.received[-1].body) <= 5000
    assert service.metrics.value("triage_sink_shortened_total", sink="teams") == 1


def test_a_card_over_the_teams_limit_is_never_sent() -> None:
    """Teams fails such a card in the flow, after answering 202: it is shortened before."""
    sink = SinkSettings(name="t", kind="teams", url=closed_port_url())
    attempt = post_card(Delivery(sink, sink.url or "", None, "k", {}, b"{" + b" " * MAX_CARD_BYTES + b"}"))
    assert attempt.too_large and not attempt.ok and "over" in attempt.error


HOSTILE = {
    "link": "**[click](http://evil.example)**",
    "script": "<script>alert(1)</script>",
    "template": "{{7*7}} {{DATE(2017-02-14T06:00:00Z, SHORT)}}",
    "lines": "one\n\n- two\n1. three",
    "control": "a\x1b[2Jb\u202ec",
    "quotes": 'say "hi" \\ back\\slash',
}


def test_hostile_labels_stay_text_in_a_valid_card(tmp_path: Path, teams: TeamsWorkflow) -> None:
    db = tmp_path / "t.db"
    evil = alert(
        "evil",
        AT,
        alertname="Evil **[x](http://evil.example)**",
        instance="[i](http://evil.example)\x1b",
        **HOSTILE,
    )
    folder = tmp_path / "templates"
    folder.mkdir()
    # A user template that "forgets" to escape: finalize does it anyway.
    (folder / "mine.json.j2").write_text(
        '{"type": "message", "attachments": [{"contentType": "application/vnd.microsoft.card.adaptive",'
        ' "content": {"type": "AdaptiveCard", "version": "1.4", "body": ['
        "{% for k, v in alerts[0].labels.items() %}"
        '{"type": "TextBlock", "text": "{{ k }}={{ v }}"},'
        "{% endfor %}"
        '{"type": "TextBlock", "text": "end"}], "x": {{ alerts[0].labels | tojson }}}}]}'
    )
    path = config(tmp_path, teams)
    Path(path).write_text(
        Path(path)
        .read_text()
        .replace("  - name: teams\n", "  - name: teams\n    template: mine.json.j2\n", 1)
        + f"  - name: teams2\n    kind: teams\n    url: {teams.webhook_url}\ntemplates: {folder}\n"
    )
    service = make_service(db, closed_port_url(), config=path, public_url="https://triage.example")
    with TestClient(create_app(service)) as client:
        client.post("/api/alertmanager", json=notification([evil], group="evil"))
        assert teams.wait_for(lambda got: len([r for r in got if r.status == 202]) == 2, timeout=15)
    assert all(r.status == 202 for r in teams.received)  # both cards parse and are cards
    everything = [t for card in teams.cards() for t in texts(card)]
    joined = "\n".join(everything)
    # No link but the service's own: every ] from a label is escaped, so only ours opens a target.
    targets = re.findall(r"(?<!\\)\]\(([^)]*)\)", joined)
    assert targets and all(t.startswith("https://triage.example/") for t in targets), targets
    assert "\\*\\*\\[click\\](http://evil.example)\\*\\*" in joined
    assert "\\{\\{7\\*7\\}\\}" in joined and not EVALUATED.search(joined)
    assert "\\{\\{DATE(" in joined
    assert "\x1b" not in joined and "\u202e" not in joined
    assert "\\\\x1b" in joined and "\\\\u202e" in joined
    assert 'say "hi" \\\\ back\\\\slash' in joined
    assert not any(t.lstrip().startswith(("- ", "1.")) for t in everything if "two" in t)
    assert "\n" not in "".join(t for t in everything if "three" in t)
    assert service.metrics.value("triage_template_errors_total", sink="teams") == 0


def test_a_failing_teams_sink_holds_back_no_other_sink(tmp_path: Path, teams: TeamsWorkflow) -> None:
    teams.fail_teams(503, "ServiceUnavailable", "down")
    db = tmp_path / "t.db"
    with RecordingSink() as hook:
        service = make_service(db, closed_port_url(), config=config(tmp_path, teams, hook))
        with TestClient(create_app(service)) as client:
            started = time.monotonic()
            client.post("/api/alertmanager", json=notification(group(1), group="tpot"))
            assert hook.wait_for(1, timeout=10)
            assert time.monotonic() - started < 5
            assert teams.wait_for(3, timeout=10)  # still failing, still retried
            assert not teams.accepted()


def test_teams_text_neutralises_markdown() -> None:
    assert teams_text("**[a](http://x)**") == "\\*\\*\\[a\\](http://x)\\*\\*"
    assert teams_text("kv_pressure") == "kv_pressure"
    assert teams_text("_it_") == "\\_it\\_"
    assert teams_text("- item") == "\\- item"
    assert teams_text("1. first") == "1\\. first"
    assert teams_text("a\nb\x00\u202e") == "a b\\\\x00\\\\u202e"
    body = Renderer().body(
        SinkSettings(name="t", kind="teams", url="http://x"), {"alerts": [], "diagnosis": {}}
    )
    assert json.loads(body)["attachments"][0]["contentType"] == "application/vnd.microsoft.card.adaptive"
