"""Metamorphic tests: every bundled fixture and every generality corpus, transformed in ways whose
effect on the answer is known (`tests/metamorphic.py`), must keep or move its answer as stated.

Each relation is one test over the whole set, asserting a 100% rate on the incidents it applies
to and listing every incident that broke with its answer before and after; the rates are printed
as a table at the end of the run. The set is built once per session: the bundled fixtures (the
`level: raw` ones replayed through a temporary Prometheus, the very replays
tests/test_raw_fixtures.py checks: tests/rawreplays.py), and the generated corpora written in
two worker processes meanwhile, which tests/test_generality.py reads too.
`METAMORPHIC_CORPORA=fixtures,generality_hard` narrows the set while iterating.

Below them, unit tests of the transformations themselves on small frames and on a bundled one.
"""

from __future__ import annotations

import dataclasses
import multiprocessing
import os
import shutil
from collections.abc import Iterator
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest
from metamorphic import (
    BLINK_EVERY,
    BY_NAME,
    CORPORA,
    HOUR,
    MINUTE,
    RATE_SIGNALS,
    RELATIONS,
    SHIFT,
    TENANT,
    Case,
    GeneratedCorpora,
    Original,
    Probe,
    Relation,
    answer_of,
    available_corpora,
    blink_replica,
    blinking_flag,
    breach_removed,
    breached_before,
    can_fork,
    case_of,
    diagnose_case,
    evidence_ended,
    first_event,
    healthy_until,
    history_earlier,
    history_later,
    hold_after,
    keep_before_onset,
    periodic_tenant,
    record,
    rename_replicas,
    replica_alias,
    required_evidence_signals,
    run_relation,
    scale_rates,
    share,
    shift_time,
    show,
    step_to_ramp,
    tenant_wave,
    vanished_replicas,
)
from promserver import require_prometheus_binaries
from rawreplays import RawReplays, bundled_raw

from signals.fixture import load_fixture
from signals.frame import FloatArray, Series, SignalFrame, labels_of
from signals.selector import parse_selector
from triage.core.graph import TriageGraph, build_graph
from triage.core.model import CauseFinding, Diagnosis, Evidence
from triage.sources import load_playbooks

ROOT = Path(__file__).resolve().parent.parent
BUNDLED = sorted((ROOT / "fixtures").glob("*.yaml"))
RAW = {p.stem for p in bundled_raw()}


@dataclass(frozen=True, repr=False)
class Suite:
    """Every incident with its original diagnosis, and which corpora and raw fixtures took part."""

    originals: list[Original]
    corpora: dict[str, int]
    raw_left_out: str | None
    narrowed: bool

    def __repr__(self) -> str:  # a failing test's report shows its arguments: not every frame
        return f"Suite({len(self.originals)} incidents: {self.corpora})"


def _selected() -> tuple[list[str], bool]:
    wanted = os.environ.get("METAMORPHIC_CORPORA", "").strip()
    names = ["fixtures", *CORPORA]
    if not wanted:
        return names, False
    chosen = [n.strip() for n in wanted.split(",") if n.strip()]
    unknown = set(chosen) - set(names)
    assert not unknown, f"METAMORPHIC_CORPORA names unknown corpora {sorted(unknown)}; known: {names}"
    return chosen, True


def _prometheus_missing() -> str | None:
    missing = [name for name in ("prometheus", "promtool") if shutil.which(name) is None]
    return f"{' and '.join(missing)} not on PATH" if missing else None


def _bundled_cases(graph: TriageGraph, raw_replays: RawReplays) -> tuple[list[Case], str | None]:
    missing = _prometheus_missing()
    cases = []
    for path in BUNDLED:
        fixture = load_fixture(str(path))
        if fixture.level == "raw":
            if missing:
                continue
            fixture = raw_replays.get("prometheus", path).signals
        cases.append(case_of("fixtures", path.stem, fixture, graph))
    left_out = f"{len(RAW)} raw fixtures left out: {missing}" if missing and RAW else None
    return cases, left_out


