"""The verdict's mechanisms, each on a small synthetic frame and its confounder.

Every mechanism is general (a check kind, the windows, the ranking), so each test stages the
class of failure on whatever cause shows it most simply, then the look-alike that must be
answered differently: a floor under every ratio, events against their own past, evidence
that has ended, a birth inside the window, one tenant's rhythm, ties, the breach gate, the
first movers and their second opinion, what not to do first, what is not monitored.
"""

from __future__ import annotations

import numpy as np
from conftest import frame_of, stepped

from signals.frame import Series, SignalFrame, labels_of
from triage.core.checks import Context, evaluate
from triage.core.graph import TriageGraph
from triage.core.model import Diagnosis
from triage.core.playbook import CheckSpec, Settings
from triage.core.walk import diagnose
from triage.core.windows import make_windows

N = 480  # two hours at 15 s
ONSET = 320
NAMES = "abcdef"


def per_replica(signal: str, values: dict[str, object]) -> dict[str, object]:
    return {f'{signal}{{instance="{k}"}}': v for k, v in values.items()}


def noisy(level: float, seed: int, noise: float = 0.03) -> np.ndarray:
    return stepped(level, level, 0, N, noise=noise, seed=seed)


def healthy_fleet(rate: float = 4.0) -> dict[str, object]:
    """Six replicas at rest: every signal a cause reads, flat with a little noise."""
    series: dict[str, object] = {}
    for i, n in enumerate(NAMES):
        series.update(
            {
                f'request_rate{{instance="{n}"}}': noisy(rate, i),
                f'queue_waiting{{instance="{n}"}}': noisy(1.0, 10 + i),
                f'kv_usage_ratio{{instance="{n}"}}': noisy(0.45, 20 + i),
                f'ttft_p99_seconds{{instance="{n}"}}': noisy(0.4, 30 + i),
                f'tpot_p99_seconds{{instance="{n}"}}': noisy(0.03, 40 + i),
                f'requests_running{{instance="{n}"}}': noisy(12.0, 50 + i),
                f'prompt_tokens_p95{{instance="{n}"}}': noisy(1800.0, 60 + i),
                f'prefix_hit_ratio{{instance="{n}"}}': noisy(0.5, 70 + i),
                f'gpu_throttle{{instance="{n}",gpu="0"}}': 0.0,
                f'gpu_temp_celsius{{instance="{n}",gpu="0"}}': noisy(60.0, 80 + i, 0.01),
            }
        )
    series["replicas_ready"] = 6.0
    series["replicas_desired"] = 6.0
    series["error_ratio"] = noisy(0.001, 99)
    return series


def run(
    graph: TriageGraph, series: dict[str, object], symptom: str = "ttft_slow", steps: int = N
) -> Diagnosis:
    return diagnose(graph, frame_of(series, steps), symptom)


def causes(d: Diagnosis) -> list[str]:
    return [c.cause for c in d.causes]


# ------------------------------------------------------------------ the breach gate and floors


def test_a_symptom_the_server_does_not_see_is_no_incident(graph: TriageGraph) -> None:
    d = run(graph, healthy_fleet())
    assert d.verdict == "no_incident" and d.causes == ()
    assert any("not breached" in n for n in d.notes)
    assert "scale_out" in {f.action for f in d.forbidden}


def test_a_near_zero_rate_that_triples_is_no_burst_and_a_real_one_is(graph: TriageGraph) -> None:
    trickle = healthy_fleet(rate=0.01)
    trickle.update(per_replica("request_rate", {n: stepped(0.01, 0.03, ONSET, N) for n in NAMES}))
    d = run(graph, trickle, "rejected")
    assert d.verdict == "no_incident" and "traffic_burst" not in causes(d)

    burst = healthy_fleet()
    burst.update(
        per_replica("request_rate", {n: stepped(4, 12, ONSET, N, 0.02, i) for i, n in enumerate(NAMES)})
    )
    burst.update(per_replica("queue_waiting", {n: stepped(1, 40, ONSET + 4, N) for n in NAMES}))
    burst.update(per_replica("ttft_p99_seconds", {n: stepped(0.4, 2.5, ONSET + 4, N) for n in NAMES}))
    d = run(graph, burst)
    assert d.verdict in ("cause", "ambiguous") and causes(d)[0] == "traffic_burst"


