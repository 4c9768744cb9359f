"""The numbers behind the tiles and the replica table, on frames built by hand and on fixtures."""

from __future__ import annotations

import numpy as np
from conftest import frame_of, stepped

from signals.fixture import load_fixture
from triage.core.escape import printable
from triage.rules import load_slo
from tui.view import format_value, gpu_health, replica_rows, spark, tile_specs, tiles

STEPS = 40


def test_a_replica_with_two_kinds_of_gpu_fault_counts_once() -> None:
    frame = frame_of(
        {
            'gpu_throttle{instance="a"}': stepped(0, 1, 20, STEPS),
            'gpu_xid{instance="a"}': stepped(0, 79, 25, STEPS),
            'gpu_throttle{instance="b"}': 0,
            'gpu_xid{instance="c"}': stepped(0, 48, 30, STEPS),
        },
        STEPS,
    )
    counts, now = gpu_health(frame, STEPS - 1)
    assert counts is not None
    assert counts[10] == 0 and counts[22] == 1 and counts[27] == 1 and counts[-1] == 2
    assert now == ["a", "c"]


def test_missing_signals_are_blind_tiles_never_healthy() -> None:
    frame = frame_of({'ttft_p99_seconds{instance="a"}': 0.4, 'ttft_p99_seconds{instance="b"}': 0.5}, STEPS)
    shown = {t.signal: t for t in tiles(frame, frame.end, None, tile_specs(load_slo()))}
    assert shown["ttft_p99_seconds"].level == "ok"
    for signal in ("kv_usage_ratio", "preemption_rate", "gpu_health", "error_ratio"):
        assert shown[signal].level == "blind" and shown[signal].value_text == "blind"


def test_tiles_colour_against_red_line_and_baseline() -> None:
    frame = frame_of(
        {
            "ttft_p99_seconds": stepped(0.4, 1.6, 30, STEPS),  # past the 1 s SLO
            "tpot_p99_seconds": stepped(0.02, 0.03, 30, STEPS),  # 1.5x its baseline, under 50 ms
            "queue_waiting": stepped(10, 11, 30, STEPS),  # a small wobble
        },
        STEPS,
    )
    baseline = (frame.start, frame.times[25])
    shown = {t.signal: t for t in tiles(frame, frame.end, baseline, tile_specs(load_slo()))}
    assert shown["ttft_p99_seconds"].level == "bad"
    assert shown["tpot_p99_seconds"].level == "warn"
    assert shown["queue_waiting"].level == "ok"
    assert (
        shown["ttft_p99_seconds"].value_text == "1.60s"
        and shown["ttft_p99_seconds"].baseline_text == "was 400ms"
    )


def test_outliers_vanished_and_gpu_faults_on_fixtures() -> None:
    fx = load_fixture("fixtures/routing-imbalance-kv-pressure-hot-replica.yaml")
    columns, rows = replica_rows(fx.frame, fx.at)
    flagged = {r.replica: {columns[i][0] for i in r.outliers} for r in rows if r.outliers}
    assert "kv_usage_ratio" in flagged["vllm-11"] and "ttft_p99_seconds" in flagged["vllm-11"]
    quiet = load_fixture("fixtures/healthy-fleet-no-incident.yaml")
    _, calm = replica_rows(quiet.frame, quiet.at)
    assert not any(r.flagged for r in calm)
    down = load_fixture("fixtures/replica-down-queue-growth.yaml")
    _, rows = replica_rows(down.frame, down.at)
    assert sorted(r.replica for r in rows if r.vanished) == ["vllm-2", "vllm-5"]
    hot = load_fixture("fixtures/gpu-throttling-hot-node.yaml")
    _, rows = replica_rows(hot.frame, hot.at)
    assert sorted(r.replica for r in rows if r.gpu_fault) == ["vllm-4", "vllm-7"]


def test_formats_and_sparklines() -> None:
    assert format_value(0.84, "ttft_p99_seconds") == "840ms"
    assert format_value(1.5, "ttft_p99_seconds") == "1.50s"
    assert format_value(0.004, "error_ratio") == "0.4%" and format_value(0.93, "kv_usage_ratio") == "93%"
    assert format_value(2.5, "preemption_rate") == "2.5/s"
    assert format_value(None, "kv_usage_ratio") == "—"
    line = spark(np.array([0.0, 1.0, np.nan, 2.0]), 4, lo=0.0)
    assert line[2] == " " and line[0] == "▁" and line[3] == "█"


def test_outside_text_reaches_the_terminal_with_its_controls_escaped() -> None:
    assert printable("vllm-0\x1b[2J\u202e\x07") == "vllm-0\\x1b[2J\\u202e\\x07"
    assert printable("two\nlines ünïcode 日本") == "two\nlines ünïcode 日本"
    frame = frame_of(
        {'kv_usage_ratio{instance="evil\x1b[2J"}': 0.5, 'kv_usage_ratio{instance="b"}': 0.5}, STEPS
    )
    _, rows = replica_rows(frame, frame.end)
    assert [printable(r.replica) for r in rows] == ["b", "evil\\x1b[2J"]
