"""`misrouting`: one model's traffic moved onto the wrong pool, told apart from a burst.

The signature is the gateway's share of a model's requests per target moving at the onset
(`route_share_shift`), at an unchanged request rate; a burst brings more requests with
every target's share kept. Checked on the bundled fixtures (the cause, its evidence, the
forbidden actions and why), under transformations that must not change the answer (rates
in other units, replicas renamed, healthy replicas added) and ones that must (the share
held at its baseline, the share not exported, a burst on top), and in the audit item that
asks whether routing decisions can be explained from the gateway's per-target counters.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from functools import cache
from pathlib import Path

import numpy as np
import pytest
from conftest import frame_of
from metamorphic import hold_after, rename_replicas, scale_rates
from promserver import require_prometheus_binaries

from signals.catalog import QueryOptions, load_catalog
from signals.fixture import Fixture, load_fixture
from signals.frame import Series, SignalFrame, build_frame
from signals.rawreplay import replay_raw
from signals.vocabulary import EXPORTER_OF, SIGNALS
from triage.audit.engine import audit
from triage.audit.model import AuditItem, AuditSettings, Fetched
from triage.core.graph import TriageGraph
from triage.core.model import CauseFinding, Diagnosis
from triage.core.walk import diagnose
from triage.replay import check_expect, fixture_symptom
from triage.sources import load_graph

ROOT = Path(__file__).resolve().parents[2]
MISROUTING = ROOT / "fixtures" / "misrouting-short-to-long-pool.yaml"
BURST = ROOT / "fixtures" / "traffic-burst-shares-steady.yaml"
RAW = ROOT / "fixtures" / "misrouting-short-to-long-pool-raw.yaml"
ITEM = "routing.explainable_rules"


@cache
def graph() -> TriageGraph:
    return load_graph()


@cache
def fixture(path: Path) -> Fixture:
    return load_fixture(str(path))


def run(case: Fixture, frame: SignalFrame | None = None, at: float | None = None) -> Diagnosis:
    symptom, source = fixture_symptom(case, None, graph().knowledge)
    return diagnose(
        graph(), case.frame if frame is None else frame, symptom, case.at if at is None else at, source=source
    )


def top(diagnosis: Diagnosis) -> str | None:
    return diagnosis.causes[0].cause if diagnosis.causes else None


def finding(diagnosis: Diagnosis, cause: str) -> CauseFinding:
    return next(c for c in diagnosis.walked if c.cause == cause)


def onset(case: Fixture) -> float:
    d = run(case)
    assert d.onset is not None
    return d.onset


# ------------------------------------------------------------------ the signal


def test_the_share_shift_is_a_gateway_signal_read_from_the_real_counters() -> None:
    spec = SIGNALS["route_share_shift"]
    assert (spec.layer, spec.unit, spec.fleet) == ("supply", "ratio", "max")
    assert EXPORTER_OF["route_share_shift"] == "gateway"
    sources = {s.source: s for s in load_catalog().sources["route_share_shift"]}
    assert set(sources) == {"epp", "litellm"}
    epp = sources["epp"].fleet
    assert epp is not None
    assert "by (model_name, target_model_name)" in epp and "inference_objective_request_total" in epp
    assert "inference_model_request_total" in epp  # the picker's pre-1.0 name, read the same way
    assert "offset 30m" in epp
    litellm = sources["litellm"].fleet
    assert litellm is not None and "by (model_group, model_id)" in litellm


# ------------------------------------------------------------------ the bundled fixtures


def test_a_share_moved_onto_the_long_context_pool_is_misrouting() -> None:
    case = fixture(MISROUTING)
    d = run(case)
    assert case.expect is not None and check_expect(d, case.expect).passed
    assert d.verdict == "cause" and top(d) == "misrouting"
    lead = d.causes[0]
    key = next(e for e in lead.evidence if e.signal == "route_share_shift")
    assert key.holds and key.value is not None and key.baseline is not None
    assert key.value > 0.3 and key.baseline < 0.05
    steady = next(e for e in lead.evidence if e.signal == "request_rate" and "not above" in e.check)
    assert steady.holds
    assert "routing_imbalance" in lead.explains
    assert [a.id for a in lead.actions] == ["diff_routing_rules", "route_back"]
    assert all(a.confirm for a in lead.actions)


def test_scale_out_and_retuning_the_wrong_pool_are_forbidden_with_the_evidence() -> None:
    d = run(fixture(MISROUTING))
    forbidden = {f.action: f.reason for f in d.forbidden}
    assert "wrong pool" in forbidden["scale_out"] and "route_share_shift" in forbidden["scale_out"]
    assert "route_share_shift" in forbidden["retune_wrong_pool"]


def test_a_burst_that_keeps_every_share_stays_a_burst() -> None:
    case = fixture(BURST)
    d = run(case)
    assert case.expect is not None and check_expect(d, case.expect).passed
    assert top(d) == "traffic_burst"
    mine = finding(d, "misrouting")
    assert mine.status != "ranked"
    key = next(e for e in mine.evidence if e.signal == "route_share_shift")
    assert key.holds is False


def test_the_raw_twin_tells_the_same_story_in_the_pickers_own_series() -> None:
    raw = fixture(RAW)
    assert raw.level == "raw"
    targets = {
        s.label_map.get("target_model_name")
        for s in raw.frame.series
        if s.signal == "inference_objective_request_total"
    }
    assert len(targets) == 2
    assert raw.expect is not None and raw.expect.cause == "misrouting"


def test_the_share_shift_through_prometheus_matches_the_twin() -> None:
    """The catalog's PromQL on the picker's per-target counters, in a real Prometheus: no value
    before it has half an hour of history, about nothing before the onset, the twin's move at `at`."""
    require_prometheus_binaries()
    replayed, report = replay_raw(fixture(RAW), load_catalog())
    assert report.problems() == {}
    frame, twin = replayed.frame, fixture(MISROUTING)
    values = frame.fleet("route_share_shift")
    times = frame.times
    assert not np.isfinite(values[times < frame.start + 25 * 60]).any()
    change = frame.start + 80 * 60  # the routing change, before the latency's onset
    before = values[(times > change - 40 * 60) & (times < change)]
    assert np.nanmax(before) < 0.03
    at = values[frame.position(replayed.at)]
    want = twin.frame.fleet("route_share_shift")[twin.frame.position(twin.at)]
    assert abs(at - want) < 0.05, (at, want)


