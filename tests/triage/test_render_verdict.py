"""The answer on-call reads at 3 a.m.: the verdict first, in every output form.

The walk decides the verdict; these tests build each kind by hand on a real diagnosis
(`dataclasses.replace`), so they hold whatever the walk concludes on a fixture, and check
that the terminal text leads with it and fits one screen, that verbose shows everything,
and that the Markdown, the webhook JSON and the Slack message carry it.
"""

from __future__ import annotations

import dataclasses
import json
import re
from typing import Any

import pytest
from conftest import ROOT
from rich.cells import cell_len

from signals.fixture import load_fixture
from triage.core.graph import TriageGraph
from triage.core.markdown import to_markdown
from triage.core.model import Diagnosis, FirstMover, Forbidden, Unmonitored
from triage.core.render import MAX_COLUMNS, MAX_LINES, to_text
from triage.core.walk import diagnose
from triage.replay import fixture_symptom
from triage.service.config import SinkSettings
from triage.service.messages import diagnosis_brief
from triage.service.sinks import Renderer

ANSI = re.compile(r"\x1b\[[0-9;]*m")
REPLICA_DOWN = "replica-down-queue-growth"
LARGE_FLEET = "auto-long-prompt-surge-large-fleet"

KV_TELLS = "KV full on the survivors only: max by (pod) (vllm:kv_cache_usage_perc) >= 0.95"
DOWN_TELLS = "ready below desired: kube_deployment_status_replicas_available / kube_deployment_spec_replicas"

GATEWAY = Unmonitored(
    "gateway",
    (
        "gateway_latency_p99_seconds",
        "gateway_queue",
        "gateway_inflight",
        "upstream_error_ratio",
        "backends_routed",
    ),
    ("gateway_bottleneck", "stale_backend"),
)

LONG = (
    "Adding replicas only helps when queueing is a true capacity shortage; otherwise it moves the queue "
    "from the gateway to the GPUs and costs money, and every new replica loads the model for minutes "
    "before it serves a single request. A second sentence that the default view leaves out. "
    "Now: the top cause is replica_down (replicas_ready 6 of 8 ready; queue_waiting 6 of 6 replicas "
    "rose, on vllm-0, vllm-1, vllm-2, vllm-3, vllm-4, vllm-5), not capacity_shortage."
)
ACTIONS = (
    "scale_out",
    "tune_sampling",
    "raise_gpu_memory_utilization",
    "raise_max_num_seqs",
    "force_prefix_cache",
    "gateway_prompt_assembly",
    "average_latency_sla",
    "blind_retry_streaming",
)


def _diagnosis(graph: TriageGraph, name: str) -> Diagnosis:
    fixture = load_fixture(str(ROOT / "fixtures" / f"{name}.yaml"))
    symptom, source = fixture_symptom(fixture, None, graph.knowledge)
    return diagnose(graph, fixture.frame, symptom, fixture.at, source=source)


@pytest.fixture(scope="module")
def real(graph: TriageGraph) -> Diagnosis:
    d = _diagnosis(graph, REPLICA_DOWN)
    assert d.top is not None and d.top.cause == "replica_down" and len(d.causes) > 1
    return d


def _movers(d: Diagnosis, count: int = 5) -> tuple[FirstMover, ...]:
    signals = ("kv_usage_ratio", "queue_waiting", "ttft_p99_seconds", "replicas_ready", "preemption_rate")
    layers = ("resource", "engine", "user", "supply", "resource")
    return tuple(
        FirstMover(
            signals[i % 5], "vllm-2" if i == 0 else None, layers[i % 5], d.at - 600 + 30 * i, 0.6, 0.99
        )
        for i in range(count)
    )


def _kind(d: Diagnosis, kind: str) -> Diagnosis:
    """The real diagnosis with the verdict `kind`, as the walk would shape it."""
    base = dataclasses.replace(d, verdict=kind, first_movers=_movers(d), unmonitored=(GATEWAY,))
    if kind == "ambiguous":
        return dataclasses.replace(base, ambiguous=(("replica_down", DOWN_TELLS), ("kv_pressure", KV_TELLS)))
    if kind in ("unexplained", "no_incident"):
        return dataclasses.replace(base, causes=(), symptom_visible=kind == "unexplained")
    return base


def _many_forbidden(d: Diagnosis) -> Diagnosis:
    """Every forbidden action, half of them tempting, each with a long reason."""
    forbidden = tuple(
        Forbidden(a, LONG.replace("Adding", f"{a}:"), tempting=i % 2 == 0) for i, a in enumerate(ACTIONS)
    )
    return dataclasses.replace(_kind(d, "cause"), forbidden=forbidden)


