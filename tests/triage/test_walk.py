"""The walk: onset finding, ranking, the deepest-cause rule, and invariants over random frames."""

from __future__ import annotations

import json

import numpy as np
from conftest import frame_of, stepped
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from signals.vocabulary import SIGNALS
from triage.core.graph import TriageGraph
from triage.core.model import SYMPTOMS
from triage.core.playbook import Settings
from triage.core.walk import diagnose
from triage.core.windows import change_point, find_onset

N = 240
ONSET = 160


def test_change_point_finds_a_step_and_ignores_noise() -> None:
    times = np.arange(N) * 15.0
    found = change_point(times, stepped(0.4, 1.6, ONSET, N, noise=0.05), worse_up=True)
    assert found is not None and found[0] == times[ONSET] and found[1] > 20
    frame = frame_of({"ttft_p99_seconds": stepped(0.4, 0.4, 0, N, noise=0.05, seed=3)}, N)
    assert find_onset(frame, ["ttft_p99_seconds"], frame.end, Settings()) is None


def test_change_point_direction() -> None:
    frame = frame_of({"prefix_hit_ratio": stepped(0.6, 0.1, ONSET, N, noise=0.02)}, N)
    onset = find_onset(frame, ["prefix_hit_ratio"], frame.end, Settings())  # lower is worse for a hit ratio
    assert onset is not None and onset.time == frame.times[ONSET]
    frame = frame_of({"prefix_hit_ratio": stepped(0.1, 0.6, ONSET, N, noise=0.02)}, N)
    assert find_onset(frame, ["prefix_hit_ratio"], frame.end, Settings()) is None


def test_a_stale_xid_code_is_no_gpu_fault_by_itself_and_a_new_one_is(graph: TriageGraph) -> None:
    """Errors rise on replica `a`; its GPU has held XID 43 since long before. The old code alone
    names no GPU fault; a code that appears at the onset does."""
    series: dict[str, object] = {
        **replicas("error_ratio", {"a": stepped(0.001, 0.2, ONSET, N), "b": 0.001, "c": 0.001}),
        **replicas("request_rate", {"a": 5.0, "b": 5.0, "c": 5.0}),
        'gpu_xid{instance="a",gpu="0"}': 43.0,
        'gpu_xid{instance="b",gpu="0"}': 0.0,
        'gpu_xid{instance="c",gpu="0"}': 0.0,
    }
    frame = frame_of(series, N)
    stale = diagnose(graph, frame, "errors", frame.end)
    assert "gpu_fault" not in [c.cause for c in stale.causes]
    series['gpu_xid{instance="a",gpu="0"}'] = stepped(0, 79, ONSET, N)
    fresh = diagnose(graph, frame_of(series, N), "errors", frame.end)
    assert fresh.causes and fresh.causes[0].cause == "gpu_fault"


def replicas(signal: str, values: dict[str, object]) -> dict[str, object]:
    return {f'{signal}{{instance="{k}"}}': v for k, v in values.items()}


def routing_frame() -> dict[str, object]:
    names = "abcdef"
    series: dict[str, object] = {}
    hot = {n: (stepped(0.5, 0.99, ONSET, N) if n == "a" else 0.45) for n in names}
    series.update(replicas("kv_usage_ratio", hot))
    series.update(
        replicas("queue_waiting", {n: (stepped(1, 25, ONSET, N) if n == "a" else 0.5) for n in names})
    )
    series.update(
        replicas("preemption_rate", {n: (stepped(0, 2, ONSET, N) if n == "a" else 0.0) for n in names})
    )
    series.update(
        replicas("request_rate", {n: (stepped(4, 12, ONSET, N) if n == "a" else 3.0) for n in names})
    )
    series.update(
        replicas("ttft_p99_seconds", {n: (stepped(0.4, 3.0, ONSET, N) if n == "a" else 0.4) for n in names})
    )
    return series


def test_routing_is_the_deeper_cause_of_one_replica_thrashing(graph: TriageGraph) -> None:
    d = diagnose(graph, frame_of(routing_frame(), N), "ttft_slow")
    ranked = [c.cause for c in d.causes]
    assert ranked[0] == "routing_imbalance", ranked
    assert "kv_pressure" in ranked
    kv = next(c for c in d.causes if c.cause == "kv_pressure")
    assert "routing_imbalance" in kv.explained_by
    top = d.causes[0]
    holding = {e.signal for e in top.evidence if e.holds}
    assert {"queue_waiting", "request_rate"} <= holding
    assert any(e.replicas == ("a",) for e in top.evidence if e.holds)
    assert "scale_out" in {f.action for f in d.forbidden}
    assert "raise_gpu_memory_utilization" in {f.action for f in d.forbidden}


def test_no_departure_means_no_cause_but_red_lines_still_flagged(graph: TriageGraph) -> None:
    series = replicas(
        "ttft_p99_seconds", {n: stepped(0.4, 0.4, 0, N, noise=0.05, seed=i) for i, n in enumerate("abc")}
    )
    series.update(replicas("kv_usage_ratio", {n: 0.5 for n in "abc"}))
    d = diagnose(graph, frame_of(series, N), "ttft_slow")
    assert d.causes == ()
    assert d.symptom_visible is False
    flagged = {f.action: f.reason for f in d.forbidden}
    assert "scale_out" in flagged and "no cause departs from its baseline" in flagged["scale_out"]
    assert "request_rate" in d.missing_signals


def test_auto_without_any_symptom(graph: TriageGraph) -> None:
    d = diagnose(graph, frame_of({"request_rate": 5.0}, N), "auto")
    assert d.symptom == "none" and d.causes == ()


