"""The diagnosis sections: what each part of a verdict holds, before any rendering colours it."""

from __future__ import annotations

import dataclasses
import subprocess
import sys

from conftest import ROOT

from triage.core.model import Action, CauseFinding, Diagnosis, Evidence, FirstMover, Forbidden, Unmonitored
from triage.core.sections import (
    Span,
    evidence_line,
    sections,
    walked_cause,
)

HOLDS = Evidence(
    "kv_usage_ratio", "kv_usage_ratio >= 0.95 for 5m", True, 0.99, 0.6, note="0.99 vs 0.6 before"
)
UNKNOWN = Evidence("preemption_rate", "preemption_rate > 0", None, role="supports")
FAILS = Evidence("queue_waiting", "queue_waiting >= 1.5x baseline", False, role="requires")
ASIDE = Evidence("gpu_util_ratio", "gpu_util_ratio >= 0.9", False, role="supports")
CAUSE = CauseFinding(
    "kv_pressure", "resource", "KV cache pressure", "ranked", 0.912, (HOLDS, UNKNOWN, FAILS, ASIDE)
)
MECHANISM = CauseFinding(
    "batch_oversized", "engine", "Batch oversized", "ranked", 0.5, (), explained_by=("kv_pressure",)
)
RULED_OUT = CauseFinding(
    "gpu_fault", "resource", "GPU fault", "ruled_out", 0.0, (), why_not="no XID or ECC errors"
)
DIAGNOSIS = Diagnosis(
    symptom="tpot_slow",
    symptom_source="fixture",
    at=1_792_000_000.0,
    onset=1_792_000_000.0 - 1200,
    baseline_window=None,
    causes=(CAUSE, MECHANISM),
    first_actions=(Action("check_kv", "Check KV use per replica.", "max by (pod) (kv_usage_ratio)"),),
    forbidden=(Forbidden("scale_out", "KV is full on every replica; more replicas would not help."),),
    missing_signals=("gpu_xid",),
    symptom_visible=True,
    walked=(CAUSE, MECHANISM, RULED_OUT),
    signal_problems=(("gpu_xid", "HTTP 503"),),
    verdict="cause",
)


def test_sections_hold_every_part_in_order() -> None:
    s = sections(DIAGNOSIS)
    assert s.headline.title == "TPOT SLOW" and s.headline.at == "2026-10-14T17:46:40Z"
    assert s.headline.onset == "onset 17:26:40Z, 20m before"
    assert s.verdict.kind == "cause" and s.verdict.top is not None and s.verdict.top.cause == "kv_pressure"
    assert [c.summary for c in s.also] == ["batch_oversized 0.50 (via kv_pressure)"]
    assert [(a.index, a.text, a.confirm) for a in s.actions] == [
        (1, "Check KV use per replica.", "max by (pod) (kv_usage_ratio)")
    ]
    assert [(f.action, f.reason) for f in s.forbidden] == [("scale_out", DIAGNOSIS.forbidden[0].reason)]
    assert [(u.signal, u.reason) for u in s.unreadable] == [("gpu_xid", "HTTP 503")]
    assert s.missing == ("gpu_xid",)
    assert [c.cause for c in s.ruled_out] == ["gpu_fault"]


def test_the_brief_evidence_is_what_holds_and_what_is_required() -> None:
    top = sections(DIAGNOSIS).verdict.top
    assert top is not None
    assert [e.signal for e in top.brief] == ["kv_usage_ratio", "queue_waiting"]
    assert [e.signal for e in top.holding] == ["kv_usage_ratio"]
    assert [(e.mark, e.tone) for e in top.evidence] == [
        ("✔", "holds"),
        ("?", "unknown"),
        ("✘", "fails"),
        ("✘", "fails"),
    ]


def test_an_evidence_line_names_a_few_replicas_and_elides_the_rest() -> None:
    line = evidence_line(dataclasses.replace(HOLDS, replicas=("a", "b", "c", "d", "e")))
    assert line.spans == (
        Span("✔", "holds"),
        Span(" kv_usage_ratio >= 0.95 for 5m"),
        Span("  0.99 vs 0.6 before", "muted"),
        Span("  [a, b, c, d …]", "replicas"),
    )
    assert evidence_line(UNKNOWN).spans == (Span("?", "unknown"), Span(" preemption_rate > 0"))


def test_a_verdict_without_a_cause_says_why() -> None:
    real = sections(dataclasses.replace(DIAGNOSIS, causes=(), verdict="unexplained")).verdict
    assert (real.kind, real.tone, real.causes) == ("unexplained", "warn", ())
    assert real.message == "unexplained: tpot_slow is breached and no cause holds"
    assert real.sentence == real.message + " — see the blind spots"  # gpu_xid is missing
    quiet = sections(dataclasses.replace(DIAGNOSIS, causes=(), verdict="no_incident")).verdict
    assert (quiet.kind, quiet.tone) == ("no_incident", "ok")
    assert quiet.sentence == "no incident: tpot_slow is not breached server-side"