@pytest.fixture(scope="session")
def suite(graph: TriageGraph, generated: GeneratedCorpora, raw_replays: RawReplays) -> Suite:
    """Load (and replay, and generate) every incident once, and diagnose each once."""
    selected, narrowed = _selected()
    corpora = available_corpora(c for c in CORPORA if c in selected)
    bundled: list[Case] = []
    left_out = None

    def replay_bundled() -> None:
        nonlocal bundled, left_out
        if "fixtures" in selected:
            bundled, left_out = _bundled_cases(graph, raw_replays)

    by_corpus, _ = generated.originals(corpora, replay_bundled)
    counts = {"fixtures": len(bundled)} if "fixtures" in selected else {}
    originals = [diagnose_case(graph, c) for c in bundled]
    for corpus, loaded in by_corpus.items():
        originals += loaded
        counts[corpus] = len(loaded)
    return Suite(originals, counts, left_out, narrowed)


@pytest.fixture(scope="session")
def workers(suite: Suite, graph: TriageGraph) -> Iterator[ProcessPoolExecutor | None]:
    """Two workers forked once the set is loaded, so each relation's diagnoses run on both cores
    (sequentially where processes cannot be forked safely)."""
    if not can_fork():
        yield None
        return
    share(suite.originals, graph)
    with ProcessPoolExecutor(max_workers=2, mp_context=multiprocessing.get_context("fork")) as pool:
        yield pool


# ------------------------------------------------------------------ the set


def test_every_corpus_takes_part(suite: Suite) -> None:
    if suite.narrowed:
        pytest.skip(f"METAMORPHIC_CORPORA narrows the set to {sorted(suite.corpora)}")
    expected = {"fixtures", *available_corpora()}
    assert set(suite.corpora) == expected
    assert suite.corpora["fixtures"] + len(RAW if suite.raw_left_out else ()) == len(BUNDLED)
    small = {name: n for name, n in suite.corpora.items() if n < 12}
    assert not small, f"corpora with fewer than 12 incidents: {small}"
    names = [o.case.name for o in suite.originals]
    assert len(names) == len(set(names))


def test_raw_fixtures_take_part(suite: Suite) -> None:
    """Skipped loudly without Prometheus (a failure under CI=true), like the other raw tests."""
    if suite.raw_left_out:
        require_prometheus_binaries()
    if "fixtures" not in suite.corpora:
        pytest.skip("METAMORPHIC_CORPORA leaves the bundled fixtures out")
    raw = [o for o in suite.originals if o.case.name.removeprefix("fixtures/") in RAW]
    assert len(raw) == len(RAW)
    # replayed into signals: a user-facing latency (TGI exports no TTFT, its TPOT stands in)
    assert all(o.case.frame.has("ttft_p99_seconds") or o.case.frame.has("tpot_p99_seconds") for o in raw)


# ------------------------------------------------------------------ the relations


@pytest.mark.parametrize("name", [r.name for r in RELATIONS])
def test_relation_holds_on_every_incident(
    name: str, suite: Suite, graph: TriageGraph, workers: ProcessPoolExecutor | None
) -> None:
    outcome = run_relation(BY_NAME[name], suite.originals, graph, workers)
    record(outcome)
    assert outcome.applied > 0, f"{outcome.line()}: applies to no incident"
    assert outcome.passed, outcome.report()


# ------------------------------------------------------------------ the transformations themselves

STEP = 15.0
START = 1_760_000_000.0


def frame_of(series: dict[str, FloatArray | float], steps: int, step: float = STEP) -> SignalFrame:
    """A frame from `{'kv_usage_ratio{instance="a"}': values}`; scalars repeat."""
    rows = []
    for selector, values in series.items():
        name, labels = parse_selector(selector)
        if isinstance(values, float):
            array = np.full(steps, values)
        else:
            array = np.asarray(values, dtype=np.float64)
        assert array.shape == (steps,), selector
        rows.append(Series(name, labels_of(labels), array))
    return SignalFrame(START + step * np.arange(steps, dtype=np.float64), rows)