# ------------------------------------------------------------------ must not change the answer


def test_rates_in_other_units_and_renamed_replicas_keep_misrouting() -> None:
    case = fixture(MISROUTING)
    assert top(run(case, scale_rates(case.frame))) == "misrouting"
    assert top(run(case, rename_replicas(case.frame, 7))) == "misrouting"


def _with_healthy_replicas(frame: SignalFrame, like: str, count: int) -> SignalFrame:
    """`count` more replicas copying `like`'s series, and the fleet's ready and desired counts with them."""
    series = [Series(s.signal, s.labels, s.values.copy()) for s in frame.series]
    for k in range(count):
        name = f"{like}-copy-{k}"
        for s in frame.series:
            if s.replica == like:
                labels = tuple((key, name if key == "instance" else v) for key, v in s.labels)
                series.append(Series(s.signal, labels, s.values.copy()))
    for s in series:
        if s.signal in ("replicas_ready", "replicas_desired") and s.replica is None:
            s.values[:] = s.values + count
    return build_frame(frame.times, series, frame.source)


def test_healthy_replicas_added_keep_misrouting() -> None:
    case = fixture(MISROUTING)
    assert top(run(case, _with_healthy_replicas(case.frame, "vllm-0", 3))) == "misrouting"


def test_the_wrong_pool_seen_alone_is_misrouting_not_a_burst() -> None:
    """The long-context pool as its own fleet: its requests quadrupled at once, every replica
    queues (a burst, on its own engines), and the gateway says a target's share moved."""
    case = fixture(MISROUTING)
    pool = {"vllm-6", "vllm-7"}
    series = [s for s in case.frame.series if s.replica is None or s.replica in pool]
    frame = build_frame(case.frame.times, series, case.frame.source)
    for s in frame.series:
        if s.signal in ("replicas_ready", "replicas_desired"):
            s.values[:] = 2.0
    d = run(case, frame)
    assert top(d) == "misrouting"
    assert finding(d, "traffic_burst").status == "ranked"
    assert "traffic_burst" in d.causes[0].explains


