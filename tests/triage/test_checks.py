"""Each check kind on synthetic frames: holds, fails, and stays unknown without data."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import STEP, frame_of, stepped

from triage.core.checks import Context, evaluate, evaluate_entry
from triage.core.playbook import AnyOf, CheckSpec, Settings
from triage.core.windows import make_windows

N = 240  # one hour at 15 s
ONSET = 160  # index of the onset


def ctx_for(series: dict[str, object], onset: int | None = ONSET) -> Context:
    frame = frame_of(series, N)
    t_onset = frame.times[onset] if onset is not None else None
    return Context(frame, make_windows(frame, frame.end, t_onset, Settings()))


def check(**kw: object) -> CheckSpec:
    return CheckSpec.model_validate(kw)


def test_rise_holds_fails_and_reports_values() -> None:
    ctx = ctx_for({"prompt_tokens_p95": stepped(1000, 3000, ONSET, N, noise=0.03)})
    e = evaluate(ctx, check(kind="rise", signal="prompt_tokens_p95", factor=1.5, min_delta=200))
    assert e.holds is True and e.departure
    assert e.value == pytest.approx(3000, rel=0.05) and e.baseline == pytest.approx(1000, rel=0.05)
    assert evaluate(ctx, check(kind="rise", signal="prompt_tokens_p95", factor=4.0)).holds is False
    assert evaluate(ctx, check(kind="drop", signal="prompt_tokens_p95")).holds is False


def test_rise_needs_the_absolute_delta_too() -> None:
    ctx = ctx_for({"error_ratio": stepped(0.0001, 0.0005, ONSET, N)})
    assert evaluate(ctx, check(kind="rise", signal="error_ratio", factor=2.0)).holds is True
    assert evaluate(ctx, check(kind="rise", signal="error_ratio", factor=2.0, min_delta=0.005)).holds is False


def test_rise_from_zero() -> None:
    ctx = ctx_for({"preemption_rate": stepped(0, 3, ONSET, N)})
    assert evaluate(ctx, check(kind="rise", signal="preemption_rate", min_delta=0.05)).holds is True


def test_missing_signal_is_unknown_never_false() -> None:
    ctx = ctx_for({"request_rate": 5.0})
    for spec in (
        check(kind="rise", signal="kv_usage_ratio"),
        check(kind="above", signal="kv_usage_ratio", threshold=0.9),
        check(kind="event", signal="gpu_xid"),
        check(kind="outlier", signal="queue_waiting"),
        check(kind="broad", signal="queue_waiting"),
        check(kind="change", signal="build_info"),
        check(kind="steady", signal="cost_per_1k_tokens"),
    ):
        e = evaluate(ctx, spec)
        assert e.holds is None, spec.kind
        assert "missing" in e.note


def test_drop() -> None:
    ctx = ctx_for({"prefix_hit_ratio": stepped(0.65, 0.15, ONSET, N, noise=0.02)})
    assert (
        evaluate(ctx, check(kind="drop", signal="prefix_hit_ratio", factor=0.75, min_delta=0.1)).holds is True
    )
    ctx = ctx_for({"prefix_hit_ratio": stepped(0.65, 0.6, ONSET, N)})
    assert (
        evaluate(ctx, check(kind="drop", signal="prefix_hit_ratio", factor=0.75, min_delta=0.1)).holds
        is False
    )


def test_above_is_sustained_and_a_departure_only_when_it_crossed() -> None:
    ctx = ctx_for(
        {'kv_usage_ratio{instance="a"}': stepped(0.5, 0.99, ONSET, N), 'kv_usage_ratio{instance="b"}': 0.5}
    )
    spec = check(kind="above", signal="kv_usage_ratio", threshold=0.95, view="max_replica")
    e = evaluate(ctx, spec)
    assert e.holds is True and e.departure
    assert (
        evaluate(ctx, check(kind="above", signal="kv_usage_ratio", threshold=0.95)).holds is False
    )  # fleet mean
    always = ctx_for({"kv_usage_ratio": 0.97})
    e = evaluate(always, check(kind="above", signal="kv_usage_ratio", threshold=0.95))
    assert e.holds is True and not e.departure


def test_event_new_versus_old() -> None:
    xid = np.zeros(N)
    xid[ONSET + 4 :] = 79
    ctx = ctx_for({'gpu_xid{instance="a",gpu="0"}': xid, 'gpu_xid{instance="b",gpu="0"}': 0.0})
    e = evaluate(ctx, check(kind="event", signal="gpu_xid"))
    assert e.holds is True and e.replicas == ("a",) and e.value == 79
    old = ctx_for({'gpu_xid{instance="a",gpu="0"}': 43.0})
    assert evaluate(old, check(kind="event", signal="gpu_xid")).holds is False


def test_xid_is_the_last_code_so_only_a_code_that_appears_or_changes_is_new() -> None:
    """DCGM_FI_DEV_XID_ERRORS holds the last code after the fault: one held from before is old news."""
    xid_check = check(kind="event", signal="gpu_xid")
    stale = evaluate(ctx_for({'gpu_xid{instance="a",gpu="0"}': 43.0}), xid_check)
    assert stale.holds is False and "43, held from before" in stale.note
    changed = evaluate(ctx_for({'gpu_xid{instance="a",gpu="0"}': stepped(43, 79, ONSET + 2, N)}), xid_check)
    assert changed.holds is True and changed.value == 79 and changed.replicas == ("a",)
    # A replica's GPUs are read apart: GPU 0's old 43 neither hides nor stands in for GPU 1's new 13.
    two = {
        'gpu_xid{instance="a",gpu="0"}': 43.0,
        'gpu_xid{instance="a",gpu="1"}': stepped(0, 13, ONSET + 2, N),
    }
    e = evaluate(ctx_for(two), xid_check)
    assert e.holds is True and e.value == 13 and e.replicas == ("a",)


def test_an_old_xid_code_on_a_new_pod_of_the_same_gpu_is_not_new() -> None:
    """A pod replaced during the incident gets new series on the same GPU (same UUID), carrying
    the code the GPU has held for hours: the pod changed, the code did not."""
    old_pod = np.where(np.arange(N) < ONSET - 30, 43.0, np.nan)
    new_pod = np.where(np.arange(N) >= ONSET - 28, 43.0, np.nan)
    series = {
        'gpu_xid{instance="vllm-old",gpu="0",UUID="GPU-1"}': old_pod,
        'gpu_xid{instance="vllm-new",gpu="0",UUID="GPU-1"}': new_pod,
    }
    assert evaluate(ctx_for(series), check(kind="event", signal="gpu_xid")).holds is False
    new_pod[ONSET:] = 79
    e = evaluate(ctx_for(series), check(kind="event", signal="gpu_xid"))
    assert e.holds is True and e.replicas == ("vllm-new",) and e.value == 79
    # Without the UUID the new pod's series has no history: its first code counts as new,
    # when the record itself began before it (a pod born mid-record, not the record's birth).
    bare = {
        'gpu_xid{instance="vllm-new",gpu="0"}': np.where(np.arange(N) >= ONSET - 28, 43.0, np.nan),
        'gpu_xid{instance="vllm-other",gpu="1"}': np.zeros(N),
    }
    assert evaluate(ctx_for(bare), check(kind="event", signal="gpu_xid")).holds is True


def test_change_of_info_labels() -> None:
    before = np.where(np.arange(N) < ONSET, 1.0, np.nan)
    after = np.where(np.arange(N) >= ONSET, 1.0, np.nan)
    ctx = ctx_for(
        {
            'build_info{instance="a",engine_version="0.10.1",model="m"}': before,
            'build_info{instance="a",engine_version="0.11.0",model="m"}': after,
        }
    )
    e = evaluate(ctx, check(kind="change", signal="build_info"))
    assert e.holds is True and "engine_version 0.10.1 -> 0.11.0" in e.note
    assert evaluate(ctx, check(kind="change", signal="build_info", labels=("model",))).holds is False


def test_label_is() -> None:
    ctx = ctx_for({'config_info{instance="a",chunked_prefill="false"}': 1.0})
    assert (
        evaluate(
            ctx,
            check(kind="label_is", signal="config_info", label="chunked_prefill", values=("false", "off")),
        ).holds
        is True
    )
    ctx = ctx_for({'config_info{instance="a",chunked_prefill="true"}': 1.0})
    assert (
        evaluate(
            ctx,
            check(kind="label_is", signal="config_info", label="chunked_prefill", values=("false", "off")),
        ).holds
        is False
    )


def fleet(values: dict[str, object], signal: str = "queue_waiting") -> dict[str, object]:
    return {f'{signal}{{instance="{name}"}}': v for name, v in values.items()}


def test_outlier_one_hot_replica() -> None:
    ctx = ctx_for(fleet({"a": stepped(1, 30, ONSET, N), "b": 1.0, "c": 1.5, "d": 0.8, "e": 1.2}))
    e = evaluate(ctx, check(kind="outlier", signal="queue_waiting", factor=3, min_delta=3))
    assert e.holds is True and e.replicas == ("a",)


def test_outlier_not_when_everyone_moved() -> None:
    ctx = ctx_for(fleet({n: stepped(1, 30, ONSET, N) for n in "abcde"}))
    assert evaluate(ctx, check(kind="outlier", signal="queue_waiting", factor=3, min_delta=3)).holds is False


def test_outlier_needs_three_replicas() -> None:
    ctx = ctx_for(fleet({"a": 30.0, "b": 1.0}))
    assert evaluate(ctx, check(kind="outlier", signal="queue_waiting")).holds is None


def test_outlier_low_direction() -> None:
    ctx = ctx_for(fleet({"a": 0.1, "b": 0.6, "c": 0.62, "d": 0.58}, "prefix_hit_ratio"))
    assert evaluate(ctx, check(kind="outlier", signal="prefix_hit_ratio", factor=1.5, direction="low")).holds


def test_broad_share_of_replicas() -> None:
    moved = fleet(
        {
            "a": stepped(1, 10, ONSET, N),
            "b": stepped(1, 10, ONSET, N),
            "c": stepped(1, 10, ONSET, N),
            "d": 1.0,
        }
    )
    spec = check(kind="broad", signal="queue_waiting", factor=1.5, min_delta=1, share=0.6)
    assert evaluate(ctx_for(moved), spec).holds is True
    one = fleet({"a": stepped(1, 10, ONSET, N), "b": 1.0, "c": 1.0, "d": 1.0})
    assert evaluate(ctx_for(one), spec).holds is False


def test_sudden_versus_gradual() -> None:
    burst = ctx_for({"request_rate": stepped(20, 45, ONSET, N, noise=0.03)})
    ramp_values = np.concatenate([np.full(40, 20.0), np.linspace(20, 45, N - 40)])
    ramp = ctx_for({"request_rate": ramp_values}, onset=200)
    sudden = check(kind="sudden", signal="request_rate", factor=1.4, within="10m", share=0.6)
    gradual = check(
        kind="gradual", signal="request_rate", factor=1.2, within="10m", share=0.5, baseline="long"
    )
    assert evaluate(burst, sudden).holds is True
    assert evaluate(burst, gradual).holds is False
    assert evaluate(ramp, gradual).holds is True
    assert evaluate(ramp, sudden).holds is False
    flat = ctx_for({"request_rate": 20.0})
    assert evaluate(flat, sudden).holds is False and evaluate(flat, gradual).holds is False


def test_shortfall() -> None:
    ctx = ctx_for({"replicas_ready": stepped(8, 6, ONSET, N), "replicas_desired": 8.0})
    e = evaluate(ctx, check(kind="shortfall", signal="replicas_ready", of="replicas_desired"))
    assert e.holds is True and e.value == 6 and e.baseline == 8
    always_short = ctx_for({"replicas_ready": 6.0, "replicas_desired": 8.0})
    assert (
        evaluate(always_short, check(kind="shortfall", signal="replicas_ready", of="replicas_desired")).holds
        is False
    )


def test_replicas_lost() -> None:
    gone = np.where(np.arange(N) < ONSET, 1.0, np.nan)
    ctx = ctx_for(fleet({"a": 1.0, "b": 1.0, "c": gone}))
    e = evaluate(ctx, check(kind="replicas_lost"))
    assert e.holds is True and e.replicas == ("c",)
    replaced = np.where(np.arange(N) >= ONSET, 1.0, np.nan)
    ctx = ctx_for(fleet({"a": 1.0, "b": 1.0, "c": gone, "c2": replaced}))
    assert evaluate(ctx, check(kind="replicas_lost")).holds is False


def test_wave_of_restarts() -> None:
    def pulse(at: int) -> np.ndarray:
        v = np.zeros(N)
        v[at : at + 8] = 1
        return v

    ctx = ctx_for(
        fleet({"a": pulse(ONSET), "b": pulse(ONSET + 20), "c": pulse(ONSET + 40), "d": 0.0}, "restarts")
    )
    e = evaluate(ctx, check(kind="wave", signal="restarts", min_count=2))
    assert e.holds is True and e.replicas == ("a", "b", "c")
    same_time = ctx_for(fleet({"a": pulse(ONSET), "b": pulse(ONSET), "c": 0.0}, "restarts"))
    assert evaluate(same_time, check(kind="wave", signal="restarts", min_count=2)).holds is False


def test_steady() -> None:
    assert (
        evaluate(
            ctx_for({"cost_per_1k_tokens": 0.002}),
            check(kind="steady", signal="cost_per_1k_tokens", factor=1.1),
        ).holds
        is True
    )
    moved = ctx_for({"cost_per_1k_tokens": stepped(0.002, 0.003, ONSET, N)})
    assert evaluate(moved, check(kind="steady", signal="cost_per_1k_tokens", factor=1.1)).holds is False


def test_any_group_holds_if_one_member_holds() -> None:
    ctx = ctx_for({"prompt_tokens_p95": 1000.0, "long_prompt_ratio": stepped(0.02, 0.3, ONSET, N)})
    group = AnyOf.model_validate(
        {
            "any": [
                {"kind": "rise", "signal": "prompt_tokens_p95", "factor": 1.5},
                {"kind": "rise", "signal": "long_prompt_ratio", "factor": 2.0},
            ]
        }
    )
    e = evaluate_entry(ctx, group)
    assert e.holds is True and e.signal == "long_prompt_ratio"
    none = ctx_for({"prompt_tokens_p95": 1000.0, "long_prompt_ratio": 0.02})
    assert evaluate_entry(none, group).holds is False
    unknown = ctx_for({"prompt_tokens_p95": 1000.0})
    assert evaluate_entry(unknown, group).holds is None


def test_windows_around_an_onset() -> None:
    frame = frame_of({"request_rate": 1.0}, N)
    onset = frame.times[ONSET]
    w = make_windows(frame, frame.end, onset, Settings())
    assert w.recent == (frame.end - 300, frame.end)
    # the data begins at frame.start: its first five minutes are warm-up, not baseline
    assert w.baseline[1] == onset - 120 and w.baseline[0] == frame.start + 300
    assert w.incident[0] == onset - 900
    assert w.pre[1] < w.incident[0]
    assert frame.step == STEP


def test_leave_one_out_medians_match_the_definition() -> None:
    from triage.core.checks.replicas import leave_one_out_medians, row_medians

    rng = np.random.default_rng(5)
    for n in range(2, 12):
        values = rng.integers(0, 5, n).astype(float)  # ties on purpose
        expected = [float(np.median(np.delete(values, i))) for i in range(n)]
        assert leave_one_out_medians(values).tolist() == pytest.approx(expected)
    matrix = np.array([[1.0, np.nan, 3.0], [np.nan, np.nan, np.nan], [4.0, 5.0, 6.0]])
    out = row_medians(matrix)
    assert out[0] == 2.0 and np.isnan(out[1]) and out[2] == 5.0


def test_shortfall_against_a_sum_scaled_by_a_factor() -> None:
    """An edge's in-flight count newly below what the engines hold (running plus waiting)."""
    drift = ctx_for(
        {
            "gateway_inflight": stepped(140, 300, ONSET, N),
            "requests_running": stepped(130, 200, ONSET, N),
            "queue_waiting": stepped(10, 400, ONSET, N),
        }
    )
    spec = check(
        kind="shortfall", signal="gateway_inflight", of=["requests_running", "queue_waiting"], factor=0.8
    )
    e = evaluate(drift, spec)
    assert e.holds is True and e.value == 300 and e.baseline == 600
    assert "(requests_running + queue_waiting)" in e.check and "0.8x" in e.check
    tracking = ctx_for(
        {
            "gateway_inflight": stepped(140, 590, ONSET, N),
            "requests_running": stepped(130, 200, ONSET, N),
            "queue_waiting": stepped(10, 400, ONSET, N),
        }
    )
    assert evaluate(tracking, spec).holds is False
    assert evaluate(ctx_for({"gateway_inflight": 5.0, "requests_running": 5.0}), spec).holds is None


