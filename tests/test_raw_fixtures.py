"""Raw fixtures (`level: raw`) replay through a real Prometheus and the catalog to their twin's answer.

Every `level: raw` fixture in fixtures/ holds exporter series (vLLM, SGLang, DCGM,
kube-state-metrics, and in some the kubelet's prober and the edge in front of the
engines, whose own sources are checked in tests/test_edge_fixtures.py).
`signals.rawreplay.replay_raw` writes them into a temporary Prometheus and evaluates
the signal catalog's PromQL on them; the resulting signal frame is diagnosed like any
other. A raw fixture named `X-raw` has a signal-level twin `X`
(written from the same Fleet by tools/incidents_raw.py): the raw replay must satisfy the
shared expect block, reach the twin's top cause, and produce the signals the catalog
promises for the exporters present, at values close to the twin's. A raw fixture holding
several fleets is replayed scoped to the one its expect names: its replicas are then that
fleet's pods.

The replays run on Prometheus for every raw fixture, and on VictoriaMetrics (the engine
behind the Prometheus API at scale) for one fixture of each exporter flavour, with the
same expectations: the same cause, the same signals, values as close to the twin's.

The generator's invariants (monotone counters, cumulative buckets, +Inf = _count) are
checked without a server; everything else needs `prometheus` and `promtool` (and
`victoria-metrics` for its cases) and is skipped loudly when they are missing (a failure
under CI=true).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from promserver import require_prometheus_binaries
from rawreplays import RawReplays, Replayed, bundled_raw
from stackexports import TGI, TRITON, TRTLLM
from vmserver import ENGINES

from signals.catalog import load_catalog
from signals.fixture import Fixture, load_fixture
from signals.gridseries import OpenMetricsSeries
from signals.rawreplay import names_a_fleet, replay_raw
from signals.tempprom import TemporaryPrometheus, to_openmetrics
from triage.core.graph import TriageGraph
from triage.core.model import Diagnosis
from triage.core.walk import diagnose
from triage.replay import check_expect, fixture_symptom

ROOT = Path(__file__).resolve().parent.parent
RAW = bundled_raw()
IDS = [p.stem for p in RAW]
VICTORIAMETRICS = {
    "kv-pressure-vllm-v1-raw",  # vLLM V1
    "prefix-cache-miss-vllm-mixed-raw",  # vLLM 0.9-0.11, old and new names side by side
    "traffic-burst-sglang-raw",  # SGLang
    "gpu-fault-xid79-dcgm-kube-raw",  # DCGM and kube-state-metrics, a replica lost
    "gateway-bottleneck-epp-vllm-raw",  # the inference extension's picker, one fleet of several
    "stale-backend-router-vllm-raw",  # production-stack router, backends renamed by label_replace
}
"""One raw fixture per exporter flavour, replayed on VictoriaMetrics too."""
BOTH = [p for p in RAW if p.stem in VICTORIAMETRICS]
CASES = [pytest.param("prometheus", p, id=p.stem) for p in RAW] + [
    pytest.param("victoriametrics", p, id=f"{p.stem}-victoriametrics") for p in BOTH
]

# What the catalog must produce from each exporter family (reference/metrics.md, catalog.yaml).
ENGINE_SIGNALS = (
    "ttft_p99_seconds",
    "ttft_p50_seconds",
    "tpot_p99_seconds",
    "tpot_p50_seconds",
    "e2e_p99_seconds",
    "request_rate",
    "error_ratio",
    "queue_waiting",
    "requests_running",
    "queue_time_p99_seconds",
    "prefix_hit_ratio",
    "prompt_tokens_rate",
    "generation_tokens_rate",
    "kv_usage_ratio",
    "preemption_rate",
)
EXPECTED = {
    "vllm": (
        *ENGINE_SIGNALS,
        "truncated_ratio",
        "prompt_tokens_p95",
        "output_tokens_p95",
        "prefill_time_p99_seconds",
    ),
    "sglang": ENGINE_SIGNALS,
    # the serving stacks of docs/stacks.md: what each exports (its blind signals are said there)
    "ray_vllm": (*ENGINE_SIGNALS, "truncated_ratio", "prompt_tokens_p95", "output_tokens_p95"),
    "tgi": TGI,
    "trtllm": TRTLLM,
    "triton": TRITON,
    "dcgm": (
        "gpu_memory_used_ratio",
        "gpu_util_ratio",
        "gpu_temp_celsius",
        "gpu_power_watts",
        "gpu_throttle",
        "gpu_xid",
        "gpu_ecc_errors",
    ),
    "kube": ("replicas_ready", "replicas_desired", "restarts"),
}
# Signals whose fleet value must land within 30% of the twin's at `at`. Not compared:
# counts of a few requests (queue_waiting), ratios near zero, and the vLLM queue/prefill
# P99s whose real first bucket edge (0.3 s) lies above the twin's healthy values.
COMPARED = {
    "vllm": (
        "ttft_p99_seconds",
        "tpot_p99_seconds",
        "request_rate",
        "prompt_tokens_rate",
        "generation_tokens_rate",
        "kv_usage_ratio",
        "prefix_hit_ratio",
        "requests_running",
        "prompt_tokens_p95",
        "output_tokens_p95",
    ),
    "sglang": (
        "ttft_p99_seconds",
        "tpot_p99_seconds",
        "request_rate",
        "prompt_tokens_rate",
        "generation_tokens_rate",
        "kv_usage_ratio",
        "prefix_hit_ratio",
        "requests_running",
    ),
    "dcgm": ("gpu_memory_used_ratio", "gpu_util_ratio", "gpu_temp_celsius", "gpu_power_watts"),
    "kube": ("replicas_ready", "replicas_desired"),
}
DEPRECATED_IN_MIXED = {
    "kv_usage_ratio": "vllm:gpu_cache_usage_perc",
    "tpot_p99_seconds": "vllm:time_per_output_token_seconds_bucket",
    "prefix_hit_ratio": "vllm:gpu_prefix_cache_queries_total",
}
TOLERANCE = 0.30


def flavours(fixture: Fixture) -> set[str]:
    """Which exporter families a raw fixture holds, from its metric names."""
    names = set(fixture.frame.signals())
    found = set()
    if any(n.startswith("vllm:") for n in names):
        found.add("vllm")
        if "vllm:gpu_cache_usage_perc" in names or "vllm:time_per_output_token_seconds_bucket" in names:
            found.add("vllm-mixed")
    if any(n.startswith("sglang:") for n in names):
        found.add("sglang")
    if any(n.startswith(("ray_vllm_", "ray_vllm:")) for n in names):
        found.add("ray_vllm")
    if any(n.startswith("tgi_") for n in names):
        found.add("tgi")
    if any(n.startswith(("trtllm_", "trtllm:")) for n in names):
        found.add("trtllm")
    if any(n.startswith("nv_trt_llm_") for n in names):
        found.add("triton")
    if any(n.startswith("DCGM_") for n in names):
        found.add("dcgm")
    if any(n.startswith("kube_") for n in names):
        found.add("kube")
    return found


def twin_path(path: Path) -> Path | None:
    if not path.stem.endswith("-raw"):
        return None
    twin = path.with_name(path.stem.removesuffix("-raw") + ".yaml")
    return twin if twin.exists() else None


@pytest.fixture(scope="module")
def replayed(raw_replays: RawReplays) -> Callable[[str, Path], Replayed]:
    """Each raw fixture replayed and diagnosed once per engine (for the session: tests/rawreplays.py)."""
    return raw_replays.get


def diagnose_twin(graph: TriageGraph, twin: Fixture) -> Diagnosis:
    symptom, source = fixture_symptom(twin, None, graph.knowledge)
    return diagnose(graph, twin.frame, symptom, twin.at, source=source)


def near_at(fixture: Fixture, signal: str, steps: int = 5) -> float:
    """The fleet view's median over the last few steps up to `at` (NaN when none)."""
    frame = fixture.frame
    i = frame.position(fixture.at)
    window = frame.fleet(signal)[max(0, i - steps + 1) : i + 1]
    window = window[np.isfinite(window)]
    return float(np.median(window)) if window.size else float("nan")