def test_a_rise_under_the_floor_fails_and_says_so() -> None:
    frame = frame_of({"request_rate": stepped(0.05, 0.15, ONSET, N)}, N)
    settings = Settings(floors={"request_rate": 0.5})
    ctx = Context(frame, make_windows(frame, frame.end, frame.times[ONSET], settings), settings.floors)
    result = evaluate(ctx, CheckSpec(kind="rise", signal="request_rate", factor=1.4))
    assert result.holds is False and "floor" in result.note
    bare = Context(frame, make_windows(frame, frame.end, frame.times[ONSET], settings))
    assert evaluate(bare, CheckSpec(kind="rise", signal="request_rate", factor=1.4)).holds is True


def test_a_breach_below_the_alerting_lines_is_still_a_breach(graph: TriageGraph) -> None:
    """TTFT 0.4 -> 0.7 s: under the 1 s SLO and under 2x, but a real move on every replica."""
    series = healthy_fleet()
    series.update(per_replica("ttft_p99_seconds", {n: stepped(0.4, 0.7, ONSET, N) for n in NAMES}))
    d = run(graph, series)
    assert d.symptom_visible is False and d.verdict != "no_incident"


def test_breached_with_no_cause_is_unexplained_and_first_movers_answer(graph: TriageGraph) -> None:
    series = healthy_fleet()
    series.update(
        per_replica(
            "ttft_p99_seconds", {n: stepped(0.4, 2.4, ONSET, N, 0.02, i) for i, n in enumerate(NAMES)}
        )
    )
    d = run(graph, series)
    assert d.verdict == "unexplained" and d.causes == ()
    assert [m.signal for m in d.first_movers][:1] == ["ttft_p99_seconds"]
    assert d.to_json()["first_movers"][0]["change"].startswith("0.4")


# ------------------------------------------------------------------ events against their own past


def _throttle(graph: TriageGraph, flag: np.ndarray) -> Diagnosis:
    series = healthy_fleet()
    series['gpu_throttle{instance="c",gpu="0"}'] = flag
    series.update(
        per_replica(
            "tpot_p99_seconds", {n: stepped(0.03, 0.09 if n == "c" else 0.03, ONSET, N) for n in NAMES}
        )
    )
    return run(graph, series, "tpot_slow")


def test_a_flag_blinking_at_its_usual_rate_is_background_and_a_new_one_is_not(graph: TriageGraph) -> None:
    blinking = (np.arange(N) % 8 == 3).astype(float)
    d = _throttle(graph, blinking)
    assert "gpu_throttling" not in causes(d)
    throttle = next(
        e for f in d.walked if f.cause == "gpu_throttling" for e in f.evidence if e.signal == "gpu_throttle"
    )
    assert throttle.holds is False

    held = np.where(np.arange(N) >= ONSET, 1.0, blinking)
    assert causes(_throttle(graph, held))[:1] == ["gpu_throttling"]


# ------------------------------------------------------------------ evidence must be live


def test_a_gap_that_closed_before_the_last_minutes_is_past_evidence() -> None:
    ready = np.where((np.arange(N) >= ONSET) & (np.arange(N) < ONSET + 40), 5.0, 6.0)
    frame = frame_of({"replicas_ready": ready, "replicas_desired": 6.0}, N)
    ctx = Context(frame, make_windows(frame, frame.end, frame.times[ONSET], Settings()))
    check = CheckSpec(kind="shortfall", signal="replicas_ready", of="replicas_desired", within="15m")
    result = evaluate(ctx, check)
    assert result.holds is True and result.live is False and "closed again" in result.note
    still = frame_of(
        {"replicas_ready": np.where(np.arange(N) >= ONSET, 5.0, 6.0), "replicas_desired": 6.0}, N
    )
    ctx = Context(still, make_windows(still, still.end, still.times[ONSET], Settings()))
    assert evaluate(ctx, check).live is True


# ------------------------------------------------------------------ a series born inside the window


def test_no_onset_at_a_birth_and_the_answer_says_there_is_no_history(graph: TriageGraph) -> None:
    """A fleet deployed 40 minutes ago: its rates climb from zero while their windows fill."""
    steps = 160
    climb = np.minimum(np.arange(steps) / 16.0, 1.0)
    series = {
        k: (np.asarray(v) if not np.isscalar(v) else np.full(N, float(v)))[:steps]
        for k, v in healthy_fleet().items()
    }
    for n in NAMES:
        series[f'request_rate{{instance="{n}"}}'] = 4.0 * climb
    d = diagnose(graph, frame_of(series, steps), "auto")
    assert d.verdict == "no_incident" and d.causes == ()
    assert d.onset is None or d.onset >= d.at - 3600 + 300
    assert d.history_start is not None and any("no baseline before it" in n for n in d.notes)


