"""Live diagnosis, signals check and capture against a real engine; faults against a stand-in.

The real engine is backfilled with raw vLLM V1 series shaped like the real exposition
(`model_name`, `engine`, `finished_reason`, `le` labels; counters and cumulative
histograms): four replicas whose KV cache fills and starts preempting an hour in. Every
test that reads it runs twice, on Prometheus and on VictoriaMetrics (the engine behind
the Prometheus API at scale), and asserts the same diagnosis on both.
"""

from __future__ import annotations

import io
import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from promserver import PromStandIn, Reply
from vmserver import ENGINES, require_engine, temporary_engine

from signals.tempprom import to_openmetrics
from signals.timeparse import format_instant
from tools.rawsynth import VLLM_ITL_BUCKETS
from triage.cli.common import EXIT_OK, EXIT_UNAVAILABLE, EXIT_USAGE
from triage.cli.main import main

START = 1_791_000_000.0
STEP = 15.0
N = 361  # 90 minutes
ONSET = 240  # an hour in
REPLICAS = [f"10.42.0.{i}:8000" for i in range(1, 5)]
ITL_EDGES = list(VLLM_ITL_BUCKETS)
AT = START + STEP * (N - 1)


def _histogram(
    name: str,
    labels: dict[str, str],
    medians: np.ndarray,
    rate: float,
    rng: np.random.Generator,
    edges: list[float],
) -> list[tuple[str, dict[str, str], np.ndarray, float, float]]:
    """Cumulative buckets of a lognormal whose median follows `medians`, `rate` observations a second."""
    from math import erf, log, sqrt

    per_step = rate * STEP
    counts = {le: np.zeros(N) for le in [*map(str, edges), "+Inf"]}
    for i, median in enumerate(medians):
        sigma = 0.6
        for le in edges:
            share = 0.5 * (1 + erf((log(le) - log(median)) / (sigma * sqrt(2))))
            counts[str(le)][i] = per_step * share * (1 + rng.normal(0, 0.01))
        counts["+Inf"][i] = per_step
    out = []
    for le, values in counts.items():
        out.append((f"{name}_bucket", {**labels, "le": le}, np.cumsum(values), START, STEP))
    out.append((f"{name}_count", labels, np.cumsum(counts["+Inf"]), START, STEP))
    return out


def raw_kv_incident() -> str:
    rng = np.random.default_rng(7)
    series: list[tuple[str, dict[str, str], np.ndarray, float, float]] = []
    for inst in REPLICAS:
        labels = {
            "instance": inst,
            "model_name": "meta-llama/Llama-3.1-8B-Instruct",
            "engine": "0",
            "job": "vllm",
        }
        kv = np.where(np.arange(N) < ONSET, 0.55, 0.99) + rng.normal(0, 0.005, N)
        series.append(("vllm:kv_cache_usage_perc", labels, np.clip(kv, 0, 1), START, STEP))
        preempt = np.where(np.arange(N) < ONSET + 4, 0.0, 2.0) * STEP
        series.append(("vllm:num_preemptions_total", labels, np.cumsum(preempt), START, STEP))
        for reason, share in (("stop", 0.95), ("length", 0.05)):
            done = np.cumsum(np.full(N, 4.0 * share * STEP))
            series.append(
                ("vllm:request_success_total", {**labels, "finished_reason": reason}, done, START, STEP)
            )
        running = np.where(np.arange(N) < ONSET, 22.0, 24.0) + rng.normal(0, 1, N)
        series.append(("vllm:num_requests_running", labels, running, START, STEP))
        series.append(
            ("vllm:num_requests_waiting", labels, np.where(np.arange(N) < ONSET, 0.0, 5.0), START, STEP)
        )
        itl = np.where(np.arange(N) < ONSET + 6, 0.02, 0.09)
        series += _histogram("vllm:inter_token_latency_seconds", labels, itl, 40.0, rng, ITL_EDGES)
    return to_openmetrics(series)


