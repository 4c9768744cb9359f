"""The link causes: interconnect_fault (NVLink or PCIe errors on a tensor-parallel replica) and
kv_transfer_fault (KV transfers of disaggregated prefill/decode that fail or crawl).

Each is diagnosed on its bundled fixture with its signature evidence and its forbidden actions,
loses to its confounder on the confounder's fixture (a throttled replica without link errors;
decode engines OOM-killed while the transfer path is fast), keeps its answer under
transformations that must not matter (replicas renamed, rates in other units, a healthy replica
added) and loses it when its signature is taken away. The audit's NCCL item says, on multi-GPU
replicas, whether DCGM exports the link error counters and which CSV lines to enable.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import numpy as np
from causekit import bundled as _fixture
from causekit import diagnosed as _diagnose
from causekit import finding as _finding
from causekit import holds as _holds
from causekit import mapped as _map
from causekit import with_healthy_replica as _with_healthy_replica
from metamorphic import rename_replicas, scale_rates
from promserver import require_prometheus_binaries

from signals.catalog import QueryOptions, load_catalog
from signals.fixture import load_fixture
from signals.frame import Series, SignalFrame, build_frame
from signals.rawreplay import replay_raw
from tools.incidents_interconnect import PD_HEALTHY
from tools.rawsynth import write_raw
from tools.synth import Fleet
from triage.audit.engine import audit
from triage.audit.model import AuditItem, AuditSettings, Fetched, Sample
from triage.core.graph import TriageGraph
from triage.core.model import Diagnosis
from triage.core.walk import diagnose
from triage.replay import fixture_symptom
from triage.sources import load_graph

ROOT = Path(__file__).resolve().parents[2]
NVLINK = "interconnect-fault-nvlink-tp"
THROTTLED = "gpu-throttling-tp-no-link-errors"
TRANSFER = "kv-transfer-fault-pd"
OOM = "engine-oom-pd-decode"


def _without(frame: SignalFrame, *signals: str) -> SignalFrame:
    return build_frame(frame.times, [s for s in frame.series if s.signal not in signals], frame.source)


def _forbidden(d: Diagnosis) -> dict[str, str]:
    return {f.action: f.reason for f in d.forbidden}


# ------------------------------------------------------------------ the causes on their fixtures


def test_nvlink_errors_on_a_tp_replica_are_named_with_their_evidence_and_red_lines(
    graph: TriageGraph,
) -> None:
    d = _diagnose(graph, NVLINK)
    top = d.causes[0]
    assert d.verdict == "cause" and top.cause == "interconnect_fault"
    assert _holds(top, "gpu_nvlink_errors", "requires")
    signature = next(e for e in top.evidence if e.role == "requires")
    assert signature.replicas == ("vllm-2",)  # the background PCIe replays elsewhere are not new
    assert _holds(top, "tpot_p99_seconds", "supports")
    assert not any(e.holds for e in top.evidence if e.role == "against")
    forbidden = _forbidden(d)
    assert "restart_replica_in_place" in forbidden
    assert "slowest link" in forbidden["scale_out"]
    assert [a.id for a in top.actions] == [
        "drain_link_fault_node",
        "run_link_diagnostics",
        "read_nvlink_errors",
    ]
    assert all(a.confirm for a in top.actions)
    assert "dcgmi diag" in top.actions[1].confirm and "nvidia-smi nvlink -e" in top.actions[2].confirm
    throttling = _finding(d, "gpu_throttling")
    assert throttling is None or throttling.status != "ranked"


def test_a_throttled_tp_replica_without_link_errors_stays_throttling(graph: TriageGraph) -> None:
    d = _diagnose(graph, THROTTLED)
    assert d.causes[0].cause == "gpu_throttling"
    link = _finding(d, "interconnect_fault")
    assert link is None or link.status == "ruled_out"
    assert "restart_replica_in_place" not in _forbidden(d)


def test_failing_kv_transfers_are_named_with_their_evidence_and_red_lines(graph: TriageGraph) -> None:
    d = _diagnose(graph, TRANSFER)
    top = d.causes[0]
    assert d.verdict == "cause" and top.cause == "kv_transfer_fault"
    signature = next(e for e in top.evidence if e.role == "requires")
    assert signature.holds and set(signature.replicas) == {"sglang-1", "sglang-4", "sglang-6"}
    for signal in ("error_ratio", "kv_transfer_queue", "kv_transfer_p99_seconds"):
        assert _holds(top, signal, "supports"), signal
    assert not _holds(top, "oom_killed", "against")
    forbidden = _forbidden(d)
    assert "restart_decode_workers" in forbidden
    assert "same path" in forbidden["scale_out"]
    assert all(a.confirm for a in top.actions)
    oom = _finding(d, "engine_oom")
    assert oom is None or oom.status != "ranked"


def test_decode_engines_killed_for_memory_stay_engine_oom(graph: TriageGraph) -> None:
    d = _diagnose(graph, OOM)
    assert d.causes[0].cause == "engine_oom"
    transfer = _finding(d, "kv_transfer_fault")
    # the transfers the kills cut are seen, and the kills speak against a transfer fault
    assert transfer is not None and _holds(transfer, "oom_killed", "against")
    assert transfer.score < 0.5 * d.causes[0].score


# ------------------------------------------------------------------ what must not change the answer


def test_renamed_replicas_and_rates_in_other_units_keep_both_answers(graph: TriageGraph) -> None:
    for name, cause in ((NVLINK, "interconnect_fault"), (TRANSFER, "kv_transfer_fault")):
        frame = _fixture(name).frame
        assert _diagnose(graph, name, rename_replicas(frame, 7)).causes[0].cause == cause
        assert _diagnose(graph, name, scale_rates(frame, 100.0)).causes[0].cause == cause


def test_link_error_rates_scaled_keep_the_answer(graph: TriageGraph) -> None:
    for factor in (0.01, 50.0):

        def scaled(s: Series, factor: float = factor) -> np.ndarray | None:
            return s.values * factor if s.signal == "gpu_nvlink_errors" else None

        frame = _map(_fixture(NVLINK).frame, scaled)
        assert _diagnose(graph, NVLINK, frame).causes[0].cause == "interconnect_fault"


def test_a_healthy_replica_added_keeps_both_answers(graph: TriageGraph) -> None:
    frame = _with_healthy_replica(_fixture(NVLINK).frame, "vllm-0", "vllm-6")
    assert _diagnose(graph, NVLINK, frame).causes[0].cause == "interconnect_fault"
    frame = _with_healthy_replica(_fixture(TRANSFER).frame, "sglang-0", "sglang-8")
    assert _diagnose(graph, TRANSFER, frame).causes[0].cause == "kv_transfer_fault"


# ------------------------------------------------------------------ what must change it


def test_without_link_errors_there_is_no_interconnect_fault(graph: TriageGraph) -> None:
    silent = _map(
        _fixture(NVLINK).frame,
        lambda s: s.values * 0 if s.signal in ("gpu_nvlink_errors", "gpu_pcie_replays") else None,
    )
    d = _diagnose(graph, NVLINK, silent)
    assert d.causes and d.causes[0].cause != "interconnect_fault"
    link = _finding(d, "interconnect_fault")
    assert link is None or link.status == "ruled_out"


def test_unexported_link_counters_leave_the_cause_unproven_not_ruled_out(graph: TriageGraph) -> None:
    blind = _without(_fixture(NVLINK).frame, "gpu_nvlink_errors", "gpu_pcie_replays")
    d = _diagnose(graph, NVLINK, blind)
    link = _finding(d, "interconnect_fault")
    assert link is None or link.status == "unproven"
    assert "gpu_nvlink_errors" in d.missing_signals


def test_a_throttle_on_the_faulty_replica_speaks_against_the_link(graph: TriageGraph) -> None:
    def throttled(s: Series) -> np.ndarray | None:
        if s.signal == "gpu_throttle" and dict(s.labels).get("instance") == "vllm-2":
            return np.where(np.arange(s.values.size) > s.values.size // 2, 1.0, 0.0)
        return None

    d = _diagnose(graph, NVLINK, _map(_fixture(NVLINK).frame, throttled))
    link = _finding(d, "interconnect_fault")
    assert link is not None and _holds(link, "gpu_throttle", "against")


def test_without_failed_or_slow_transfers_there_is_no_kv_transfer_fault(graph: TriageGraph) -> None:
    def healthy(s: Series) -> np.ndarray | None:
        if s.signal == "kv_transfer_failures":
            return s.values * 0
        if s.signal == "kv_transfer_p99_seconds":
            return np.full_like(s.values, 0.045)
        return None

    d = _diagnose(graph, TRANSFER, _map(_fixture(TRANSFER).frame, healthy))
    transfer = _finding(d, "kv_transfer_fault")
    assert transfer is None or transfer.status == "ruled_out"


def test_a_slow_transfer_path_alone_is_a_kv_transfer_fault(graph: TriageGraph) -> None:
    """Transfers that crawl without failing: the latency half of the signature holds alone."""
    frame = _map(
        _fixture(TRANSFER).frame, lambda s: s.values * 0 if s.signal == "kv_transfer_failures" else None
    )
    d = _diagnose(graph, TRANSFER, frame)
    transfer = _finding(d, "kv_transfer_fault")
    assert transfer is not None and transfer.status == "ranked"
    assert _holds(transfer, "kv_transfer_p99_seconds", "requires")


# ------------------------------------------------------------------ the audit's NCCL and NVLink item

START = 1_791_000_000.0
NVLINK_COUNTERS = frozenset(
    {
        "DCGM_FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL",
        "DCGM_FI_DEV_NVLINK_CRC_DATA_ERROR_COUNT_TOTAL",
        "DCGM_FI_DEV_NVLINK_REPLAY_ERROR_COUNT_TOTAL",
        "DCGM_FI_DEV_NVLINK_RECOVERY_ERROR_COUNT_TOTAL",
    }
)
DEFAULT_DCGM = frozenset(
    {
        "DCGM_FI_DEV_GPU_UTIL",
        "DCGM_FI_DEV_GPU_TEMP",
        "DCGM_FI_DEV_XID_ERRORS",
        "DCGM_FI_DEV_PCIE_REPLAY_COUNTER",
    }
)


def _gpus(per_replica: Mapping[str, int]) -> dict[str, list[Sample]]:
    samples = [
        Sample({"Hostname": "n1", "instance": replica, "gpu": str(g), "UUID": f"GPU-{replica}-{g}"}, 1.0)
        for replica, count in per_replica.items()
        for g in range(count)
    ]
    return {"dcgm_gpus": samples}


def _nccl(names: frozenset[str], instant: Mapping[str, list[Sample]]) -> AuditItem:
    fetched = Fetched(
        "http://prom:9090",
        START,
        frozenset({"vllm:num_requests_running"}) | names,
        None,
        {"activeTargets": []},
        None,
        instant,
        {},
        7200.0,
    )
    settings = AuditSettings(lookback=7200.0, step=60.0)
    return audit(fetched, load_catalog(), QueryOptions(), settings).by_id("nodes.nccl_network")


def test_tp_replicas_on_default_counters_name_the_nvlink_lines_to_uncomment() -> None:
    item = _nccl(DEFAULT_DCGM, _gpus({"vllm-0": 4, "vllm-1": 4}))
    assert item.status == "unknown"  # advice beside the NCCL NIC and MTU, which need the pod spec
    assert "advisory: 2 replicas on several GPUs (vllm-0 (4 GPUs), vllm-1 (4 GPUs))" in item.evidence
    assert all(c in item.evidence for c in NVLINK_COUNTERS)
    assert "(# NVLink) in its counters CSV (etc/default-counters.csv" in item.evidence
    assert "gpu_nvlink_errors is blind (only PCIe replays are read)" in item.evidence
    assert "NCCL NIC and MTU are not visible" in item.evidence


def test_tp_replicas_with_every_link_counter_pass_the_link_part() -> None:
    item = _nccl(DEFAULT_DCGM | NVLINK_COUNTERS, _gpus({"vllm-0": 2}))
    assert item.status == "unknown"  # the NCCL NIC and MTU still need the pod spec
    assert "DCGM exports the NVLink error counters and PCIe replays" in item.evidence
    assert "uncomment" not in item.evidence


def test_a_custom_csv_without_pcie_replays_names_that_line_too() -> None:
    item = _nccl((DEFAULT_DCGM - {"DCGM_FI_DEV_PCIE_REPLAY_COUNTER"}) | NVLINK_COUNTERS, _gpus({"vllm-0": 2}))
    assert item.status == "unknown"
    assert "add `DCGM_FI_DEV_PCIE_REPLAY_COUNTER, counter," in item.evidence
    assert "gpu_pcie_replays is blind" in item.evidence


def test_single_gpu_replicas_do_not_ask_for_nvlink_counters() -> None:
    # an 8-GPU node of single-GPU replicas holds no tensor-parallel instance
    instant = {**_gpus({"vllm-0": 1, "vllm-1": 1}), "gpu_nodes": [Sample({"node": "n1"}, 8.0)]}
    item = _nccl(DEFAULT_DCGM, instant)
    assert item.status == "unknown"
    assert "no replica or node with more than one GPU" in item.evidence
    assert "uncomment" not in item.evidence


def test_multi_gpu_nodes_count_when_replicas_cannot_be_matched() -> None:
    instant = {"dcgm_gpus": [], "gpu_nodes": [Sample({"node": "gpu-node-00"}, 8.0)]}
    item = _nccl(DEFAULT_DCGM, instant)
    assert item.status == "unknown"
    assert "uncomment DCGM_FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL" in item.evidence
    assert "1 GPU nodes with several GPUs (gpu-node-00 (8 GPUs))" in item.evidence


# ------------------------------------------------------------------ vLLM's side of disaggregation


def test_vllm_kv_consumers_are_read_from_their_fetch_stages_and_error_finishes(tmp_path: Path) -> None:
    """The vLLM sources of the transfer signals through a real Prometheus: a decode instance's
    `num_requests_kv_fetch_by_stage` and its requests finished with reason "error"."""
    require_prometheus_binaries()
    f = Fleet("kv-transfer-vllm", "vLLM decode instances, one of whose KV fetches fail.", replicas=4, seed=9)
    for name in f.names:
        for signal in ("kv_transfer_failures", "kv_transfer_queue"):
            f.series[(signal, (("instance", name),))] = np.full(f.n, PD_HEALTHY[signal])
    f.step("kv_transfer_queue", "50m", to=12.0, replicas=["vllm-1"], ramp="1m")
    f.step("error_ratio", "50m", to=0.25, replicas=["vllm-1"], ramp="1m")
    f.step("ttft_p99_seconds", "50m", factor=3.0, replicas=["vllm-1"], ramp="1m")
    out = tmp_path / "kv-transfer-vllm-raw.yaml"
    write_raw(
        f, str(out), out.stem, "errors", at="80m", expect={"cause": "kv_transfer_fault"}, flavour="vllm"
    )
    raw = load_fixture(str(out))
    stages = {
        dict(s.labels).get("stage")
        for s in raw.frame.series
        if s.signal == "vllm:num_requests_kv_fetch_by_stage"
    }
    assert stages == {"waiting_to_start", "in_progress", "completed_waiting"}
    replayed, _ = replay_raw(raw, load_catalog())
    frame = replayed.frame
    assert not frame.has("kv_transfer_p99_seconds")  # SGLang's alone
    queue = frame.replicas("kv_transfer_queue")
    last = {r: float(np.nanmax(row[-20:])) for r, row in zip(queue.replicas, queue.values, strict=True)}
    assert max(last, key=last.__getitem__) == "vllm-1" and last["vllm-1"] >= 8
    failures = frame.replicas("kv_transfer_failures")
    late = {
        r: float(np.nanmean(row[-20:])) for r, row in zip(failures.replicas, failures.values, strict=True)
    }
    assert late["vllm-1"] > 0.1 and all(v < 0.02 for r, v in late.items() if r != "vllm-1")
    graph = load_graph()
    symptom, source = fixture_symptom(replayed, None, graph.knowledge)
    d = diagnose(graph, frame, symptom, replayed.at, source=source)
    assert d.causes[0].cause == "kv_transfer_fault"