def test_steady_one_sided_and_forgiving_small_moves() -> None:
    idle = ctx_for({"queue_waiting": stepped(6, 1, ONSET, N)})
    assert evaluate(idle, check(kind="steady", signal="queue_waiting", factor=1.5)).holds is False
    assert (
        evaluate(idle, check(kind="steady", signal="queue_waiting", factor=1.5, direction="high")).holds
        is True
    )
    assert (
        evaluate(idle, check(kind="steady", signal="queue_waiting", factor=1.5, direction="low")).holds
        is False
    )
    busier = ctx_for({"queue_waiting": stepped(1, 3, ONSET, N)})
    assert evaluate(busier, check(kind="steady", signal="queue_waiting", direction="high")).holds is False
    assert (
        evaluate(busier, check(kind="steady", signal="queue_waiting", direction="high", min_delta=3)).holds
        is True
    )


def test_not_inverts_and_keeps_unknown() -> None:
    calm = ctx_for({"oom_killed": 0.0})
    no_oom = check(kind="event", signal="oom_killed", within="60m", **{"not": True})
    e = evaluate(calm, no_oom)
    assert e.holds is True and not e.departure and e.check.startswith("no ")
    killed = ctx_for({"oom_killed": stepped(0, 1, ONSET, N)})
    assert evaluate(killed, no_oom).holds is False
    assert evaluate(ctx_for({"request_rate": 1.0}), no_oom).holds is None