# ------------------------------------------------------------------ without Prometheus


def test_the_bundled_raw_fixtures_cover_every_exporter_flavour() -> None:
    assert len(RAW) >= 4, [p.name for p in RAW]
    covered: set[str] = set()
    for path in RAW:
        fixture = load_fixture(str(path))
        assert fixture.level == "raw"
        assert fixture.expect is not None, f"{path.name} has no expect block"
        covered |= flavours(fixture)
        twin = twin_path(path)
        if twin is not None:
            # the same expectation, but for the fleet a raw fixture names (a twin holds one fleet)
            own = replace(fixture.expect, fleet=None)
            assert load_fixture(str(twin)).expect == own, f"{path.name}: expect differs from its twin"
    stacks = {"ray_vllm", "tgi", "trtllm", "triton"}
    assert {"vllm", "vllm-mixed", "sglang", "dcgm", "kube", *stacks} <= covered, covered


_BASE = re.compile(r"(_bucket|_count|_sum|_created)$")


@pytest.mark.parametrize("path", RAW, ids=IDS)
def test_raw_series_are_what_exporters_expose(path: Path) -> None:
    """Counters never go down except to restart near zero; histograms are cumulative with +Inf = _count."""
    fixture = load_fixture(str(path))
    by_name: dict[str, list[tuple[dict[str, str], np.ndarray]]] = {}
    for s in fixture.frame.series:
        by_name.setdefault(s.signal, []).append((s.label_map, s.values))
    for name, rows in by_name.items():
        if not (name.endswith(("_total", "_bucket", "_count")) or name.startswith("DCGM_FI_DEV_ECC")):
            continue
        for labels, values in rows:
            finite = values[np.isfinite(values)]
            drops = np.flatnonzero(np.diff(finite) < 0)
            for d in drops:  # a reset starts again from (near) zero
                assert finite[d + 1] <= 0.05 * max(finite[d], 1.0), f"{name}{labels} goes down at {d}"
            assert np.all(finite == np.round(finite)), f"{name}{labels}: a counter of events is an integer"
    for name, rows in by_name.items():
        if not name.endswith("_bucket"):
            continue
        base = _BASE.sub("", name)
        groups: dict[tuple[tuple[str, str], ...], list[tuple[float, np.ndarray]]] = {}
        for labels, values in rows:
            le = labels.pop("le")
            groups.setdefault(tuple(sorted(labels.items())), []).append((float(le), values))
        counts = {tuple(sorted(lab.items())): v for lab, v in by_name.get(f"{base}_count", [])}
        for key, buckets in groups.items():
            buckets.sort(key=lambda b: b[0])
            assert buckets[-1][0] == float("inf"), f"{base}{dict(key)} has no +Inf bucket"
            stack = np.vstack([b[1] for b in buckets])
            ok = np.all(np.isfinite(stack), axis=0)
            assert np.all(np.diff(stack[:, ok], axis=0) >= 0), f"{base}{dict(key)}: buckets not cumulative"
            assert key in counts, f"{base}{dict(key)} has no _count"
            np.testing.assert_array_equal(stack[-1][ok], counts[key][ok])