def small_frame(steps: int = 480) -> SignalFrame:
    """Two hours at 15 s: three replicas, a fleet series, a GPU each, a replica that vanishes."""
    rng = np.random.default_rng(7)
    gone = np.where(np.arange(steps) < 300, 1.0, np.nan)
    return frame_of(
        {
            'request_rate{instance="vllm-0"}': 5 + rng.random(steps),
            'request_rate{instance="vllm-1"}': 6 + rng.random(steps),
            'request_rate{instance="vllm-2"}': 7 * gone,
            'queue_waiting{instance="vllm-0"}': rng.random(steps),
            'queue_waiting{instance="vllm-1"}': rng.random(steps),
            'gpu_util_ratio{instance="vllm-0",gpu="0"}': 0.5,
            'gpu_util_ratio{instance="vllm-1",gpu="0"}': 0.6,
            'gpu_throttle{instance="vllm-1",gpu="0"}': np.where(np.arange(steps) > 200, 1.0, 0.0),
            "ttft_p99_seconds": 0.4 + rng.random(steps),
            'build_info{model="m",engine="vllm",engine_version="0.11",quantization="fp8",route="a",'
            'model_version="1"}': 1.0,
        },
        steps,
    )


def replica_matrices(frame: SignalFrame, rename: dict[str, str] | None = None) -> dict[str, dict[str, bytes]]:
    out = {}
    for signal in frame.signals():
        view = frame.replicas(signal)
        rows = zip(view.replicas, view.values, strict=True)
        out[signal] = {(rename or {}).get(n, n): row.tobytes() for n, row in rows}
    return out


@pytest.mark.parametrize("seed", [0, 1, 12345])
def test_rename_keeps_every_replica_matrix_up_to_names(seed: int) -> None:
    frame = small_frame()
    renamed = rename_replicas(frame, seed)
    alias = {n: replica_alias(n, seed) for n in frame.replica_names()}
    assert set(renamed.replica_names()) == set(alias.values())
    assert not set(renamed.replica_names()) & set(frame.replica_names())
    assert replica_matrices(renamed) == replica_matrices(frame, alias)
    for signal in frame.signals():  # sums in another order: equal to the last bit or two
        np.testing.assert_allclose(renamed.fleet(signal), frame.fleet(signal), rtol=1e-12)
    names, present = frame.presence()
    new_names, new_present = renamed.presence()
    assert {alias[n]: row.tobytes() for n, row in zip(names, present, strict=True)} == {
        n: row.tobytes() for n, row in zip(new_names, new_present, strict=True)
    }
    assert [s.signal for s in renamed.series] != [s.signal for s in frame.series]  # shuffled
    again = rename_replicas(frame, seed)  # seeded: the same names in the same order
    assert [(s.signal, s.labels) for s in again.series] == [(s.signal, s.labels) for s in renamed.series]


def test_rename_renames_pods_with_the_same_names_and_a_bundled_fixture_consistently() -> None:
    frame = frame_of(
        {'kv_usage_ratio{instance="a",pod="a"}': 0.5, 'gpu_xid{exported_pod="a",gpu="0"}': 0.0}, 10
    )
    renamed = rename_replicas(frame, 3)
    labels = {k: v for s in renamed.series for k, v in s.labels if k != "gpu"}
    assert labels == {
        "instance": replica_alias("a", 3),
        "pod": replica_alias("a", 3),
        "exported_pod": replica_alias("a", 3),
    }
    fixture = load_fixture(str(ROOT / "fixtures" / "replica-down-queue-growth.yaml"))
    renamed = rename_replicas(fixture.frame, 11)
    alias = {n: replica_alias(n, 11) for n in fixture.frame.replica_names()}
    assert replica_matrices(renamed) == replica_matrices(fixture.frame, alias)
    assert len(renamed.series) == len(fixture.frame.series)