def test_the_verdict_is_the_diagnosis_own() -> None:
    """The sections take the walk's verdict as it is; a `cause` verdict with nothing ranked names nothing."""
    unexplained = sections(dataclasses.replace(DIAGNOSIS, verdict="unexplained")).verdict
    assert unexplained.kind == "unexplained" and unexplained.causes == ()
    assert sections(dataclasses.replace(DIAGNOSIS, causes=())).verdict.kind == "unexplained"
    mover = FirstMover("kv_usage_ratio", "vllm-2", "resource", DIAGNOSIS.at - 600, 0.6, 0.99)
    moved = sections(dataclasses.replace(DIAGNOSIS, causes=(), verdict="unexplained", first_movers=(mover,)))
    assert moved.verdict.sentence.endswith("— see the first movers")
    assert moved.first_movers[0].text == "kv_usage_ratio@vllm-2 (resource) 17:36:40Z 0.6 -> 0.99"


def test_an_ambiguous_verdict_names_each_cause_and_what_tells_it_apart() -> None:
    d = dataclasses.replace(
        DIAGNOSIS,
        verdict="ambiguous",
        ambiguous=(
            ("kv_pressure", "KV full: max (kv_usage_ratio)"),
            ("batch_oversized", "kubectl get deploy"),
        ),
    )
    s = sections(d)
    assert s.verdict.message == "ambiguous between kv_pressure and batch_oversized"
    assert [(c.label, c.tells) for c in s.verdict.contenders] == [
        ("kv_pressure (resource 0.91)", "KV full: max (kv_usage_ratio)"),
        ("batch_oversized (engine 0.50)", "kubectl get deploy"),
    ]
    assert s.others == ()  # both are named by the verdict


def test_forbidden_actions_split_into_tempting_and_red_lines() -> None:
    red = Forbidden(
        "tune_sampling", "Sampling has nothing to do with latency. Now: TPOT P99 0.09.", tempting=False
    )
    tempting = Forbidden(
        "raise_gpu_memory_utilization",
        "Leaves no headroom (OOM risk); never above 0.95. vLLM suggests it. Now: kv_usage_ratio 1 now.",
    )
    s = sections(dataclasses.replace(DIAGNOSIS, forbidden=(red, *DIAGNOSIS.forbidden, tempting)))
    assert [f.action for f in s.forbidden] == ["scale_out", "raise_gpu_memory_utilization", "tune_sampling"]
    assert [f.action for f in s.tempting] == ["scale_out", "raise_gpu_memory_utilization"]
    assert [f.action for f in s.red_lines] == ["tune_sampling"]
    raised = s.tempting[1]
    assert raised.first_sentence == "Leaves no headroom (OOM risk); never above 0.95."
    assert raised.now == "Now: kv_usage_ratio 1 now."
    assert s.tempting[0].now == ""  # a reason without the evidence of this incident


def test_unmonitored_sources_are_not_blind_spots() -> None:
    gateway = Unmonitored(
        "gateway", ("gateway_queue", "gateway_inflight"), ("gateway_bottleneck", "stale_backend")
    )
    s = sections(
        dataclasses.replace(
            DIAGNOSIS,
            missing_signals=("gpu_xid", "gateway_queue", "gateway_inflight"),
            unmonitored=(gateway,),
        )
    )
    assert s.blind == ("gpu_xid",) and len(s.missing) == 3
    assert s.unmonitored[0].text == "gateway (2 signals): gateway_bottleneck, stale_backend unprovable"


def test_past_evidence_is_marked() -> None:
    line = evidence_line(dataclasses.replace(HOLDS, live=False))
    assert line.past and line.spans[-1] == Span(" (past)", "muted")
    assert not evidence_line(dataclasses.replace(FAILS, live=False)).past  # only what held can be past


def test_walk_labels_mark_the_status() -> None:
    assert walked_cause(MECHANISM).label == (
        Span("✔ ", "holds"),
        Span("batch_oversized", "strong"),
        Span(" 0.50"),
        Span("  via kv_pressure", "muted"),
    )
    assert walked_cause(RULED_OUT).label == (
        Span("✘ ", "fails"),
        Span("gpu_fault"),
        Span("  ruled out", "muted"),
    )
    unproven = dataclasses.replace(RULED_OUT, status="unproven")
    assert walked_cause(unproven).label[0] == Span("? ", "unknown")


def test_the_sections_know_no_renderer() -> None:
    code = (
        "import sys\nimport triage.core.sections\n"
        "print([m for m in ('rich', 'textual', 'jinja2') if m in sys.modules])"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=60
    )
    assert result.stdout.strip() == "[]", result.stdout + result.stderr
