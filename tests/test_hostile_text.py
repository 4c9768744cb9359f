"""Text from outside never reaches a terminal, a ticket or a chat as raw control characters.

A Prometheus label is anyone's to set: a replica named `vllm-0\\x1b[2J` would clear the
on-call engineer's terminal, a U+202E would reverse what follows it. The diagnosis
sections escape every such string once, so every rendering shows the escapes.
"""

from __future__ import annotations

import dataclasses
import json
from typing import Any

import pytest
from conftest import ROOT

from signals.fixture import load_fixture
from triage.core.graph import TriageGraph
from triage.core.markdown import to_markdown
from triage.core.model import Diagnosis, Forbidden
from triage.core.render import to_json, to_text
from triage.core.walk import diagnose
from triage.replay import fixture_symptom
from triage.service.config import SinkSettings
from triage.service.messages import diagnosis_brief
from triage.service.sinks import Renderer
from tui.widgets import evidence_text, verdict_text, warnings_text

CLEAR = "\x1b[2J"
RLO = "\u202e"
RAW = (CLEAR, RLO)
SHOWN = ("\\x1b[2J", "\\u202e")


@pytest.fixture(scope="module")
def hostile(graph: TriageGraph) -> Diagnosis:
    """A real diagnosis whose replica names, notes, reasons and server messages hold ESC and U+202E."""
    fixture = load_fixture(str(ROOT / "fixtures" / "replica-down-queue-growth.yaml"))
    symptom, source = fixture_symptom(fixture, None, graph.knowledge)
    d = diagnose(graph, fixture.frame, symptom, fixture.at, source=source)
    assert d.top is not None
    evil = f"vllm-0{CLEAR}{RLO}0-mllv"
    evidence = tuple(
        dataclasses.replace(e, note=f"{e.note} on {evil}", replicas=(evil, *e.replicas))
        for e in d.top.evidence
    )
    top = dataclasses.replace(d.top, evidence=evidence)
    ruled = next(c for c in d.walked if c.status != "ranked")
    return dataclasses.replace(
        d,
        causes=(top, *d.causes[1:]),
        walked=tuple(
            dataclasses.replace(c, why_not=f"quiet on {evil}") if c is ruled else c for c in d.walked
        ),
        forbidden=(*d.forbidden, Forbidden("tune_sampling", f"{evil} is not a sampling problem")),
        missing_signals=(*d.missing_signals, "gpu_xid"),
        signal_problems=(("gpu_xid", f"server said {CLEAR}{RLO}"),),
    )


def _escaped(text: str) -> None:
    assert all(raw not in text for raw in RAW), repr(text)
    assert all(shown in text for shown in SHOWN)


@pytest.mark.parametrize("verbose", [False, True])
def test_the_terminal_text_shows_the_escapes(hostile: Diagnosis, verbose: bool) -> None:
    _escaped(to_text(hostile, verbose=verbose))
    coloured = to_text(hostile, color=True, verbose=verbose)
    assert CLEAR not in coloured and RLO not in coloured and "\\x1b[2J" in coloured
    assert "vllm-0\\x1b[2J\\u202e0-mllv" in to_text(hostile)
    if verbose:
        assert "quiet on vllm-0\\x1b[2J" in to_text(hostile, verbose=True)


def test_markdown_shows_the_escapes(hostile: Diagnosis) -> None:
    md = to_markdown(hostile)
    assert all(raw not in md for raw in RAW)
    assert "on vllm-0\\\\x1b\\[2J\\\\u202e0-mllv" in md  # Markdown source for `\x1b[2J\u202e`, as shown


def test_the_tui_shows_the_escapes(hostile: Diagnosis) -> None:
    assert hostile.top is not None
    _escaped(verdict_text(hostile).plain)
    _escaped(warnings_text(hostile).plain)
    for e in hostile.top.evidence:
        _escaped(evidence_text(e).plain)


def test_json_keeps_the_data_as_it_is(hostile: Diagnosis) -> None:
    """JSON is data for programs: the value round-trips, and the text itself holds no raw ESC."""
    text = to_json(hostile)
    data = json.loads(text)
    assert data["causes"][0]["evidence"][0]["replicas"][0] == f"vllm-0{CLEAR}{RLO}0-mllv"
    assert CLEAR not in text  # JSON writes control characters as \u001b


def _message(d: Diagnosis, instance: str) -> dict[str, Any]:
    row = {
        "state": "annotated",
        "symptom": d.symptom,
        "cause": d.top.cause if d.top else None,
        "signals": "complete",
        "diagnosis": json.dumps(d.to_json(), ensure_ascii=False),
    }
    alert = {
        "alertname": f"TTFTHigh{CLEAR}",
        "labels": {"instance": instance},
        "starts_at": "2026-10-14T14:00:00Z",
        "duration_seconds": None,
        "url": None,
    }
    return {
        "kind": "diagnosis",
        "status": "firing",
        "group_key": '{}:{alertname="TTFTHigh"}',
        "episode": 1,
        "receiver": "triage",
        "external_url": "http://alertmanager.invalid",
        "group_labels": {"alertname": f"TTFTHigh{RLO}"},
        "alert_count": 1,
        "truncated_alerts": 0,
        "alerts": [alert],
        "diagnosis": diagnosis_brief(row),  # type: ignore[arg-type]
    }


def test_the_service_messages_show_the_escapes(hostile: Diagnosis) -> None:
    renderer = Renderer()
    message = _message(hostile, f"vllm-0{CLEAR}{RLO}")
    slack = json.loads(
        renderer.body(SinkSettings(name="chat", kind="slack", url="http://c.invalid"), message)
    )
    _escaped(slack["text"])
    assert "vllm-0\\x1b[2J\\u202e" in slack["text"]
    body = renderer.body(SinkSettings(name="hook", kind="webhook", url="http://h.invalid"), message)
    assert all(raw.encode() not in body for raw in RAW)  # JSON escapes them; the values stay data
    assert json.loads(body)["alerts"][0]["labels"]["instance"] == f"vllm-0{CLEAR}{RLO}"


def test_the_annotation_page_shows_the_escapes(hostile: Diagnosis) -> None:
    annotation = {"id": 1, "alertname": f"TTFTHigh{CLEAR}", "labels": {"instance": f"vllm-0{RLO}"}}
    page = Renderer().page({"a": annotation, "d": hostile.to_json()})
    _escaped(page)
    assert "is not a sampling problem" in page