def test_shift_time_keeps_the_values_and_the_grid() -> None:
    frame = small_frame()
    shifted = shift_time(frame)
    np.testing.assert_array_equal(shifted.times, frame.times + SHIFT)
    assert shifted.step == frame.step
    assert SHIFT % 60 == 0
    for a, b in zip(frame.series, shifted.series, strict=True):
        assert a.labels == b.labels
        np.testing.assert_array_equal(a.values, b.values)


def test_history_earlier_repeats_the_first_hour_before_the_start() -> None:
    frame = small_frame()
    longer = history_earlier(frame, None)
    assert longer is not None
    n = int(HOUR / STEP)
    assert len(longer.times) == len(frame.times) + n
    assert longer.start == frame.start - HOUR and longer.end == frame.end
    assert np.all(np.diff(longer.times) == STEP)
    for a, b in zip(frame.series, longer.series, strict=True):
        np.testing.assert_array_equal(b.values[n:], a.values)
        np.testing.assert_array_equal(b.values[:n], a.values[:n])


def test_history_earlier_repeats_only_what_precedes_the_incident() -> None:
    frame = small_frame()
    longer = history_earlier(frame, frame.start + 20 * MINUTE)  # an incident 25 minutes in
    assert longer is not None
    n, healthy = int(HOUR / STEP), int(20 * MINUTE / STEP)
    for a, b in zip(frame.series, longer.series, strict=True):
        np.testing.assert_array_equal(b.values[n:], a.values)
        np.testing.assert_array_equal(b.values[:n], np.tile(a.values[:healthy], 3))
    assert history_earlier(frame, frame.start + 5 * MINUTE) is None


def test_history_later_leaves_what_the_diagnosis_reads_before_the_onset() -> None:
    frame = small_frame()
    onset = frame.start + 100 * MINUTE
    shorter = history_later(frame, onset)
    assert shorter is not None
    keep = keep_before_onset()
    assert keep <= onset - shorter.start < keep + STEP
    assert shorter.end == frame.end
    dropped = len(frame.times) - len(shorter.times)
    for a, b in zip(frame.series, shorter.series, strict=True):
        np.testing.assert_array_equal(b.values, a.values[dropped:])
    assert history_later(frame, frame.start + keep + 3 * MINUTE) is None  # 3 minutes to drop
    assert history_later(frame, None) is None


def test_blinking_flag_blinks_at_its_duty_cycle_before_and_after_the_onset() -> None:
    frame = small_frame()
    onset = int(len(frame.times) * 0.6)
    for seed in range(5):
        flagged = blinking_flag(frame, seed)
        replica = blink_replica(frame, seed)
        assert replica == "vllm-0"  # present throughout and never throttled
        [flag] = [s for s in flagged.rows("gpu_throttle") if s.label_map == {"instance": replica, "gpu": "7"}]
        for part in (flag.values[:onset], flag.values[onset:]):
            assert set(np.unique(part)) == {0.0, 1.0}
            ones = np.flatnonzero(part == 1.0)
            assert np.all(np.diff(ones) == BLINK_EVERY)
            assert abs(part.mean() - 1 / BLINK_EVERY) <= 1 / len(part)
        assert len(flagged.series) == len(frame.series) + 1
        for signal in frame.signals():
            if signal != "gpu_throttle":
                np.testing.assert_array_equal(flagged.fleet(signal), frame.fleet(signal))
    flags = [blinking_flag(frame, seed).rows("gpu_throttle")[-1] for seed in range(20)]
    phases = {int(np.flatnonzero(flag.values == 1)[0]) for flag in flags}
    assert len(phases) > 1  # seeded phase


