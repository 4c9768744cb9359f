"""A finished diagnosis's message is the same whether its headline came with the result or was
read back from the store.

The diagnosing thread or process renders the headline (`briefed`), so finishing the work under
its group's lock only reads the alerts; a result that comes back without one (a diagnosing
process that died) has it read back from the store, as every message did before. Both stores
are fed the same notifications and results, one with the headline and one without, and every
message they queue must be the same, byte for byte: a first diagnosis, a changed one, signals
unavailable, and the group's `resolved`. Run on SQLite and on a real PostgreSQL.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable, Iterator
from functools import partial
from pathlib import Path
from typing import Any

import pytest
from conftest import ROOT

from signals.fixture import load_fixture
from triage.core.graph import TriageGraph
from triage.core.walk import diagnose
from triage.replay import fixture_symptom
from triage.service.messages import briefed, build_message
from triage.service.payload import parse_notification
from triage.service.store import Store, WorkResult

from .payloads import alert, notification

T0 = 1_760_000_000.0
STEP = 60.0


def symptom(labels: Any) -> tuple[str, str]:
    return ("ttft_slow", "alert label")


@pytest.fixture(scope="module")
def results(graph: TriageGraph) -> dict[str, WorkResult]:
    """A real diagnosis, another with a different top cause, and signals unavailable."""
    fixture = load_fixture(str(ROOT / "fixtures" / "replica-down-queue-growth.yaml"))
    chosen, source = fixture_symptom(fixture, None, graph.knowledge)
    d = diagnose(graph, fixture.frame, chosen, fixture.at, source=source)
    assert d.top is not None and d.first_actions and d.forbidden
    first = WorkResult(
        f"{d.symptom}:{d.top.cause}",
        d.symptom,
        d.top.cause,
        d.to_json(),
        "summary",
        "h",
        None,
        1,
        scope="fleet llm/model (from the alert's labels)",
    )
    runner_up = d.causes[1].cause
    changed = dataclasses.replace(first, signature=f"{d.symptom}:{runner_up}", cause=runner_up)
    unavailable = WorkResult(
        "unavailable", d.symptom, None, None, "signals unavailable (timeout)", "t", "timeout", 1, "timeout"
    )
    return {"first": first, "changed": changed, "unavailable": unavailable}


def _store(url: str) -> Store:
    return Store(
        url, ["hook"], builder=partial(build_message, public_url="https://triage.example", label_limit=80)
    )


def _messages(store: Store) -> list[tuple[str, str]]:
    with store.read() as db:
        return [(r["kind"], r["message"]) for r in db.execute("SELECT kind, message FROM outbox ORDER BY id")]


def _intake(store: Store, alerts: list[dict[str, Any]], now: float) -> None:
    note = parse_notification(json.dumps(notification(alerts)).encode(), 1000)
    store.intake(note, symptom, STEP, "Watchdog", now=now)


def _finish(store: Store, result: WorkResult, now: float, retry_at: float | None = None) -> None:
    item = store.claim(now=now)
    assert item is not None
    store.complete(item, result, retry_at, now=now + 1)


def _feed(store: Store, results: dict[str, WorkResult], brief: Callable[[WorkResult], WorkResult]) -> None:
    """Two alerts fire and get a diagnosis; a third fires a moment later, its signals are
    unavailable, then a changed diagnosis follows; then all three resolve."""
    started = [("f1", T0, "vllm-0"), ("f2", T0 + 5, "vllm-1"), ("f3", T0 + 2 * STEP, "vllm-2")]
    _intake(store, [alert(f, at, pod=pod) for f, at, pod in started[:2]], T0 + 6)
    _finish(store, brief(results["first"]), T0 + 10)
    _intake(store, [alert(f, at, pod=pod) for f, at, pod in started], T0 + 2 * STEP + 1)
    _finish(store, brief(results["unavailable"]), T0 + 2 * STEP + 10, retry_at=T0 + 2 * STEP + 30)
    _finish(store, brief(results["changed"]), T0 + 2 * STEP + 40)
    ended = [alert(f, at, status="resolved", ends_at=T0 + 600, pod=pod) for f, at, pod in started]
    _intake(store, ended, T0 + 601)


@pytest.fixture(params=["sqlite", "postgresql"])
def urls(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[str, str]]:
    if request.param == "sqlite":
        yield str(tmp_path / "with.db"), str(tmp_path / "without.db")
    else:
        server = request.getfixturevalue("postgres_server")
        yield server.create_database(), server.create_database()


def test_a_message_is_the_same_with_the_results_own_headline_or_one_read_back(
    urls: tuple[str, str], results: dict[str, WorkResult]
) -> None:
    with_brief, without = _store(urls[0]), _store(urls[1])
    try:
        _feed(with_brief, results, briefed)
        _feed(without, results, lambda r: r)
        sent, read_back = _messages(with_brief), _messages(without)
    finally:
        with_brief.close()
        without.close()
    assert [kind for kind, _ in sent] == ["diagnosis", "changed", "changed", "resolved"]
    assert sent == read_back
    headlines = [json.loads(message)["diagnosis"] for _, message in sent]
    assert headlines[0]["cause"] == results["first"].cause and headlines[0]["forbidden"]
    assert headlines[1]["signals"] == "unavailable: timeout" and headlines[1]["cause"] is None
    assert headlines[2]["cause"] == results["changed"].cause
    assert headlines[3]["cause"] == results["changed"].cause  # the episode's latest diagnosis


def test_a_result_carries_what_the_store_keeps_of_it(results: dict[str, WorkResult]) -> None:
    """The headline is made from the very fields the store writes, so reading them back changes nothing."""
    for result in results.values():
        stored = result.stored()
        assert stored["state"] == ("unavailable" if result.unavailable else "annotated")
        assert (json.loads(stored["diagnosis"]) if stored["diagnosis"] else None) == (
            json.loads(json.dumps(result.diagnosis)) if result.diagnosis else None
        )