def test_missing_signal_is_listed_and_lowers_the_score(graph: TriageGraph) -> None:
    base = routing_frame()
    full = diagnose(graph, frame_of(base, N), "ttft_slow")
    reduced = {k: v for k, v in base.items() if not k.startswith("request_rate")}
    partial = diagnose(graph, frame_of(reduced, N), "ttft_slow")
    assert "request_rate" in partial.missing_signals and "request_rate" not in full.missing_signals
    assert partial.causes[0].cause == "routing_imbalance"
    assert partial.causes[0].score < full.causes[0].score


def test_capacity_shortage_is_the_one_case_scale_out_is_allowed(graph: TriageGraph) -> None:
    names = "abcd"
    ramp = np.concatenate([np.full(60, 5.0), np.linspace(5, 9, N - 60)])
    series: dict[str, object] = {}
    series.update(replicas("request_rate", {n: ramp for n in names}))
    series.update(replicas("queue_waiting", {n: stepped(0.5, 8, ONSET, N) for n in names}))
    series.update(replicas("ttft_p99_seconds", {n: stepped(0.4, 1.8, ONSET, N) for n in names}))
    series.update(replicas("prefix_hit_ratio", {n: 0.6 for n in names}))
    d = diagnose(graph, frame_of(series, N), "ttft_slow")
    assert d.causes and d.causes[0].cause == "capacity_shortage"
    assert "scale_out" not in {f.action for f in d.forbidden}


def test_deterministic(graph: TriageGraph) -> None:
    frame = frame_of(routing_frame(), N)
    first = json.dumps(diagnose(graph, frame, "auto").to_json(), sort_keys=True)
    again = json.dumps(diagnose(graph, frame_of(routing_frame(), N), "auto").to_json(), sort_keys=True)
    assert first == again


PER_REPLICA = [s for s, spec in SIGNALS.items() if spec.kind == "gauge"]


@st.composite
def random_frames(draw: st.DrawFn) -> dict[str, object]:
    n_replicas = draw(st.integers(1, 6))
    chosen = draw(st.lists(st.sampled_from(PER_REPLICA), min_size=1, max_size=10, unique=True))
    seed = draw(st.integers(0, 10_000))
    rng = np.random.default_rng(seed)
    series: dict[str, object] = {}
    for signal in chosen:
        base = float(rng.uniform(0.01, 100))
        for r in range(n_replicas):
            values = base * (1 + rng.normal(0, 0.05, N))
            if rng.random() < 0.5:
                at = int(rng.integers(20, N - 10))
                values[at:] *= float(rng.uniform(0.1, 5))
            if rng.random() < 0.2:
                values[int(rng.integers(10, N)) :] = np.nan  # a replica vanishes
            if SIGNALS[signal].unit == "ratio":
                values = np.clip(values / max(base * 5, 1e-9), 0, 1)
            series[f'{signal}{{instance="r{r}"}}'] = np.abs(values)
    if draw(st.booleans()):
        xid = np.zeros(N)
        xid[int(rng.integers(20, N)) :] = 79
        series['gpu_xid{instance="r0",gpu="0"}'] = xid
    return series


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(series=random_frames(), symptom=st.sampled_from([*SYMPTOMS, "auto"]), at_fraction=st.floats(0.2, 1.0))
def test_invariants_on_random_frames(
    graph: TriageGraph, series: dict[str, object], symptom: str, at_fraction: float
) -> None:
    frame = frame_of(series, N)
    at = float(frame.times[int(at_fraction * (N - 1))])
    d = diagnose(graph, frame, symptom, at)
    forbidden = {f.action for f in d.forbidden}
    for cause in d.causes:  # every ranked cause cites evidence
        assert any(e.holds for e in cause.evidence)
        assert any(e.holds and e.departure for e in cause.evidence)
        assert 0 < cause.score <= 1
    assert not forbidden & {a.id for a in d.first_actions}  # nothing both advised and forbidden
    top = d.causes[0].cause if d.causes else None
    assert ("scale_out" in forbidden) == (top != "capacity_shortage")
    for f in d.forbidden:
        assert f.reason.strip() and "Now:" in f.reason
    for cause in d.causes:  # an explainer always ranks above what it explains
        for other in cause.explains:
            assert [c.cause for c in d.causes].index(other) > [c.cause for c in d.causes].index(cause.cause)
    assert all(not frame.has(s) for s in d.missing_signals)
    json.dumps(d.to_json())  # always serialisable


def test_symptom_from_alert(graph: TriageGraph) -> None:
    from triage.core.walk import symptom_from_alert

    kb = graph.knowledge
    assert symptom_from_alert({"alertname": "X", "symptom": "cost_up"}, kb) == "cost_up"
    assert symptom_from_alert({"alertname": "LLMTTFTP99High"}, kb) == "ttft_slow"
    assert symptom_from_alert({"alertname": "InterTokenLatencyHigh"}, kb) == "tpot_slow"
    assert symptom_from_alert({"alertname": "LLMServingErrorRateHigh"}, kb) == "errors"
    assert symptom_from_alert({"alertname": "GatewayRateLimited429"}, kb) == "rejected"
    assert symptom_from_alert({"alertname": "DailySpendJump"}, kb) == "cost_up"
    assert symptom_from_alert({"alertname": "Watchdog"}, kb) is None
    assert symptom_from_alert({"symptom": "not_a_symptom"}, kb) is None


def test_visible_symptom_without_cause_says_so(graph: TriageGraph) -> None:
    from triage.core.render import to_text

    series = replicas("tpot_p99_seconds", {n: stepped(0.03, 0.09, ONSET, N) for n in "abc"})
    d = diagnose(graph, frame_of(series, N), "tpot_slow")
    assert d.symptom_visible is True and d.causes == ()
    assert d.verdict == "unexplained"
    assert to_text(d).startswith("VERDICT  unexplained: tpot_slow is breached and no cause holds")