def _everything(d: Diagnosis) -> Diagnosis:
    """The worst case for one screen: many of every part, and long values everywhere."""
    many = _many_forbidden(d)
    return dataclasses.replace(
        many,
        forbidden=tuple(dataclasses.replace(f, tempting=True) for f in many.forbidden),
        first_movers=_movers(d, 12),
        notes=tuple(
            f"note {i}: " + "the first movers sit in a layer the verdict does not explain " * 3
            for i in range(4)
        ),
        unmonitored=tuple(dataclasses.replace(GATEWAY, source=f"exporter-{i}") for i in range(5)),
        signal_problems=tuple((f"signal_{i}", "HTTP 503: " + "overloaded " * 20) for i in range(6)),
        missing_signals=tuple(f"missing_signal_{i}" for i in range(30)),
    )


def _fits(text: str) -> None:
    lines = text.splitlines()
    assert len(lines) <= MAX_LINES, text
    too_wide = [line for line in lines if cell_len(line) > MAX_COLUMNS]
    assert too_wide == [], too_wide


# ----------------------------------------------------------------- the first line


def test_a_cause_verdict_is_the_first_line(real: Diagnosis) -> None:
    top = real.top
    assert top is not None
    lines = to_text(_kind(real, "cause")).splitlines()
    assert lines[0].startswith(f"VERDICT  replica_down (supply) — {top.title}  score {top.score:.2f}")
    assert lines[1].startswith("TTFT SLOW  at ")


def test_an_ambiguous_verdict_is_the_first_line_and_says_what_tells_the_causes_apart(real: Diagnosis) -> None:
    down, kv = (f"{c.score:.2f}" for c in real.causes[:2])
    lines = to_text(_kind(real, "ambiguous")).splitlines()
    assert lines[0] == "VERDICT  ambiguous between replica_down and kv_pressure — what tells them apart:"
    assert lines[1].startswith("TTFT SLOW  at ")
    assert lines[2].startswith(f"    replica_down (supply {down}): ready below desired: ")
    assert any(
        line.startswith(f"    kv_pressure (resource {kv}): KV full on the survivors only") for line in lines
    )
    verbose = to_text(_kind(real, "ambiguous"), verbose=True)
    assert f"    kv_pressure (resource {kv}): {KV_TELLS}" in verbose.splitlines()


def test_an_unexplained_verdict_is_the_first_line_and_points_at_the_first_movers(real: Diagnosis) -> None:
    lines = to_text(_kind(real, "unexplained")).splitlines()
    assert lines[0] == (
        "VERDICT  unexplained: ttft_slow is breached and no cause holds — see the first movers"
    )
    assert any(line.startswith("FIRST MOVERS  kv_usage_ratio@vllm-2 (resource) ") for line in lines)


def test_no_incident_is_the_first_line(real: Diagnosis) -> None:
    lines = to_text(_kind(real, "no_incident")).splitlines()
    assert lines[0] == "VERDICT  no incident: ttft_slow is not breached server-side"
    assert lines[1].startswith("TTFT SLOW  at ") and "not visible" in lines[1]


# ----------------------------------------------------------------- one screen


def test_the_large_fleet_fits_one_screen(graph: TriageGraph) -> None:
    d = _diagnosis(graph, LARGE_FLEET)
    assert d.causes and len(d.first_actions) > 1
    _fits(to_text(d))
    _fits(to_text(dataclasses.replace(d, forbidden=_many_forbidden(d).forbidden)))
    _fits(to_text(_everything(d)))
    assert to_text(d).splitlines()[0].startswith("VERDICT  ")


@pytest.mark.parametrize("kind", ["cause", "ambiguous", "unexplained", "no_incident"])
def test_many_forbidden_actions_fit_one_screen(real: Diagnosis, kind: str) -> None:
    d = dataclasses.replace(_kind(real, kind), forbidden=_many_forbidden(real).forbidden)
    _fits(to_text(d))
    _fits(to_text(_everything(d)))
    _fits(ANSI.sub("", to_text(_everything(d), color=True)))
    assert to_text(_everything(d)).splitlines()[0].startswith("VERDICT  ")


def test_the_red_lines_fold_into_one_line_that_names_each(real: Diagnosis) -> None:
    d = _many_forbidden(real)
    text = to_text(d)
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("  ✗ always: "))
    folded = lines[start]
    for more in lines[start + 1 :]:
        if not more.startswith(" " * 12):
            break
        folded += " " + more.strip()
    red = [f.action for f in d.forbidden if not f.tempting]
    assert folded == f"  ✗ always: {', '.join(red)} (-v for the reasons)"
    assert all(f"✗ {a} —" not in text for a in red)  # no red line gets a line of its own
    first = next(f for f in d.forbidden if f.tempting)
    shown = next(i for i, line in enumerate(lines) if line.startswith(f"  ✗ {first.action} — "))
    assert shown < start  # the tempting actions come first, each with its reason
    assert lines[shown + 1].startswith("      ") and "…" in lines[shown + 1]  # its first sentence, shortened
    assert any(line.startswith("      Now: the top cause is replica_down") for line in lines[shown:start])