def test_blinking_flag_without_a_quiet_replica_lands_on_its_own_node() -> None:
    frame = frame_of({"ttft_p99_seconds": 0.5, "request_rate": 10.0}, 64)
    flagged = blinking_flag(frame, 0)
    assert flagged.replica_names() == ("gpu-node-x",)
    assert flagged.rows("gpu_throttle")[0].values.sum() == 64 / BLINK_EVERY
    old = np.where(np.arange(64) < 32, 1.0, np.nan)  # a rollout: every pod replaced half-way
    new = np.where(np.isnan(old), 0.5, np.nan)
    rolled = frame_of({'kv_usage_ratio{instance="old"}': old, 'kv_usage_ratio{instance="new"}': new}, 64)
    assert blink_replica(rolled, 0) == "gpu-node-x"
    restarted = frame_of({'kv_usage_ratio{instance="a"}': 0.5, 'restarts{instance="a"}': old}, 64)
    assert blink_replica(restarted, 0) == "gpu-node-x"  # present throughout, but not quiet


def test_periodic_tenant_adds_to_the_fleet_and_keeps_the_replicas() -> None:
    frame = small_frame()
    before = frame.fleet("request_rate")
    with_tenant = periodic_tenant(frame)
    assert with_tenant is not None
    base = max(0.1, 0.1 * float(np.nanmedian(before)))
    wave = tenant_wave(frame, base)
    np.testing.assert_allclose(with_tenant.fleet("request_rate"), before + wave)
    assert set(np.unique(wave)) == {base, 2 * base}
    assert abs((wave == 2 * base).mean() - 3 / 12) < 0.01
    assert replica_matrices(with_tenant)["request_rate"] == replica_matrices(frame)["request_rate"]
    [tenant] = [s for s in with_tenant.rows("request_rate") if s.label_map.get("tenant") == TENANT]
    assert tenant.replica is None
    # a fleet that has its own request-rate series keeps it, and gains the tenant beside it
    own = frame_of({"request_rate": 0.5, 'request_rate{instance="a"}': 0.4}, 96)
    added = periodic_tenant(own)
    assert added is not None and len(added.rows("request_rate")) == 3
    np.testing.assert_allclose(added.fleet("request_rate"), 0.5 + tenant_wave(own, 0.1))
    assert periodic_tenant(frame_of({"ttft_p99_seconds": 0.5}, 10)) is None


def test_scale_rates_scales_rates_only() -> None:
    frame = small_frame()
    scaled = scale_rates(frame)
    assert {"request_rate", "prompt_tokens_rate", "preemption_rate", "spend_rate"} <= RATE_SIGNALS
    assert not {"queue_waiting", "requests_running", "gateway_queue", "ttft_p99_seconds"} & RATE_SIGNALS
    np.testing.assert_allclose(scaled.fleet("request_rate"), 100 * frame.fleet("request_rate"))
    for signal in ("queue_waiting", "ttft_p99_seconds", "gpu_util_ratio"):
        np.testing.assert_array_equal(scaled.fleet(signal), frame.fleet(signal))


def test_hold_after_holds_each_series_at_its_baseline_median() -> None:
    frame = small_frame()
    onset = frame.start + 90 * MINUTE
    held = hold_after(frame, ["request_rate"], onset)
    after = frame.times >= onset
    before = (frame.times >= onset - HOUR) & (frame.times < onset)
    for a, b in zip(frame.series, held.series, strict=True):
        if a.signal != "request_rate":
            np.testing.assert_array_equal(a.values, b.values)
            continue
        np.testing.assert_array_equal(b.values[~after], a.values[~after])
        base = a.values[before]
        want = np.median(base[np.isfinite(base)]) if np.isfinite(base).any() else np.nan
        np.testing.assert_array_equal(b.values[after], np.full(after.sum(), want))
    # the replica that vanished at step 300 (75 min) is back at its own level after the onset
    assert np.all(held.replicas("request_rate").values[2][after] == 7.0)


def test_step_to_ramp_rises_linearly_from_the_baseline_to_the_level_after() -> None:
    steps = 480
    rate = np.where(np.arange(steps) < 360, 10.0, 30.0)
    frame = frame_of({"request_rate": rate, "ttft_p99_seconds": 0.4}, steps)
    onset = frame.times[360]
    ramped = step_to_ramp(frame, onset, frame.end)
    assert ramped is not None
    got = ramped.fleet("request_rate")
    inside = (frame.times >= onset - 30 * MINUTE) & (frame.times <= onset)
    np.testing.assert_allclose(got[inside], np.linspace(10.0, 30.0, inside.sum()))
    np.testing.assert_array_equal(got[~inside], rate[~inside])
    assert step_to_ramp(frame, frame.start + 20 * MINUTE, frame.end) is None