# ------------------------------------------------------------------ through Prometheus


@pytest.mark.parametrize(("engine", "path"), CASES)
def test_raw_fixture_replays_to_its_expectation_and_its_twins_cause(
    engine: str, path: Path, graph: TriageGraph, replayed: Callable[[str, Path], Replayed]
) -> None:
    result = replayed(engine, path)
    assert result.report.problems() == {}, result.report.problems()
    assert result.signals.expect is not None
    expect = result.signals.expect
    undefined = [c for c in (expect.cause, *expect.also) if c is not None and c not in graph.knowledge.causes]
    assert not undefined, f"{path.name} expects {undefined}: no playbook defines that cause yet"
    check = check_expect(result.diagnosis, result.signals.expect)
    assert check.passed, (check.problems, [(c.cause, c.score) for c in result.diagnosis.causes])
    twin = twin_path(path)
    if twin is None:
        return
    twin_fixture = load_fixture(str(twin))
    twin_diagnosis = diagnose_twin(graph, twin_fixture)
    assert check_expect(twin_diagnosis, twin_fixture.expect).passed  # type: ignore[arg-type]
    raw_top = result.diagnosis.causes[0].cause if result.diagnosis.causes else None
    twin_top = twin_diagnosis.causes[0].cause if twin_diagnosis.causes else None
    assert raw_top == twin_top, (raw_top, twin_top)
    assert result.diagnosis.symptom == twin_diagnosis.symptom