def test_tempting_actions_that_do_not_fit_are_named(real: Diagnosis) -> None:
    d = _everything(real)
    text = to_text(d)
    shown = {f.action for f in d.forbidden if f"  ✗ {f.action} — " in text}
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("  ✗ also tempting: "))
    also = " ".join(line.strip() for line in lines[start : start + 2])
    assert also.endswith("(-v for the reasons)")
    assert shown and all(f.action in shown or f.action in also for f in d.forbidden)
    assert text.splitlines()[-1].endswith("-v shows everything")


def test_verbose_shows_every_reason_in_full_and_never_wraps(real: Diagnosis) -> None:
    d = _everything(real)
    verbose = to_text(d, verbose=True)
    lines = verbose.splitlines()
    for f in d.forbidden:
        assert f"  ✗ {f.action} — {f.reason}" in lines
    red = dataclasses.replace(d, forbidden=_many_forbidden(real).forbidden)
    for f in red.forbidden:
        prefix = "  ✗ " if f.tempting else "  ✗ always: "
        assert f"{prefix}{f.action} — {f.reason}" in to_text(red, verbose=True).splitlines()
    assert all(f"NOTE     {n}" in lines for n in d.notes)
    movers = next(line for line in lines if line.startswith("FIRST MOVERS  "))
    assert movers.count(" · ") == len(d.first_movers) - 1 and "more" not in movers
    assert sum(line.startswith("NOT MONITORED  ") for line in lines) == len(d.unmonitored)
    assert all(any(line.startswith(f"UNREADABLE   {s}: ") for line in lines) for s, _ in d.signal_problems)
    assert "RULED OUT" in lines


def test_not_monitored_names_the_source_and_the_causes(real: Diagnosis) -> None:
    d = dataclasses.replace(_kind(real, "cause"), missing_signals=(*real.missing_signals, *GATEWAY.signals))
    lines = to_text(d).splitlines()
    assert "NOT MONITORED  gateway (5 signals): gateway_bottleneck, stale_backend unprovable" in lines
    blind = next(line for line in lines if line.startswith("BLIND SPOTS  "))
    assert "gateway_queue" not in blind  # its exporter is not run: not monitored, not a blind spot


def test_the_first_movers_line_shows_the_first_three(real: Diagnosis) -> None:
    d = _kind(real, "cause")
    lines = to_text(d).splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("FIRST MOVERS  "))
    block = " · ".join(line.strip() for line in lines[start : start + 3])
    assert block.startswith("FIRST MOVERS  kv_usage_ratio@vllm-2 (resource) ")
    assert "0.6 -> 0.99" in block and "queue_waiting (engine)" in block and "+2 more" in block


def test_past_evidence_reads_as_past(real: Diagnosis) -> None:
    top = real.top
    assert top is not None
    past = dataclasses.replace(top, evidence=tuple(dataclasses.replace(e, live=False) for e in top.evidence))
    d = dataclasses.replace(_kind(real, "cause"), causes=(past, *real.causes[1:]))
    assert "6 of 8 ready (past)" in to_text(d, verbose=True)


# ----------------------------------------------------------------- Markdown and the messages


def test_markdown_leads_with_each_verdict(real: Diagnosis) -> None:
    assert to_markdown(_kind(real, "cause")).startswith(
        "## Triage: ttft_slow → **replica_down**\n\n**Verdict:** "
    )
    ambiguous = to_markdown(_kind(real, "ambiguous"))
    assert ambiguous.startswith("## Triage: ttft_slow → ambiguous: **replica_down** or **kv_pressure**")
    assert "**Verdict:** ambiguous between replica_down and kv_pressure; what tells them apart:" in ambiguous
    assert f"- **kv_pressure** (resource {real.causes[1].score:.2f}): KV full on the survivors" in ambiguous
    unexplained = to_markdown(_kind(real, "unexplained"))
    assert unexplained.startswith(
        "## Triage: ttft_slow → unexplained\n\n**Verdict:** unexplained: ttft_slow is"
    )
    assert to_markdown(_kind(real, "no_incident")).startswith("## Triage: ttft_slow → no incident\n")
    md = to_markdown(_many_forbidden(real))
    assert "### First movers\n\n| signal | replica | layer | moved at | change |" in md
    assert "| kv_usage_ratio | vllm-2 | resource |" in md and "| queue_waiting | fleet | engine |" in md
    assert "Always, on every path:" in md
    assert "- **gateway** (5 signals: " in md and "gateway_bottleneck, stale_backend unprovable" in md


