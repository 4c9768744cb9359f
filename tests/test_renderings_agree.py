"""Every rendering of a diagnosis says the same thing, because each reads the same sections.

The terminal text, the Markdown for tickets, the TUI's verdict, actions and warnings and
the webhook service's message all come from `triage.core.sections`: the same verdict,
the same evidence, the same first actions and the same forbidden actions with their
reasons, wherever each rendering shows them.
"""

from __future__ import annotations

import dataclasses
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
    assert d.top is not None and len(d.causes) > 1 and d.first_actions and d.forbidden and d.first_movers
    # The verdict is the walk's; these tests are about the renderings agreeing on one, so it is fixed.
    return dataclasses.replace(d, verdict="cause")


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
    assert lines[0].startswith(f"VERDICT  {top.cause} ({top.layer}) — {top.title}  score {top.score:.2f}")
    assert lines[1].startswith(f"{s.headline.title}  at {s.headline.at} · {s.headline.onset}")
    shown = [line.strip() for line in lines[2 : 2 + len(top.brief)]]
    assert shown == ["".join(span.text for span in e.spans)[:95] for e in top.brief] or all(
        line.endswith("…") or line == "".join(span.text for span in e.spans)
        for line, e in zip(shown, top.brief, strict=True)
    )
    assert "ALSO     " + " · ".join(c.summary for c in s.also) in lines
    assert any(line.startswith(f"FIRST MOVERS  {s.first_movers[0].text}") for line in lines)
    assert f"  1. {s.actions[0].text}" in lines
    also = next((line for line in lines if line.startswith("  ✗ also tempting: ")), "")
    for f in s.tempting:  # each with its reason, or named where the screen has no room for it
        assert any(line.startswith(f"  ✗ {f.action} — ") for line in lines) or f.action in also
    folded = " ".join(line.strip() for line in lines if "✗ always: " in line or line.startswith(" " * 12))
    assert all(f.action in folded for f in s.red_lines)
    verbose = to_text(diagnosis, verbose=True).splitlines()
    for a in s.actions:
        assert f"  {a.index}. {a.text}" in verbose
        assert not a.confirm or f"     confirm: {a.confirm}" in verbose
    for f in s.tempting:
        assert f"  ✗ {f.action} — {f.reason}" in verbose
    for f in s.red_lines:
        assert f"  ✗ always: {f.action} — {f.reason}" in verbose


def test_markdown_carries_every_section(diagnosis: Diagnosis) -> None:
    s = sections(diagnosis)
    top = s.verdict.top
    assert top is not None
    md = to_markdown(diagnosis)
    assert md.startswith(f"## Triage: {s.headline.symptom} → **{top.cause}**")
    assert f"**Verdict:** {top.cause} ({top.layer}) — {top.title}, score {top.score:.2f}." in md
    for m in s.first_movers:
        assert f"| {escape_md(m.signal)} | {escape_md(m.replica or 'fleet')} | {escape_md(m.layer)} |" in md
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
    assert verdict[0] == f"VERDICT {top.cause} ({top.layer}) — {top.title}  score {top.score:.2f}"
    assert verdict[1].startswith(f"{s.headline.title}  at {s.headline.at}")
    assert verdict[2 : 2 + len(top.brief)] == [
        "  " + "".join(span.text for span in e.spans) for e in top.brief
    ]
    assert verdict[2 + len(top.brief)] == "ALSO " + " · ".join(c.summary for c in s.also)
    assert verdict[3 + len(top.brief)].startswith(
        "FIRST MOVERS " + " · ".join(m.text for m in s.first_movers[:3])
    )
    for a in s.actions:
        assert (
            action_text(a.index, a.text, a.confirm).plain == f"{a.index}. {a.text}\n   confirm: {a.confirm}"
        )
    warnings = warnings_text(diagnosis).plain.splitlines()
    assert [f"  ✗ {f.action} — {f.reason}" for f in s.tempting] + [
        f"  ✗ always: {f.action} — {f.reason}" for f in s.red_lines
    ] == warnings[1 : 1 + len(s.forbidden)]


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
    assert (brief["verdict_kind"], brief["verdict_causes"]) == ("cause", [top.cause])
    assert [m["text"] for m in brief["first_movers"]] == [m.text for m in s.first_movers[:3]]
    assert [f["tempting"] for f in brief["do_not"]] == [f.tempting for f in s.forbidden]
    text = _slack(brief)
    assert f"*{top.cause}* ({top.layer}, score {round(top.score, 3)})" in text
    movers = " · ".join(m.text for m in s.first_movers[:3]).replace(">", "&gt;")  # as Slack escapes it
    assert "*First movers:* " + movers in text
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
            (s.verdict.kind, s.verdict.causes, s.verdict.contenders, s.verdict.sentence),
            s.first_movers,
            s.notes,
            s.unmonitored,
        )

    assert kept(stored) == kept(live)