@pytest.mark.parametrize(("engine", "path"), CASES)
def test_the_catalog_produces_the_signals_of_each_exporter(
    engine: str, path: Path, replayed: Callable[[str, Path], Replayed]
) -> None:
    result = replayed(engine, path)
    present = flavours(result.raw)
    frame = result.signals.frame
    missing = []
    for family in present & set(EXPECTED):
        for signal in EXPECTED[family]:
            if not np.isfinite(near_at(result.signals, signal)):
                missing.append(f"{family}:{signal}")
    assert not missing, f"no value at `at` for {missing}"
    if "vllm-mixed" in present:
        for signal, old in DEPRECATED_IN_MIXED.items():
            assert old in result.report.statuses[signal].deprecated_in_use, (
                signal,
                result.report.statuses[signal],
            )
    engines = {
        dict(s.labels).get("instance")
        for s in result.raw.frame.series
        if s.signal.startswith(("vllm:", "sglang:"))
    }
    if names_a_fleet(result.raw):
        # scoped to the one fleet it names: replicas are that fleet's pods, as its engine signals read
        engines = set(frame.replicas("requests_running").replicas)
        assert engines and len(engines) < len({s.label_map.get("pod") for s in result.raw.frame.series})
    if "dcgm" in present:
        # the DCGM series join the engines' replicas by instance (and keep their gpu label)
        assert set(frame.replicas("gpu_temp_celsius").replicas) == engines
        assert all("gpu" in s.label_map for s in frame.rows("gpu_temp_celsius") if s.replica)
    if "kube" in present:
        assert set(frame.replicas("restarts").replicas) == engines


@pytest.mark.parametrize(("engine", "path"), [c for c in CASES if twin_path(Path(str(c.values[1])))])
def test_replayed_values_are_close_to_the_twins(
    engine: str, path: Path, replayed: Callable[[str, Path], Replayed]
) -> None:
    result = replayed(engine, path)
    twin_file = twin_path(path)
    assert twin_file is not None
    twin = load_fixture(str(twin_file))
    off = []
    for family in flavours(result.raw) & set(COMPARED):
        for signal in COMPARED[family]:
            want, got = near_at(twin, signal), near_at(result.signals, signal)
            if not np.isfinite(want):
                continue
            if not (np.isfinite(got) and abs(got - want) <= TOLERANCE * abs(want)):
                off.append(f"{signal}: twin {want:.4g}, raw {got:.4g}")
    assert not off, off


def conclusions(diagnosis: Diagnosis) -> dict[str, object]:
    """What a diagnosis concludes: causes in order with what each check found, the actions
    forbidden, the blind spots; not the values, which two engines compute a little apart."""
    return {
        "symptom": diagnosis.symptom,
        "causes": [(c.cause, [(e.signal, e.check, e.holds) for e in c.evidence]) for c in diagnosis.causes],
        "forbidden": [f.action for f in diagnosis.forbidden],
        "missing": diagnosis.missing_signals,
    }


RATE_WINDOW = 300.0
"""The catalog's rate window: how far the engines' rates apart differ after a series starts or stops."""


@pytest.mark.parametrize("path", BOTH, ids=[p.stem for p in BOTH])
def test_both_engines_reach_the_same_diagnosis(path: Path, replayed: Callable[[str, Path], Replayed]) -> None:
    """Same conclusions; the onset within one rate window, since where a replica dies or a new error
    series appears, VictoriaMetrics' rate (no extrapolation, over the span its samples cover) moves
    earlier or later than Prometheus' (docs/victoriametrics.md)."""
    prometheus, victoriametrics = (replayed(engine, path).diagnosis for engine in ENGINES)
    assert conclusions(victoriametrics) == conclusions(prometheus)
    assert [c.score for c in victoriametrics.causes] == pytest.approx(
        [c.score for c in prometheus.causes], abs=0.05
    )
    assert (victoriametrics.onset is None) == (prometheus.onset is None)
    if prometheus.onset is not None and victoriametrics.onset is not None:
        assert abs(victoriametrics.onset - prometheus.onset) <= RATE_WINDOW