def live_diagnose(url: str, *extra: str) -> int:
    """`triage diagnose` against `url` at the incident's end, from tpot_slow, as JSON."""
    return main(
        [
            "diagnose",
            "--prometheus",
            url,
            "--at",
            format_instant(AT),
            "--symptom",
            "tpot_slow",
            "--selector",
            '{job="vllm"}',
            "--lookback",
            "90m",
            "--format",
            "json",
            *extra,
        ]
    )


@pytest.fixture(scope="module", params=ENGINES)
def prometheus(request: pytest.FixtureRequest) -> Iterator[str]:
    """The URL of a real engine (Prometheus, then VictoriaMetrics) serving `raw_kv_incident()`."""
    engine: str = request.param
    require_engine(engine)
    with temporary_engine(engine, raw_kv_incident()) as server:
        yield server.url


def test_live_diagnosis_names_the_cause_with_evidence(
    prometheus: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    import signals.malloc

    trimmed: list[bool] = []
    monkeypatch.setattr(signals.malloc, "trim", lambda: trimmed.append(True) or True)
    code = live_diagnose(prometheus)
    assert code == EXIT_OK
    assert trimmed == [True]  # the read handed back what it freed, once
    data = json.loads(capsys.readouterr().out)
    assert data["causes"][0]["cause"] == "kv_pressure"
    kv = next(e for e in data["causes"][0]["evidence"] if e["signal"] == "kv_usage_ratio")
    assert kv["holds"] and kv["value"] >= 0.95 and kv["baseline"] < 0.7
    tpot = next(e for e in data["symptom_evidence"] if e["signal"] == "tpot_p99_seconds")
    assert tpot["holds"] and tpot["value"] > 0.05  # computed by histogram_quantile from the buckets
    assert "scale_out" in {f["action"] for f in data["forbidden"]}
    assert "gpu_xid" in data["missing_signals"]  # no DCGM here: unknown, not healthy
    assert data["signal_problems"] == {}


def _conclusions(answer: dict[str, Any]) -> dict[str, object]:
    """What a diagnosis concludes, without the numbers two engines may round differently."""

    def checks(evidence: list[dict[str, Any]]) -> list[tuple[str, str, object]]:
        return [(e["signal"], e["check"], e["holds"]) for e in evidence]

    return {
        "symptom": answer["symptom"],
        "symptom_evidence": checks(answer["symptom_evidence"]),
        "causes": [(c["cause"], checks(c["evidence"])) for c in answer["causes"]],
        "forbidden": [f["action"] for f in answer["forbidden"]],
        "missing_signals": answer["missing_signals"],
        "signal_problems": answer["signal_problems"],
    }


def test_both_engines_reach_the_same_diagnosis(capsys: pytest.CaptureFixture[str]) -> None:
    """Same series, same catalog: the same causes, evidence, forbidden actions and blind spots."""
    answers = {}
    for engine in ENGINES:
        require_engine(engine)
        with temporary_engine(engine, raw_kv_incident()) as server:
            assert live_diagnose(server.url) == EXIT_OK
        answers[engine] = json.loads(capsys.readouterr().out)
    prometheus, victoriametrics = (answers[engine] for engine in ENGINES)
    assert _conclusions(victoriametrics) == _conclusions(prometheus)
    assert [c["score"] for c in victoriametrics["causes"]] == pytest.approx(
        [c["score"] for c in prometheus["causes"]], abs=0.02
    )


class _Terminal(io.StringIO):
    """stderr as a terminal has it."""

    def isatty(self) -> bool:
        return True


def _as_terminal(monkeypatch: pytest.MonkeyPatch) -> _Terminal:
    """stderr as a terminal, with the progress line shown from the first answer on (called in
    the test itself: pytest's capture sets its own stderr again between a fixture and the test)."""
    import triage.cli.progress

    monkeypatch.setenv("TERM", "xterm-256color")
    monkeypatch.setattr(triage.cli.progress, "DELAY_S", 0.0)
    monkeypatch.setattr(triage.cli.progress, "INTERVAL_S", 0.0)
    stream = _Terminal()
    monkeypatch.setattr("sys.stderr", stream)
    return stream


def _progress_then(stream: _Terminal) -> str:
    """What a terminal's stderr holds after the progress line was erased, checking the counts
    it showed: all answered at the last."""
    shown, _, after = stream.getvalue().rpartition("\r\x1b[K")
    counts = re.findall(r"prometheus: (\d+) of (\d+) requests? answered, \d+ s", shown)
    assert counts and counts[-1][0] == counts[-1][1]
    assert all(int(done) <= int(asked) for done, asked in counts)
    return after


def test_a_terminal_sees_the_read_progress_then_only_the_hint_for_a_large_raw_read(
    prometheus: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """On a terminal the read's progress shows and is erased; stdout is the same JSON either way.
    The hint to record the series appears for a fleet at the size where recording pays, not below
    it (the fixture's four replicas stand for it by moving the line)."""
    import signals.live

    assert live_diagnose(prometheus) == EXIT_OK
    plain = capsys.readouterr()
    assert plain.err == ""  # not a terminal, and four replicas: nothing on stderr
    for line, hinted in ((len(REPLICAS) + 1, False), (len(REPLICAS), True)):
        with pytest.MonkeyPatch.context() as patch:
            stream = _as_terminal(patch)
            patch.setattr(signals.live, "RECORDING_PAYS_REPLICAS", line)
            assert live_diagnose(prometheus) == EXIT_OK
        assert capsys.readouterr().out == plain.out
        after = _progress_then(stream)
        hint = f"hint: {len(REPLICAS)} replicas read from raw series in "
        assert after.startswith(hint) and "triage rules" in after if hinted else after == ""


def test_capture_report_and_capacity_show_their_read_progress_on_a_terminal(
    prometheus: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    terminal = _as_terminal(monkeypatch)
    window = ["--prometheus", prometheus, "--start", format_instant(START), "--end", format_instant(AT)]
    captured, report = tmp_path / "captured.yaml", tmp_path / "report.md"
    assert main(["capture", *window, "-o", str(captured)]) == EXIT_OK
    assert _progress_then(terminal) == "" and captured.is_file()
    terminal.truncate(0)
    terminal.seek(0)
    assert main(["report", *window, "--symptom", "tpot_slow", "-o", str(report)]) == EXIT_OK
    assert report.is_file()
    _progress_then(terminal)
    terminal.truncate(0)
    terminal.seek(0)
    plan = ["capacity", "--model", "llama-3.1-8b", "--gpu", "h100-80gb", "--peak-rate", "30"]
    main([*plan, "--prometheus", prometheus, "--at", format_instant(AT), "--lookback", "80m"])
    _progress_then(terminal)  # whether or not the window had traffic to measure


def test_selector_that_matches_nothing_is_exit_3(prometheus: str, capsys: pytest.CaptureFixture[str]) -> None:
    code = main(
        [
            "diagnose",
            "--prometheus",
            prometheus,
            "--at",
            format_instant(AT),
            "--selector",
            '{job="nope"}',
            "--lookback",
            "30m",
        ]
    )
    err = capsys.readouterr().err
    assert code == EXIT_UNAVAILABLE
    assert 'no series matching {job="nope"} holds a sample' in err and prometheus in err


def test_signals_check(prometheus: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["signals", "check", "--prometheus", prometheus, "--format", "json"]) == EXIT_OK
    data = json.loads(capsys.readouterr().out)
    assert data["signals"]["kv_usage_ratio"] == {
        "replica": "vllm",
        "fleet": "vllm",
        "blind": False,
        "deprecated_in_use": [],
    }
    assert data["signals"]["gpu_xid"]["blind"] is True
    assert "gpu_fault" in data["unprovable_causes"] and data["unprovable_causes"]["gpu_fault"]
    assert main(["signals", "check", "--prometheus", prometheus]) == EXIT_OK
    text = capsys.readouterr().out
    assert "kv_usage_ratio" in text and "BLIND" in text and "causes left unprovable" in text


def test_capture_then_replay_gives_the_same_diagnosis(
    prometheus: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "captured.yaml"
    assert (
        main(
            [
                "capture",
                "--prometheus",
                prometheus,
                "--start",
                format_instant(START),
                "--end",
                format_instant(AT),
                "--symptom",
                "tpot_slow",
                "-o",
                str(out),
            ]
        )
        == EXIT_OK
    )
    assert "wrote" in capsys.readouterr().out
    assert main(["diagnose", "--fixture", str(out), "--format", "json"]) == EXIT_OK
    replayed = json.loads(capsys.readouterr().out)
    assert (
        main(
            [
                "diagnose",
                "--prometheus",
                prometheus,
                "--at",
                format_instant(AT),
                "--symptom",
                "tpot_slow",
                "--lookback",
                format_duration_for(AT - START),
                "--format",
                "json",
            ]
        )
        == EXIT_OK
    )
    live = json.loads(capsys.readouterr().out)
    assert [c["cause"] for c in replayed["causes"]] == [c["cause"] for c in live["causes"]]
    assert [f["action"] for f in replayed["forbidden"]] == [f["action"] for f in live["forbidden"]]
    for a, b in zip(replayed["causes"], live["causes"], strict=True):
        assert a["score"] == pytest.approx(b["score"], abs=0.02)


def format_duration_for(seconds: float) -> str:
    return f"{int(seconds)}s"


def test_alert_file_starts_the_diagnosis(
    prometheus: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    alert = tmp_path / "alert.json"
    alert.write_text(
        json.dumps(
            {
                "version": "4",
                "status": "firing",
                "alerts": [
                    {
                        "status": "resolved",
                        "labels": {"alertname": "Other"},
                        "startsAt": "2026-01-01T00:00:00Z",
                    },
                    {
                        "status": "firing",
                        "labels": {"alertname": "LLMTPOTP99High", "symptom": "tpot_slow"},
                        "startsAt": format_instant(AT),
                        "endsAt": "0001-01-01T00:00:00Z",
                        "fingerprint": "abc",
                        "extra": 1,
                    },
                ],
            }
        )
    )
    assert (
        main(
            [
                "diagnose",
                "--prometheus",
                prometheus,
                "--alert",
                str(alert),
                "--lookback",
                "90m",
                "--format",
                "json",
            ]
        )
        == EXIT_OK
    )
    data = json.loads(capsys.readouterr().out)
    assert data["symptom"] == "tpot_slow" and data["symptom_source"] == "alert"
    assert data["at"] == format_instant(AT) and data["causes"][0]["cause"] == "kv_pressure"


def test_unreachable_server_is_exit_3(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["diagnose", "--prometheus", "http://127.0.0.1:9", "--timeout", "1"]) == EXIT_UNAVAILABLE
    err = capsys.readouterr().err
    assert err.startswith("triage: ") and "127.0.0.1:9" in err and "Traceback" not in err


def test_server_answering_html_is_exit_3(capsys: pytest.CaptureFixture[str]) -> None:
    with PromStandIn(Reply.html()) as stand_in:
        assert main(["diagnose", "--prometheus", stand_in.url, "--timeout", "2"]) == EXIT_UNAVAILABLE
    assert "Traceback" not in capsys.readouterr().err


def test_failing_queries_become_unreadable_signals(
    prometheus: str, capsys: pytest.CaptureFixture[str]
) -> None:
    # The stand-in forwards everything to the real server but fails the KV queries.
    from signals.catalog import QueryOptions, load_catalog, render

    kv = load_catalog().sources["kv_usage_ratio"][0]
    assert kv.replica is not None and kv.fleet is not None
    options = QueryOptions(selector='job="vllm"')
    broken = {
        render(kv.replica, options): [
            Reply.error("execution", "query timed out in expression evaluation", 503)
        ],
        render(kv.fleet, options): [Reply.error("bad_data", "1:1: parse error", 400)],
    }
    with PromStandIn(Reply.proxied(prometheus), by_query=broken) as stand_in:
        code = live_diagnose(stand_in.url)
    assert code == EXIT_OK
    data = json.loads(capsys.readouterr().out)
    assert "kv_usage_ratio" in data["missing_signals"]
    reason = data["signal_problems"]["kv_usage_ratio"]
    assert "bad_data" in reason or "parse error" in reason
    # Preemptions alone still point at KV pressure, but the unreadable KV check is unknown, never
    # counted as holding, and the score is lower than with every signal readable.
    kv_cause = next(c for c in data["causes"] if c["cause"] == "kv_pressure")
    kv_checks = [e for e in kv_cause["evidence"] if e["signal"] == "kv_usage_ratio"]
    assert kv_checks and all(e["holds"] is None for e in kv_checks)
    assert kv_cause["score"] < 0.85


@pytest.mark.parametrize(
    "args",
    [
        ["--prometheus", "ftp://x"],
        ["--prometheus", "http://x", "--timeout", "0"],
        ["--prometheus", "http://x", "--selector", '{job="x"'],
        ["--prometheus", "http://x", "--header", "nocolon"],
        ["--prometheus", "http://x", "--token-file", "/nonexistent/token"],
    ],
)
def test_bad_live_options_are_exit_2(args: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["diagnose", *args]) == EXIT_USAGE
    err = capsys.readouterr().err
    assert err.startswith("triage: --") and "Traceback" not in err


def test_queries_slower_than_the_deadline_leave_their_signals_unreadable(
    prometheus: str, capsys: pytest.CaptureFixture[str]
) -> None:
    from signals.catalog import QueryOptions, Resolution, SourceSpec, load_catalog
    from signals.plan import ViewPlan, view_plan
    from signals.views import render_views

    # A histogram family is ONE query of bucket rates, read by both quantiles and both views.
    tpot = next(s for s in load_catalog().sources["tpot_p99_seconds"] if s.source == "vllm")
    options = QueryOptions(selector='job="vllm"')

    def planned(spec: SourceSpec, view: str) -> ViewPlan:
        return view_plan(render_views({"x": Resolution("x", spec, spec)}, options)[f"x/{view}"])

    (family,) = {q for view in ("replica", "fleet") for q in planned(tpot, view).reads}
    slow = {family: [Reply.stalled(30)]}
    warned = next(s for s in load_catalog().sources["requests_running"] if s.source == "vllm")
    (running,) = planned(warned, "fleet").reads
    slow[running] = [Reply.success([], warnings=["results truncated due to limit"])]
    import time as clock

    started = clock.monotonic()
    with PromStandIn(Reply.proxied(prometheus), by_query=slow) as stand_in:
        code = live_diagnose(stand_in.url, "--timeout", "2")
    assert clock.monotonic() - started < 6
    assert code == EXIT_OK
    data = json.loads(capsys.readouterr().out)
    assert "timeout" in data["signal_problems"]["tpot_p99_seconds"]
    assert "partial data: results truncated" in data["signal_problems"]["requests_running"]
    assert "tpot_p99_seconds" in data["missing_signals"]
    assert "timeout" in data["signal_problems"]["tpot_p50_seconds"]
    assert data["causes"][0]["cause"] == "kv_pressure"  # the rest of the round still answers


def test_audit_command(prometheus: str, capsys: pytest.CaptureFixture[str]) -> None:
    code = main(
        [
            "audit",
            "--prometheus",
            prometheus,
            "--at",
            format_instant(AT),
            "--lookback",
            "90m",
            "--format",
            "json",
        ]
    )
    assert code in (EXIT_OK, 1)
    items = json.loads(capsys.readouterr().out)
    assert len(items) >= 50
    assert all({"id", "section", "title", "status", "evidence", "how_to_fix"} <= set(i) for i in items)
    assert {i["status"] for i in items} <= {"pass", "fail", "unknown", "not_applicable"}
    by_id = {i["id"]: i for i in items}
    assert len(by_id) == len(items)
    # No rule files were loaded into this Prometheus: the P99 alert item cannot pass.
    alerts = [i for i in items if "p99" in i["id"].lower() and i["section"] == "scheduling"]
    assert alerts and all(i["status"] != "pass" for i in alerts)
    assert main(["audit", "--prometheus", "http://127.0.0.1:9", "--timeout", "1"]) == EXIT_UNAVAILABLE
    assert "127.0.0.1:9" in capsys.readouterr().err
