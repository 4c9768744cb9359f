"""The engine's progress and admission causes: engine_stalled, batch_undersized, admission_stall.

Each is diagnosed on its bundled fixture with its signature evidence and its forbidden
actions, loses to its confounder on the confounder's fixture, keeps its answer under
transformations that must not matter (replicas renamed, rates in other units, a healthy
replica added) and loses it when its signature is taken away. The audit's readiness item
fails on a replica seen stalled while Ready.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from causekit import bundled as _fixture
from causekit import diagnosed as _diagnose
from causekit import finding as _finding
from causekit import holds as _holds
from causekit import mapped as _map
from causekit import with_healthy_replica
from metamorphic import rename_replicas, scale_rates

from signals.catalog import QueryOptions, load_catalog
from signals.frame import Series, SignalFrame, build_frame
from triage.audit.checklist import ITEMS
from triage.audit.engine import audit
from triage.audit.model import AuditSettings, Fetched
from triage.core.graph import TriageGraph

ROOT = Path(__file__).resolve().parents[2]
STALLED = "engine-stalled-ready-replica"
XID_HANG = "gpu-hang-xid-stalls-replica"
UNDERSIZED = "batch-undersized-max-num-seqs"
SHORTAGE = "capacity-shortage-full-batches"
DEFERRED = "admission-stall-lora-budget"
KV_FULL = "kv-pressure-with-deferred-requests"


# ------------------------------------------------------------------ the causes on their fixtures


def test_a_stalled_engine_is_named_with_its_signature_and_red_lines(graph: TriageGraph) -> None:
    d = _diagnose(graph, STALLED)
    top = d.causes[0]
    assert d.verdict == "cause" and top.cause == "engine_stalled"
    signature = next(e for e in top.evidence if e.signal == "replicas_stalled")
    assert signature.holds and signature.replicas == ("vllm-2",)
    assert _holds(top, "queue_waiting", "supports")  # the router keeps feeding it
    assert not any(e.holds for e in top.evidence if e.role == "against")
    flagged = {f.action: f.reason for f in d.forbidden}
    assert "scale_out" in flagged and "Ready" in flagged["scale_out"]
    assert "restart_whole_fleet" in flagged
    assert {a.id for a in d.first_actions} == {"drain_stalled_replica", "capture_engine_stack"}
    assert all(a.confirm for a in d.first_actions)


def test_an_undersized_batch_is_named_and_raising_the_cap_is_not_forbidden(graph: TriageGraph) -> None:
    d = _diagnose(graph, UNDERSIZED)
    top = d.causes[0]
    assert top.cause == "batch_undersized"
    assert _holds(top, "queue_waiting", "requires") and _holds(top, "kv_usage_ratio", "requires")
    assert _holds(top, "config_info", "supports")  # max_num_seqs=4
    flagged = {f.action: f.reason for f in d.forbidden}
    assert "scale_out" in flagged and "waste" in flagged["scale_out"]
    assert "raise_max_num_seqs" not in flagged
    assert "raise_batch_cap_to_kv" in {a.id for a in d.first_actions}


def test_an_admission_stall_is_named_from_the_deferred_queue(graph: TriageGraph) -> None:
    d = _diagnose(graph, DEFERRED)
    top = d.causes[0]
    assert top.cause == "admission_stall"
    assert _holds(top, "queue_deferred", "requires") and _holds(top, "kv_usage_ratio", "requires")
    flagged = {f.action: f.reason for f in d.forbidden}
    assert "admission" in flagged["scale_out"]
    assert "raise_gpu_memory_utilization" in flagged


# ------------------------------------------------------------------ the confounders


def test_a_gpu_that_hangs_a_replica_is_the_gpu_fault_not_a_stalled_engine(graph: TriageGraph) -> None:
    d = _diagnose(graph, XID_HANG)
    assert d.causes[0].cause == "gpu_fault"
    stalled = _finding(d, "engine_stalled")
    assert stalled is not None and stalled.score < d.causes[0].score
    assert _holds(stalled, "gpu_xid", "against")


def test_a_true_capacity_shortage_is_not_an_undersized_batch(graph: TriageGraph) -> None:
    d = _diagnose(graph, SHORTAGE)
    assert d.causes[0].cause == "capacity_shortage"
    assert _finding(d, "batch_undersized") is None
    assert "scale_out" not in {f.action for f in d.forbidden}


def test_kv_pressure_with_some_deferred_requests_is_kv_pressure(graph: TriageGraph) -> None:
    d = _diagnose(graph, KV_FULL)
    assert d.causes[0].cause == "kv_pressure"
    assert _finding(d, "admission_stall") is None


# ------------------------------------------------------------------ what must not change the answer

KEEP = [(STALLED, "engine_stalled"), (UNDERSIZED, "batch_undersized"), (DEFERRED, "admission_stall")]


@pytest.mark.parametrize(("name", "cause"), KEEP, ids=[k[0] for k in KEEP])
def test_renamed_replicas_and_rates_in_other_units_keep_the_answer(
    graph: TriageGraph, name: str, cause: str
) -> None:
    frame = _fixture(name).frame
    for changed in (rename_replicas(frame, 7), scale_rates(frame, 60.0)):
        assert _diagnose(graph, name, changed).causes[0].cause == cause


@pytest.mark.parametrize(("name", "cause"), KEEP, ids=[k[0] for k in KEEP])
def test_a_healthy_replica_more_keeps_the_answer(graph: TriageGraph, name: str, cause: str) -> None:
    frame = with_healthy_replica(_fixture(name).frame, "vllm-0", "vllm-extra")
    assert _diagnose(graph, name, frame).causes[0].cause == cause


# ------------------------------------------------------------------ what must change it


def test_without_the_stall_signature_the_engine_is_not_called_stalled(graph: TriageGraph) -> None:
    frame = _map(_fixture(STALLED).frame, lambda s: s.values * 0 if s.signal == "replicas_stalled" else None)
    d = _diagnose(graph, STALLED, frame)
    assert _finding(d, "engine_stalled") is None
    assert not d.causes or d.causes[0].cause != "engine_stalled"


def test_a_stall_beside_an_oom_kill_is_not_called_a_stalled_engine(graph: TriageGraph) -> None:
    fixture = _fixture(STALLED)
    onset = fixture.at - 20 * 60

    def oom(s: Series) -> np.ndarray | None:
        if s.signal == "oom_killed" and dict(s.labels).get("instance") == "vllm-2":
            return np.where(fixture.frame.times >= onset, 1.0, 0.0)
        return None

    d = _diagnose(graph, STALLED, _map(fixture.frame, oom))
    stalled = _finding(d, "engine_stalled")
    assert stalled is None or _holds(stalled, "oom_killed", "against")
    assert stalled is None or d.causes[0].cause != "engine_stalled" or stalled.score < 0.5


def test_kv_full_turns_an_undersized_batch_away(graph: TriageGraph) -> None:
    def full(s: Series) -> np.ndarray | None:
        return np.full_like(s.values, 0.97) if s.signal == "kv_usage_ratio" else None

    d = _diagnose(graph, UNDERSIZED, _map(_fixture(UNDERSIZED).frame, full))
    assert _finding(d, "batch_undersized") is None


def test_without_deferred_requests_there_is_no_admission_stall(graph: TriageGraph) -> None:
    frame = _map(_fixture(DEFERRED).frame, lambda s: s.values * 0 if s.signal == "queue_deferred" else None)
    d = _diagnose(graph, DEFERRED, frame)
    assert _finding(d, "admission_stall") is None


# ------------------------------------------------------------------ the audit's readiness item

READINESS = next(i for i in ITEMS if i.id == "deployment.readiness_probe")


def _readiness(frame: SignalFrame | None) -> tuple[str, str]:
    fetched = Fetched(
        "http://prom:9090",
        float(frame.times[-1]) if frame else 0.0,
        frozenset(),
        None,
        None,
        frame,
        {},
        {},
        7200.0,
    )
    item = audit(fetched, load_catalog(), QueryOptions(), AuditSettings(lookback=7200.0)).by_id(READINESS.id)
    return item.status, item.evidence


def test_a_replica_stalled_while_ready_fails_the_readiness_item() -> None:
    status, evidence = _readiness(_fixture(STALLED).frame)
    assert status == "fail"
    assert "vllm-2" in evidence and "tests a port, not progress" in evidence


def test_without_a_stall_the_readiness_item_stays_unknown() -> None:
    frame = _map(_fixture(STALLED).frame, lambda s: s.values * 0 if s.signal == "replicas_stalled" else None)
    status, evidence = _readiness(frame)
    assert status == "unknown" and "no replica was seen stalled" in evidence
    status, evidence = _readiness(_fixture(DEFERRED).frame)
    assert status == "unknown" and "not visible in metrics" in evidence


def test_a_stall_without_readiness_data_cannot_fail_the_item() -> None:
    frame = _fixture(STALLED).frame
    frame = build_frame(
        frame.times,
        [s for s in frame.series if s.signal not in ("replicas_ready", "replicas_desired")],
        frame.source,
    )
    status, evidence = _readiness(frame)
    assert status == "unknown" and "vllm-2" in evidence