def _backfilled(series: Sequence[OpenMetricsSeries], *, lookback_delta: float | None) -> TemporaryPrometheus:
    """Raw replay's server as it was before remote write: the series backfilled by promtool."""
    return TemporaryPrometheus(to_openmetrics(series), lookback_delta=lookback_delta)


ULP_TOLERANCE = 1e-12
"""How far two answers of one Prometheus over the same samples may be apart, relative and
absolute: a range query aggregates a binary operation's series in Go's map order, which
changes from run to run, so an `avg` of six ratios moves in its last bit even on one server
asked twice, and a share computed as a difference of such sums lands a few 1e-16 off zero."""


@pytest.mark.parametrize("path", BOTH, ids=[p.stem for p in BOTH])
def test_remote_write_replays_what_the_backfill_replays(
    path: Path, replayed: Callable[[str, Path], Replayed], graph: TriageGraph
) -> None:
    """The series written over remote write give the frame that the same series backfilled by
    promtool give (the same series, gaps and values to Prometheus's own last-bit noise) and
    the same diagnosis, on one fixture of each exporter flavour."""
    require_prometheus_binaries()
    pushed = replayed("prometheus", path)
    backfilled, _ = replay_raw(pushed.raw, load_catalog(), server=_backfilled)
    mine, theirs = pushed.signals.frame, backfilled.frame
    assert np.array_equal(mine.times, theirs.times)
    assert [(s.signal, s.labels) for s in mine.series] == [(s.signal, s.labels) for s in theirs.series]
    for a, b in zip(mine.series, theirs.series, strict=True):
        assert np.array_equal(np.isnan(a.values), np.isnan(b.values)), (a.signal, a.labels)
        assert np.allclose(a.values, b.values, rtol=ULP_TOLERANCE, atol=ULP_TOLERANCE, equal_nan=True), (
            a.signal,
            a.labels,
        )
    assert pushed.signals.fleet == backfilled.fleet
    symptom, source = fixture_symptom(backfilled, None, graph.knowledge)
    again = diagnose(graph, backfilled.frame, symptom, backfilled.at, source=source)
    assert conclusions(again) == conclusions(pushed.diagnosis)
    assert again.onset == pushed.diagnosis.onset


def test_capacity_measures_the_per_replica_rate_from_prometheus(capsys: pytest.CaptureFixture[str]) -> None:
    """The highest rate a replica served within SLO, read from a real Prometheus, feeds the plan."""
    import json

    from signals.tempprom import TemporaryPrometheus, to_openmetrics
    from signals.timeparse import format_instant
    from triage.cli.main import main

    require_prometheus_binaries()
    fixture = load_fixture(str(ROOT / "fixtures" / "kv-pressure-vllm-v1-raw.yaml"))
    frame = fixture.frame
    text = to_openmetrics((s.signal, dict(s.labels), s.values, frame.start, frame.step) for s in frame.series)
    with TemporaryPrometheus(text) as prometheus:
        code = main(
            [
                "capacity",
                "--model",
                "llama-3.1-8b",
                "--gpu",
                "h100-80gb",
                "--peak-rate",
                "30",
                "--prometheus",
                prometheus.url,
                "--at",
                format_instant(frame.end),
                "--lookback",
                "70m",
                "--format",
                "json",
            ]
        )
    assert code == 0
    replicas = json.loads(capsys.readouterr().out)["replicas"]
    assert replicas["per_replica_rate_source"].startswith("measured")
    assert 3.0 < replicas["per_replica_rate"] < 7.0  # the fixture's replicas serve about 4 req/s each
    assert (
        replicas["replicas"] == replicas["base"] + 1 and replicas["base"] * replicas["per_replica_rate"] >= 30
    )
