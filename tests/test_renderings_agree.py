"""Every rendering of a diagnosis says the same thing, because each reads the same sections.

The terminal text, the Markdown for tickets, the TUI's verdict, actions and warnings and
the webhook service's message all come from `triage.core.sections`: the same verdict,
the same evidence, the same first actions and the same forbidden actions with their
reasons, wherever each rendering shows them.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from conftest import ROOT

from signals.fixture import load_fixture
from triage.core.escape import escape_md
from triage.core.graph import TriageGraph
from triage.core.markdown import to_markdown
from triage.core.model import Diagnosis
from triage.core.render import to_text
from triage.core.sections import Sections, sections
from triage.core.walk import diagnose
from triage.replay import fixture_symptom
from triage.service.config import SinkSettings
from triage.service.messages import diagnosis_brief, stored_diagnosis
from triage.service.sinks import Renderer
from tui.widgets import action_text, verdict_text, warnings_text


@pytest.fixture(scope="module")
def diagnosis(graph: TriageGraph) -> Diagnosis:
    """An incident with a top cause, a mechanism under it, first actions and forbidden actions."""
    fixture = load_fixture(str(ROOT / "fixtures" / "replica-down-queue-growth.yaml"))
    symptom, source = fixture_symptom(fixture, None, graph.knowledge)
    d = diagnose(graph, fixture.frame, symptom, fixture.at, source=source)
    assert d.top is not None and len(d.causes) > 1 and d.first_actions and d.forbidden
    return d


def _stored_row(d: Diagnosis) -> dict[str, Any]:
    return {
        "state": "annotated",
        "symptom": d.symptom,
        "cause": d.top.cause if d.top else None,
        "signals": "complete",
        "diagnosis": json.dumps(d.to_json(), ensure_ascii=False),
    }


def _slack(brief: dict[str, Any]) -> str:
    message = {
        "kind": "diagnosis",
        "status": "firing",
        "group_labels": {"alertname": "TTFTHigh"},
        "alert_count": 0,
        "truncated_alerts": 0,
        "alerts": [],
        "diagnosis": brief,
    }
    body = Renderer().body(SinkSettings(name="chat", kind="slack", url="http://chat.invalid/hook"), message)
    return str(json.loads(body)["text"])


def test_the_terminal_text_carries_every_section(diagnosis: Diagnosis) -> None:
    s = sections(diagnosis)
    top = s.verdict.top
    assert top is not None
    lines = to_text(diagnosis).splitlines()
    assert lines[0].startswith(f"{s.headline.title}  at {s.headline.at} · {s.headline.onset}")
    assert lines[1].startswith(f"VERDICT  {top.cause} ({top.layer}) — {top.title}  score {top.score:.2f}")
    shown = [line.strip() for line in lines[2 : 2 + len(top.brief)]]
    assert shown == ["".join(span.text for span in e.spans) for e in top.brief]
    assert lines[2 + len(top.brief)] == "ALSO     " + " · ".join(c.summary for c in s.also)
    for a in s.actions:
        assert f"  {a.index}. {a.text}" in lines
        assert not a.confirm or f"     confirm: {a.confirm}" in lines
    for f in s.forbidden:
        assert f"  ✗ {f.action} — {f.reason}" in lines


def test_markdown_carries_every_section(diagnosis: Diagnosis) -> None:
    s = sections(diagnosis)
    top = s.verdict.top
    assert top is not None
    md = to_markdown(diagnosis)
    assert f"**Verdict:** {top.cause} ({top.layer}) — {top.title}, score {top.score:.2f}." in md
    for e in top.evidence:
        assert f"| {e.role}: `{e.check}` |" in md and f" | {escape_md(e.note)} |" in md
    for c in s.causes:
        assert f"| {c.cause}" in md
    for a in s.actions:
        assert f"{a.index}. {escape_md(a.text)}" in md and f"`{a.confirm}`" in md
    for f in s.forbidden:
        assert f"- **{f.action}** — {escape_md(f.reason)}" in md


def test_the_tui_carries_every_section(diagnosis: Diagnosis) -> None:
    s = sections(diagnosis)
    top = s.verdict.top
    assert top is not None
    verdict = verdict_text(diagnosis).plain.splitlines()
    assert verdict[1] == f"VERDICT {top.cause} ({top.layer}) — {top.title}  score {top.score:.2f}"
    assert verdict[2 : 2 + len(top.brief)] == [
        "  " + "".join(span.text for span in e.spans) for e in top.brief
    ]
    assert verdict[-1] == "ALSO " + " · ".join(c.summary for c in s.also)
    for a in s.actions:
        assert (
            action_text(a.index, a.text, a.confirm).plain == f"{a.index}. {a.text}\n   confirm: {a.confirm}"
        )
    warnings = warnings_text(diagnosis).plain.splitlines()
    assert [f"  ✗ {f.action} — {f.reason}" for f in s.forbidden] == warnings[1 : 1 + len(s.forbidden)]


def test_the_service_message_reads_the_same_sections(diagnosis: Diagnosis) -> None:
    s = sections(diagnosis)
    top = s.verdict.top
    assert top is not None
    brief = diagnosis_brief(_stored_row(diagnosis))  # type: ignore[arg-type]
    assert (brief["cause"], brief["layer"]) == (top.cause, top.layer)
    assert brief["score"] == round(top.score, 3)
    assert brief["also"] == [c.cause for c in s.also[:3]]
    assert brief["first_actions"] == [a.text for a in s.actions[:3]]
    assert brief["forbidden"] == [f.action for f in s.forbidden]
    text = _slack(brief)
    assert f"*{top.cause}* ({top.layer}, score {round(top.score, 3)})" in text
    for a in s.actions[:3]:
        assert f"{a.index}. {a.text}" in text
    assert f"*Do not:* {', '.join(f.action for f in s.forbidden)}" in text


def test_the_stored_diagnosis_gives_back_the_sections_the_json_keeps(diagnosis: Diagnosis) -> None:
    """The store keeps the JSON; read back, its sections match the live diagnosis's but for titles."""
    live = sections(diagnosis)
    stored = sections(stored_diagnosis(json.loads(json.dumps(diagnosis.to_json()))))

    def kept(s: Sections) -> tuple[Any, ...]:
        return (
            [
                (c.cause, c.layer, round(c.score, 3), c.explains, [e.check for e in c.evidence])
                for c in s.causes
            ],
            s.actions,
            s.forbidden,
            s.unreadable,
            s.missing,
            s.headline,
        )

    assert kept(stored) == kept(live)
