"""The edge as a cause: each edge incident and its confounder diagnosed with the evidence that
tells them apart, scale-out refused with that evidence, and the playbook keys that carry it."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from signals.fixture import load_fixture
from triage.core.graph import TriageGraph
from triage.core.model import Diagnosis
from triage.core.walk import diagnose
from triage.replay import fixture_symptom

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"


def run(graph: TriageGraph, name: str, drop: tuple[str, ...] = ()) -> Diagnosis:
    fixture = load_fixture(str(FIXTURES / f"{name}.yaml"))
    frame = fixture.frame
    if drop:
        frame = replace(frame, series=[s for s in frame.series if s.signal not in drop])
    symptom, source = fixture_symptom(fixture, None, graph.knowledge)
    return diagnose(graph, frame, symptom, fixture.at, source=source)


def holding(d: Diagnosis, cause: str) -> dict[str, str]:
    finding = next(c for c in d.causes if c.cause == cause)
    return {e.check: e.note for e in finding.evidence if e.holds}


def forbidden(d: Diagnosis) -> dict[str, str]:
    return {f.action: f.reason for f in d.forbidden}


# cause, the evidence that must hold for it (a piece of each check text), the confounder's fixture
# and the cause it must name instead
CASES = {
    "gateway-bottleneck-single-router": (
        "gateway_bottleneck",
        ["gateway_queue >= 3x", "queue_waiting not above", "kv_usage_ratio not above"],
        "the edge is what is short",
    ),
    "stale-backend-deleted-pod-routed": (
        "stale_backend",
        ["replicas_ready below backends_routed", "upstream_error_ratio >= 3x"],
        "backend set is wrong",
    ),
    "probe-restart-loop-slow-load": (
        "probe_restart_loop",
        ["probe_failures > 0", "no oom_killed", "no build_info"],
        "the probes kill engines",
    ),
    "rate-limit-double-count": (
        "rate_limit_misconfigured",
        ["rejected_ratio >= 3x", "request_rate not above", "queue_waiting not above"],
        "the limiter refuses or over-admits",
    ),
    "rate-limit-inflight-drift": (
        "rate_limit_misconfigured",
        ["gateway_inflight below 0.8x (requests_running + queue_waiting)"],
        "the limiter refuses or over-admits",
    ),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_edge_cause_named_with_its_evidence_and_scale_out_refused_for_it(
    graph: TriageGraph, name: str
) -> None:
    cause, checks, because = CASES[name]
    d = run(graph, name)
    assert d.causes and d.causes[0].cause == cause
    held = holding(d, cause)
    for piece in checks:
        assert any(piece in check for check in held), (piece, sorted(held))
    reasons = forbidden(d)
    assert "scale_out" in reasons and "tune_sampling" in reasons
    assert f"the top cause is {cause}" in reasons["scale_out"] and because in reasons["scale_out"]


CONFOUNDERS = {
    "capacity-shortage-behind-gateway": ("capacity_shortage", "gateway_bottleneck"),
    "replica-down-router-follows": ("replica_down", "stale_backend"),
    "engine-oom-with-probe-failures": ("engine_oom", "probe_restart_loop"),
    "rollout-with-probe-failures": ("rollout_disruption", "probe_restart_loop"),
    "traffic-burst-behind-gateway": ("traffic_burst", "rate_limit_misconfigured"),
}


@pytest.mark.parametrize("name", sorted(CONFOUNDERS))
def test_confounder_keeps_its_own_cause_and_the_edge_cause_says_why_not(
    graph: TriageGraph, name: str
) -> None:
    cause, edge = CONFOUNDERS[name]
    d = run(graph, name)
    assert d.causes[0].cause == cause
    assert d.causes[0].cause != edge
    ranked = [c.cause for c in d.causes]
    if edge in ranked:
        assert ranked.index(edge) > 0
    else:
        why = next(f for f in d.walked if f.cause == edge)
        below = why.status == "ranked" and why.score < graph.knowledge.settings.min_score
        assert below or (why.status in ("ruled_out", "no_departure", "unproven") and why.why_not)
    if cause == "capacity_shortage":
        assert "scale_out" not in forbidden(d)
    else:
        assert "scale_out" in forbidden(d)


def test_gateway_bottleneck_ruled_out_when_the_engines_queue_too(graph: TriageGraph) -> None:
    d = run(graph, "capacity-shortage-behind-gateway")
    finding = next(f for f in d.walked if f.cause == "gateway_bottleneck")
    assert finding.status == "ruled_out" and "queue_waiting not above" in finding.why_not


def test_probe_loop_is_unproven_without_probe_data(graph: TriageGraph) -> None:
    """Restarts with no OOM and no rollout are not a probe loop unless the probes are seen failing."""
    d = run(graph, "probe-restart-loop-slow-load", drop=("probe_failures",))
    finding = next(f for f in d.walked if f.cause == "probe_restart_loop")
    assert finding.status == "unproven" and "probe_failures" in finding.why_not
    assert "probe_failures" in d.missing_signals


def test_gateway_bottleneck_is_unproven_without_edge_data(graph: TriageGraph) -> None:
    d = run(graph, "gateway-bottleneck-single-router", drop=("gateway_queue", "gateway_latency_p99_seconds"))
    finding = next(f for f in d.walked if f.cause == "gateway_bottleneck")
    assert finding.status == "unproven"
    assert d.causes == () or d.causes[0].cause != "gateway_bottleneck"


def test_sampling_is_forbidden_after_a_release_and_defaults_are_aligned_instead(graph: TriageGraph) -> None:
    """Sampling is never a first action, a quality drop after a release included: restoring the
    previous release's generation defaults is version alignment, which the first actions do."""
    d = run(graph, "version-change")
    assert d.causes[0].cause == "version_change"
    assert "tune_sampling" in forbidden(d)
    assert "diff_sampling_defaults" in [a.id for a in d.causes[0].actions]


def test_refusing_gpu_memory_utilization_says_why_against_vllms_own_advice(graph: TriageGraph) -> None:
    reason = graph.knowledge.forbidden["raise_gpu_memory_utilization"].reason
    for piece in ("0.95", "activations", "CUDA graphs", "preemption warning"):
        assert piece in reason