def _finding(cause: str) -> CauseFinding:
    return CauseFinding(cause, "request", cause, "ranked", 0.9, ())


def test_the_answer_is_the_verdict_and_the_top_cause_or_the_ambiguous_pair() -> None:
    def diagnosis(verdict: str, *causes: str) -> Diagnosis:
        return Diagnosis(
            "ttft_slow",
            "fixture",
            START,
            None,
            None,
            tuple(_finding(c) for c in causes),
            (),
            (),
            (),
            verdict=verdict,  # type: ignore[arg-type]
        )

    assert answer_of(diagnosis("cause", "a", "b")) == ("cause", "a")
    assert answer_of(diagnosis("ambiguous", "b", "a", "c")) == answer_of(diagnosis("ambiguous", "a", "b"))
    assert answer_of(diagnosis("no_incident")) == ("no_incident", None)
    assert show(answer_of(diagnosis("ambiguous", "b", "a"))) == "ambiguous:{a,b}"
    assert show(answer_of(diagnosis("cause", "kv_pressure"))) == "cause:kv_pressure"


def _evidence(signal: str, check: str, holds: bool | None, role: str = "requires") -> Evidence:
    return Evidence(signal, check, holds, role=role)  # type: ignore[arg-type]


def _diagnosis_of(cause: str, evidence: tuple[Evidence, ...], onset: float, at: float) -> Diagnosis:
    finding = CauseFinding(cause, "request", cause, "ranked", 0.9, evidence)
    return Diagnosis("ttft_slow", "fixture", at, onset, None, (finding,), (), (), (), verdict="cause")


def test_the_evidence_signals_are_every_signal_a_holding_required_check_reads() -> None:
    d = _diagnosis_of(
        "long_prompt_surge",
        (
            _evidence("prompt_tokens_p95", "prompt_tokens_p95 >= 1.5x or long_prompt_ratio >= 2x", True),
            _evidence("ttft_p99_seconds", "ttft_p99_seconds >= 1.5x baseline", True, role="supports"),
            _evidence("kv_usage_ratio", "kv_usage_ratio < 0.9", False),
            _evidence("", "the symptom is quality_down or error_ratio >= 2x baseline", True),
        ),
        START,
        START,
    )
    assert required_evidence_signals(d) == ("long_prompt_ratio", "prompt_tokens_p95")


def test_evidence_ended_brings_back_the_replicas_a_presence_check_saw_go() -> None:
    steps = 480
    gone = np.where(np.arange(steps) < 300, 1.0, np.nan)
    frame = frame_of(
        {
            'queue_waiting{instance="a"}': 2.0,
            'queue_waiting{instance="b"}': 3.0 * gone,
            'kv_usage_ratio{instance="b"}': 0.5 * gone,
            "replicas_ready": np.where(np.arange(steps) < 300, 2.0, 1.0),
            "replicas_desired": 2.0,
        },
        steps,
    )
    onset, at = float(frame.times[370]), frame.end  # the replica went 15 minutes before the onset
    check = "replicas_ready below replicas_desired by >= 1 or replicas reporting dropped by >= 1"
    d = _diagnosis_of("replica_down", (_evidence("replicas_ready", check, True),), onset, at)
    assert vanished_replicas(frame, onset, at) == ("b",)
    ended = evidence_ended(frame, d)
    assert ended is not None
    after = ended.times >= onset
    np.testing.assert_array_equal(ended.fleet("replicas_ready")[after], 2.0)
    np.testing.assert_array_equal(ended.replicas("kv_usage_ratio").values[0][after], 0.5)
    names, present = ended.presence()
    assert names == ("a", "b") and present[:, after].all()
    assert present[1, 310:370].all()  # gone within the lead before the onset: held from there
    # without a presence check, the replicas that went stay gone
    ready = _evidence("replicas_ready", "replicas_ready < 2", True)
    plain = _diagnosis_of("replica_down", (ready,), onset, at)
    kept = evidence_ended(frame, plain)
    assert kept is not None and not kept.presence()[1][1, after].any()
    assert evidence_ended(frame, _diagnosis_of("x", (_evidence("", "the symptom", True),), onset, at)) is None