# ------------------------------------------------------------------ must change the answer


def test_the_share_held_at_its_baseline_is_not_misrouting() -> None:
    case = fixture(MISROUTING)
    held = hold_after(case.frame, ["route_share_shift"], onset(case) - 300)
    d = run(case, held)
    assert top(d) != "misrouting"
    assert finding(d, "misrouting").status != "ranked"


def test_without_the_gateways_per_target_counters_misrouting_is_unproven() -> None:
    case = fixture(MISROUTING)
    frame = build_frame(
        case.frame.times, [s for s in case.frame.series if s.signal != "route_share_shift"], case.frame.source
    )
    d = run(case, frame)
    assert top(d) != "misrouting"
    assert finding(d, "misrouting").status == "unproven"


def _add(frame: SignalFrame, signal: str, values: np.ndarray) -> SignalFrame:
    kept = [Series(s.signal, s.labels, s.values.copy()) for s in frame.series if s.signal != signal]
    return build_frame(frame.times, [*kept, Series(signal, (), values)], frame.source)


def test_a_burst_with_a_share_moved_too_is_misrouting_on_top() -> None:
    """The same burst with a target's share moved at its onset: the routing change explains it."""
    case = fixture(BURST)
    start = onset(case)
    shift = fixture(MISROUTING).frame.fleet("route_share_shift").copy()
    burst = case.frame.fleet("route_share_shift").copy()
    moved = np.where(case.frame.times >= start, shift, burst)
    d = run(case, _add(case.frame, "route_share_shift", moved))
    assert top(d) == "misrouting"
    assert "traffic_burst" in d.causes[0].explains


# ------------------------------------------------------------------ the audit item

SETTINGS = AuditSettings(lookback=2 * 3600.0, step=60.0)
ENGINES = frozenset({"vllm:num_requests_running", "vllm:num_requests_waiting"})


def _audit(names: frozenset[str] | None, frame_series: Mapping[str, object] | None = None) -> AuditItem:
    frame = frame_of(dict(frame_series), 120, 60.0) if frame_series is not None else None
    fetched = Fetched(
        "http://prom:9090",
        1_791_000_000.0,
        names,
        {"groups": []},
        {"activeTargets": []},
        frame,
        {},
        {} if names is not None else {"metric_names": "HTTP 503"},
        SETTINGS.lookback,
    )
    report = audit(fetched, load_catalog(), QueryOptions(), SETTINGS)
    return next(i for i in report.items if i.id == ITEM)


@pytest.mark.parametrize(
    ("names", "who"),
    [
        (("inference_objective_request_total",), "the endpoint picker"),
        (("inference_model_request_total",), "the endpoint picker"),
        (("litellm_proxy_total_requests_metric_total", "litellm_deployment_total_requests_total"), "LiteLLM"),
        (("vllm:num_incoming_requests_total", "vllm:request_latency_seconds_count"), "production-stack"),
    ],
)
def test_per_target_request_counters_make_routing_explainable(names: Sequence[str], who: str) -> None:
    item = _audit(ENGINES | set(names))
    assert item.status == "pass", item.evidence
    assert who in item.evidence
    assert "decision log" in item.evidence


def test_the_largest_share_move_is_quoted_when_the_fleet_reads_it() -> None:
    shift = np.concatenate([np.full(90, 0.01), np.full(30, 0.42)])
    item = _audit(ENGINES | {"inference_objective_request_total"}, {"route_share_shift": shift})
    assert item.status == "pass"
    assert "reached 0.42" in item.evidence


@pytest.mark.parametrize(
    "names", [("litellm_proxy_total_requests_metric_total",), ("vllm:num_incoming_requests_total",)]
)
def test_a_gateway_that_counts_requests_but_no_target_fails(names: Sequence[str]) -> None:
    item = _audit(ENGINES | set(names))
    assert item.status == "fail", item.evidence
    assert "no target" in item.evidence and "burst" in item.evidence


def test_no_gateway_or_no_names_is_unknown_and_says_what_settles_it() -> None:
    item = _audit(ENGINES)
    assert item.status == "unknown"
    assert "inference_objective_request_total" in item.evidence and "settles it" in item.evidence
    assert _audit(None).status == "unknown"
