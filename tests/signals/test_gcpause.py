"""The cyclic garbage collector is paused while a live read parses replies and builds its frame,
and comes back as it was: after the last of overlapping reads, after an error, and not at all
when it was off before (`signals.gcpause`)."""

from __future__ import annotations

import gc
import threading
from collections.abc import Iterator
from typing import Any

import pytest
import requests
from promserver import PromStandIn, Reply

import signals.gcpause as gcpause
import signals.live as live
import signals.prometheus.rounds as rounds
from signals.catalog import QueryOptions, load_catalog
from signals.errors import SignalError
from signals.gcpause import collection_paused
from signals.prometheus import PrometheusSource

START = 1_760_000_000.0
MATRIX = [{"metric": {"__name__": "up", "instance": "a"}, "values": [[START, "1"], [START + 15, "0"]]}]


@pytest.fixture(autouse=True)
def collector_on() -> Iterator[None]:
    """Every test starts with the collector on, and leaves it so."""
    was = gc.isenabled()
    gc.enable()
    yield
    assert gc.isenabled(), "a test left the collector off"
    if not was:
        gc.disable()


def test_the_collector_is_off_inside_and_back_after() -> None:
    with collection_paused():
        assert not gc.isenabled()
        with collection_paused():
            assert not gc.isenabled()
        assert not gc.isenabled()
    assert gc.isenabled()


def test_a_collector_that_was_off_stays_off() -> None:
    gc.disable()
    try:
        with collection_paused():
            assert not gc.isenabled()
        assert not gc.isenabled()
    finally:
        gc.enable()


def test_an_error_inside_resumes_the_collector() -> None:
    with pytest.raises(RuntimeError), collection_paused():
        raise RuntimeError("boom")
    assert gc.isenabled()


def test_overlapping_pauses_resume_after_the_last_one_ends() -> None:
    entered, release_first, first_done = threading.Event(), threading.Event(), threading.Event()
    seen: list[bool] = []

    def first() -> None:
        with collection_paused():
            entered.set()
            release_first.wait(5)
        first_done.set()

    thread = threading.Thread(target=first)
    thread.start()
    assert entered.wait(5)
    with collection_paused():
        release_first.set()
        assert first_done.wait(5)
        seen.append(gc.isenabled())  # the first pause ended, this one has not
    thread.join(5)
    assert seen == [False]
    assert gc.isenabled()


def test_reads_that_keep_overlapping_still_collect(monkeypatch: pytest.MonkeyPatch) -> None:
    """One read ending while another goes on collects once the pause has lasted too long."""
    collected: list[int] = []
    monkeypatch.setattr(gcpause, "LONGEST_PAUSE_S", 0.0)
    monkeypatch.setattr(gcpause.gc, "collect", lambda *_: collected.append(1) or 0)
    with collection_paused():
        with collection_paused():
            pass
        assert collected == [1] and not gc.isenabled()
    assert collected == [1] and gc.isenabled()


def test_replies_are_parsed_with_the_collector_paused(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[bool] = []
    parse = rounds.read_reply

    def watched(response: requests.Response) -> object:
        seen.append(gc.isenabled())
        return parse(response)

    monkeypatch.setattr(rounds, "read_reply", watched)
    with PromStandIn(Reply.success(MATRIX)) as stand, PrometheusSource(stand.url, timeout=2.0) as source:
        result = source.range_queries({"q": "up"}, START, START + 60, 15.0)["q"]
    assert result.ok and len(result.series) == 1
    assert seen == [False]
    assert gc.isenabled()


def test_a_live_read_builds_its_frame_with_the_collector_paused(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[bool] = []

    def resolve(*_: Any, **__: Any) -> Any:
        seen.append(gc.isenabled())
        raise SignalError("stop here")

    monkeypatch.setattr(live, "resolve_scoped", resolve)
    with pytest.raises(SignalError, match="stop here"):
        live.fetch_frame(None, load_catalog(), QueryOptions(), START, 600.0, 15.0)  # type: ignore[arg-type]
    assert seen == [False]
    assert gc.isenabled()