def test_births_are_the_first_sample_and_every_resumption_after_a_hole() -> None:
    values = np.ones(N)
    values[200:240] = np.nan
    frame = frame_of({"request_rate": values}, N)
    assert frame.births() == (frame.times[0], frame.times[240])
    warm = frame.warm(300.0)
    assert warm[:20].all() and not warm[20:200].any() and warm[240:260].all()


# ------------------------------------------------------------------ one tenant is not the fleet


def test_a_tenant_with_its_own_rhythm_does_not_make_a_burst(graph: TriageGraph) -> None:
    """A batch tenant runs ten minutes in thirty at four times its rest, before the onset and
    after alike; the diagnosis lands inside one of its runs. Its run is its habit."""
    series = healthy_fleet()
    series['request_rate{tenant="batch"}'] = np.where((np.arange(N) % 120) >= 80, 40.0, 10.0)
    series.update(per_replica("ttft_p99_seconds", {n: stepped(0.4, 2.4, ONSET, N) for n in NAMES}))
    assert "traffic_burst" not in causes(run(graph, series))

    new = dict(series)
    new['request_rate{tenant="batch"}'] = np.where(np.arange(N) >= 440, 40.0, 10.0)
    assert "traffic_burst" in causes(run(graph, new)), "a tenant that leaves its own range still counts"


# ------------------------------------------------------------------ ties, the tie-break, first movers


def test_two_independent_causes_scoring_alike_are_ambiguous_with_what_tells_them_apart(
    graph: TriageGraph,
) -> None:
    """Two replicas lost and the prefix cache collapsed at the same minute: neither explains
    the other, and they score alike."""
    series = healthy_fleet()
    series.update(per_replica("ttft_p99_seconds", {n: stepped(0.4, 2.4, ONSET, N) for n in NAMES}))
    series.update(per_replica("prefix_hit_ratio", {n: stepped(0.6, 0.1, ONSET, N) for n in NAMES}))
    series["replicas_ready"] = stepped(6, 4, ONSET, N)
    d = run(graph, series)
    assert d.verdict == "ambiguous"
    named = [c for c, _ in d.ambiguous]
    assert set(named) == {"replica_down", "prefix_cache_miss"} and named[0] == causes(d)[0]
    apart = dict(d.ambiguous)
    assert "replicas_ready" in apart["replica_down"] and "prefix_hit_ratio" in apart["prefix_cache_miss"]
    assert "confirm:" in apart["prefix_cache_miss"]

    alone = healthy_fleet()
    alone.update(per_replica("ttft_p99_seconds", {n: stepped(0.4, 2.4, ONSET, N) for n in NAMES}))
    alone.update(per_replica("prefix_hit_ratio", {n: stepped(0.6, 0.1, ONSET, N) for n in NAMES}))
    d = run(graph, alone)
    assert d.verdict == "cause" and causes(d)[0] == "prefix_cache_miss" and d.ambiguous == ()


def test_a_cause_and_the_mechanism_it_explains_are_one_answer_not_a_tie(graph: TriageGraph) -> None:
    """Replicas lost and the survivors' KV full: replica_down explains kv_pressure; the chain
    scores alike by construction and is still a cause, not a tie."""
    series = healthy_fleet()
    series.update(per_replica("ttft_p99_seconds", {n: stepped(0.4, 2.4, ONSET, N) for n in NAMES}))
    series["replicas_ready"] = stepped(6, 4, ONSET, N)
    series.update(per_replica("kv_usage_ratio", {n: stepped(0.45, 0.99, ONSET, N) for n in NAMES}))
    series["preemption_rate"] = stepped(0, 2, ONSET, N)
    d = run(graph, series)
    assert causes(d)[:2] == ["replica_down", "kv_pressure"] and d.verdict == "cause"