def test_history_stays_healthy_before_the_first_event() -> None:
    steps = 480
    oom = np.where(np.arange(steps) < 120, 0.0, 1.0)  # 30 minutes in
    late = np.where(np.arange(steps) < 200, np.nan, 1.0)  # a new version 50 minutes in
    frame = frame_of({"ttft_p99_seconds": 0.4, 'oom_killed{instance="a"}': oom}, steps)
    assert first_event(frame) == frame.times[120]
    released = frame_of({'build_info{model="m"}': late, "ttft_p99_seconds": 0.4}, steps)
    assert first_event(released) == frame.times[200]
    assert first_event(frame_of({'restarts{instance="a"}': 2.0}, steps)) is None  # the same all along
    d = _diagnosis_of("engine_oom", (), float(frame.times[240]), frame.end)
    assert healthy_until(frame, d) == frame.times[120] - 5 * MINUTE
    longer = history_earlier(frame, healthy_until(frame, d))
    assert longer is not None
    assert not np.any(longer.rows("oom_killed")[0].values[: int(HOUR / STEP)])


def test_a_relation_lists_every_incident_it_broke() -> None:
    frame = small_frame()
    case = Case("toy/one", frame, frame.end, "ttft_slow", "fixture")
    other = Case("toy/two", frame, frame.end, "ttft_slow", "fixture")
    originals = [
        Original(case, _diagnosis_of("a", (), frame.start, frame.end)),
        Original(other, _diagnosis_of("b", (), frame.start, frame.end)),
    ]

    def same_as_a(original: Original, after: Diagnosis) -> bool:
        return original.diagnosis.causes[0].cause == "a"

    relation = Relation(
        "toy", "unchanged", lambda o: Probe(o.case.frame, o.case.at, o.case.symptom, o.case.source), same_as_a
    )
    graph = build_graph(load_playbooks(ROOT / "playbooks"))
    outcome = run_relation(relation, originals, graph)
    assert (outcome.applied, outcome.held, outcome.not_applicable) == (2, 1, 0)
    assert [f.case for f in outcome.failures] == ["toy/two"]
    assert outcome.line() == "metamorphic toy: 1 of 2 unchanged (50.0%)"
    assert not outcome.passed and "toy/two: cause:b -> " in outcome.report()


def test_the_breach_is_not_removed_where_the_baseline_was_over_the_red_line() -> None:
    frame = small_frame()
    onset = float(frame.times[300])

    def with_line(baseline: float) -> Diagnosis:
        line = Evidence("ttft_p99_seconds", "ttft_p99_seconds >= 1", True, 1.5, baseline, role="detect")
        relative = Evidence("ttft_p99_seconds", "ttft_p99_seconds >= 1.3x baseline", True, 1.5, 0.5, "detect")
        d = _diagnosis_of("replica_down", (), onset, frame.end)
        return dataclasses.replace(d, symptom_evidence=(line, relative))

    assert breached_before(with_line(1.2)) == ("ttft_p99_seconds >= 1",)
    assert breach_removed(frame, with_line(1.2)) is None
    assert breached_before(with_line(0.5)) == ()
    removed = breach_removed(frame, with_line(0.5))
    assert removed is not None
    after = removed.times >= onset
    assert np.unique(removed.fleet("ttft_p99_seconds")[after]).size == 1
    np.testing.assert_array_equal(removed.fleet("request_rate"), frame.fleet("request_rate"))