def _message(d: Diagnosis) -> dict[str, Any]:
    row = {
        "state": "annotated",
        "symptom": d.symptom,
        "cause": d.top.cause if d.top else None,
        "signals": "complete",
        "diagnosis": json.dumps(d.to_json(), ensure_ascii=False),
    }
    return {
        "kind": "diagnosis",
        "status": "firing",
        "group_key": "{}:{}",
        "episode": 1,
        "receiver": "triage",
        "external_url": "http://alertmanager.invalid",
        "group_labels": {"alertname": "TTFTHigh"},
        "alert_count": 0,
        "truncated_alerts": 0,
        "alerts": [],
        "diagnosis": diagnosis_brief(row),  # type: ignore[arg-type]
    }


def _body(kind: str, message: dict[str, Any]) -> bytes:
    return Renderer().body(SinkSettings(name="s", kind=kind, url="http://s.invalid/hook"), message)


@pytest.mark.parametrize("kind", ["cause", "ambiguous", "unexplained", "no_incident"])
def test_the_webhook_carries_the_verdict_and_the_first_movers(real: Diagnosis, kind: str) -> None:
    body = json.loads(_body("webhook", _message(_kind(real, kind))))
    assert body["verdict"]["kind"] == kind
    causes = {"cause": ["replica_down"], "ambiguous": ["replica_down", "kv_pressure"]}.get(kind, [])
    assert body["verdict"]["causes"] == causes
    if kind == "ambiguous":
        assert [a["tells_apart"] for a in body["verdict"]["ambiguous"]] == [DOWN_TELLS, KV_TELLS]
    assert [m["signal"] for m in body["first_movers"]] == [
        "kv_usage_ratio",
        "queue_waiting",
        "ttft_p99_seconds",
    ]
    assert body["first_movers"][0] == {
        "signal": "kv_usage_ratio",
        "replica": "vllm-2",
        "layer": "resource",
        "moved_at": "2026-10-14T14:20:00Z",
        "change": "0.6 -> 0.99",
        "text": "kv_usage_ratio@vllm-2 (resource) 14:20:00Z 0.6 -> 0.99",
    }


def test_a_message_queued_before_verdicts_reads_as_before(real: Diagnosis) -> None:
    message = _message(_kind(real, "cause"))
    for key in ("verdict_kind", "verdict_causes", "ambiguous", "first_movers"):
        del message["diagnosis"][key]
    body = json.loads(_body("webhook", message))
    assert body["verdict"] is None and body["first_movers"] == []
    assert "*replica_down* (supply, score " in json.loads(_body("slack", message))["text"]


def test_slack_leads_with_each_verdict(real: Diagnosis) -> None:
    def text(kind: str) -> str:
        return str(json.loads(_body("slack", _message(_kind(real, kind))))["text"])

    assert "*Diagnosis:* ttft_slow → *replica_down* (supply, score " in text("cause")
    ambiguous = text("ambiguous")
    assert "→ *ambiguous* between *replica_down* and *kv_pressure*; what tells them apart:" in ambiguous
    assert (
        "• *kv_pressure*: KV full on the survivors only: max by (pod) (vllm:kv_cache_usage_perc) &gt;= 0.95"
        in ambiguous
    )
    assert "→ *unexplained*: breached, and no cause holds; see the first movers" in text("unexplained")
    assert "→ *no incident*: not breached server-side" in text("no_incident")
    assert (
        "*First movers:* kv_usage_ratio@vllm-2 (resource) 14:20:00Z 0.6 -&gt; 0.99 · queue_waiting"
        in text("cause")
    )


@pytest.mark.parametrize("kind", ["pagerduty", "opsgenie", "grafana", "teams"])
def test_every_sink_names_the_verdict_and_the_first_movers(real: Diagnosis, kind: str) -> None:
    message = _message(_kind(real, "ambiguous"))
    settings = SinkSettings.model_construct(
        **{**SinkSettings(name="s", kind="webhook", url="http://s.invalid").__dict__, "kind": kind}
    )
    body = Renderer().body(settings, message).decode()
    assert "ambiguous between replica" in body and "kv" in body and "KV full on the survivors only" in body
    assert "kv_usage_ratio@vllm-2 (resource) 14:20:00Z" in body
    assert "ttft_p99_seconds" in body and "replicas_ready (supply)" not in body  # the first three only


def test_the_annotation_page_carries_the_verdict(real: Diagnosis) -> None:
    d = _kind(real, "ambiguous")
    page = Renderer().page({"a": {"id": 1, "alertname": "TTFTHigh", "labels": {}}, "d": d.to_json()})
    assert "ambiguous: replica_down or kv_pressure" in page
    assert "<b>Verdict:</b> ambiguous between replica_down and kv_pressure" in page
    assert "<h2>First movers</h2>" in page and "<td>vllm-2</td>" in page
    assert "Not monitored: gateway (5 signals): gateway_bottleneck, stale_backend unprovable" in page