def test_first_movers_name_the_replica_that_moved_alone_and_order_by_time(graph: TriageGraph) -> None:
    series = healthy_fleet()
    series['gpu_temp_celsius{instance="c",gpu="0"}'] = stepped(60, 90, ONSET - 8, N)
    series.update(
        per_replica(
            "tpot_p99_seconds", {n: stepped(0.03, 0.09 if n == "c" else 0.03, ONSET, N) for n in NAMES}
        )
    )
    d = run(graph, series, "tpot_slow")
    movers = [(m.signal, m.replica) for m in d.first_movers]
    assert ("gpu_temp_celsius", "c") in movers and ("tpot_p99_seconds", "c") in movers
    assert movers.index(("gpu_temp_celsius", "c")) < movers.index(("tpot_p99_seconds", "c"))
    assert [m.moved_at for m in d.first_movers] == sorted(m.moved_at for m in d.first_movers)


# ------------------------------------------------------------------ what not to do, and what is not seen


def test_scale_out_is_tempting_while_queues_rise_and_a_red_line_otherwise(graph: TriageGraph) -> None:
    series = healthy_fleet()
    series.update(per_replica("queue_waiting", {n: stepped(1, 40, ONSET, N) for n in NAMES}))
    series.update(per_replica("ttft_p99_seconds", {n: stepped(0.4, 2.4, ONSET, N) for n in NAMES}))
    d = run(graph, series)
    flagged = {f.action: f for f in d.forbidden}
    assert flagged["scale_out"].tempting and not flagged["tune_sampling"].tempting
    tempting = [f.tempting for f in d.forbidden]
    assert tempting == sorted(tempting, reverse=True), "tempting actions come first"

    quiet = run(graph, healthy_fleet())
    assert not {f.action: f for f in quiet.forbidden}["scale_out"].tempting


def test_an_exporter_the_fleet_does_not_run_is_not_monitored(graph: TriageGraph) -> None:
    series = healthy_fleet()
    series.update(per_replica("ttft_p99_seconds", {n: stepped(0.4, 2.4, ONSET, N) for n in NAMES}))
    d = run(graph, series)
    sources = {u.source: u for u in d.unmonitored}
    assert "gateway" in sources and "gateway_queue" in sources["gateway"].signals
    assert "gateway_bottleneck" in sources["gateway"].causes
    assert "engine" not in sources and "gpu exporter (DCGM)" not in sources


def test_sampling_is_forbidden_on_every_symptom(graph: TriageGraph) -> None:
    for symptom in graph.knowledge.symptoms:
        d = run(graph, healthy_fleet(), symptom)
        assert "tune_sampling" in {f.action for f in d.forbidden}, symptom


# ------------------------------------------------------------------ kinds added for the mechanisms


def test_symptom_is_and_a_product_of_signals() -> None:
    frame = frame_of(
        {"prefix_hit_ratio": stepped(0.6, 0.3, ONSET, N), "prompt_tokens_p95": stepped(1000, 2000, ONSET, N)},
        N,
    )
    windows = make_windows(frame, frame.end, frame.times[ONSET], Settings())
    ctx = Context(frame, windows, symptom="quality_down")
    assert evaluate(ctx, CheckSpec(kind="symptom_is", values=("quality_down",))).holds is True
    assert evaluate(ctx, CheckSpec(kind="symptom_is", values=("ttft_slow",))).holds is False
    cached = CheckSpec(
        kind="steady", signal="prefix_hit_ratio", times="prompt_tokens_p95", factor=1.3, direction="low"
    )
    assert evaluate(ctx, cached).holds is True  # the ratio halved as prompts doubled: cached tokens held
    collapsed = frame_of(
        {"prefix_hit_ratio": stepped(0.6, 0.1, ONSET, N), "prompt_tokens_p95": stepped(1000, 2000, ONSET, N)},
        N,
    )
    ctx = Context(collapsed, make_windows(collapsed, collapsed.end, collapsed.times[ONSET], Settings()))
    assert evaluate(ctx, cached).holds is False


def test_warm_steps_stay_out_of_onsets_without_copying_the_frame() -> None:
    series = [
        Series("request_rate", labels_of({}), np.concatenate([np.linspace(0, 4, 20), np.full(N - 20, 4.0)]))
    ]
    frame = SignalFrame(1_760_000_000.0 + 15.0 * np.arange(N), series)
    from triage.core.windows import find_onset

    assert find_onset(frame, ["request_rate"], frame.end, Settings()) is None
    assert frame.series[0].values[0] == 0.0  # the frame itself is untouched
