"""Raw exporter series of the links: DCGM's NVLink and PCIe error counters per GPU, and the KV
transfer metrics of SGLang's prefill/decode disaggregation, for `tools/rawsynth.py`.

Each is written only for a Fleet that carries the signal behind it, so the raw twins of
fleets without links or disaggregation keep exactly the series (and the random draws) they
had.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from tools.rawsynth import RawFleet, _Life

Array = np.ndarray
Put = Callable[[str, Array, Callable[[float], str]], None]

# How a GPU's NVLink errors split over DCGM's four per-GPU totals (CRC errors dominate; a
# recovery is the rare link retrain).
NVLINK_ERROR_SHARES = (
    ("DCGM_FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL", 0.55),
    ("DCGM_FI_DEV_NVLINK_CRC_DATA_ERROR_COUNT_TOTAL", 0.25),
    ("DCGM_FI_DEV_NVLINK_REPLAY_ERROR_COUNT_TOTAL", 0.17),
    ("DCGM_FI_DEV_NVLINK_RECOVERY_ERROR_COUNT_TOTAL", 0.03),
)
# Edges (ms) of sglang:kv_transfer_latency_ms as written here.
KV_TRANSFER_MS_BUCKETS = (
    1.0,
    2.0,
    5.0,
    10.0,
    20.0,
    50.0,
    100.0,
    200.0,
    500.0,
    1000.0,
    2000.0,
    5000.0,
    10000.0,
)


def _fmt_int(v: float) -> str:
    return str(round(v))


def dcgm_links(raw: RawFleet, name: str, gpu: str, segments: list[tuple[int, int]], put: Put) -> None:
    """The NVLink error totals and the PCIe replay counter of one GPU, from `gpu_nvlink_errors`
    and `gpu_pcie_replays` (per second)."""
    if raw._raw("gpu_nvlink_errors", name, gpu) is not None:
        per_step = np.clip(raw.sig("gpu_nvlink_errors", name, gpu), 0, None) * raw.dt
        for metric, share in NVLINK_ERROR_SHARES:
            inc = raw.rng.poisson(per_step * share).astype(float)
            put(metric, raw.counter(inc, segments, 0.0), _fmt_int)
    if raw._raw("gpu_pcie_replays", name, gpu) is not None:
        per_step = np.clip(raw.sig("gpu_pcie_replays", name, gpu), 0, None) * raw.dt
        inc = raw.rng.poisson(per_step).astype(float)
        put("DCGM_FI_DEV_PCIE_REPLAY_COUNTER", raw.counter(inc, segments, 0.0), _fmt_int)


def is_disaggregated(raw: RawFleet, name: str) -> bool:
    """A replica that carries KV transfer signals is a decode instance of a PD deployment."""
    return raw._raw("kv_transfer_queue", name) is not None


VLLM_FETCH_SHARES = (("waiting_to_start", 0.3), ("in_progress", 0.7))


def vllm_pd(
    raw: RawFleet, name: str, labels: Mapping[str, str], mask: Array, vanished: bool, target: str
) -> None:
    """vLLM's KV consumer gauge `vllm:num_requests_kv_fetch_by_stage{stage}`: the requests waiting
    for their KV (`kv_transfer_queue`) split between a fetch not started and one in progress, and
    a few fetched requests waiting to be scheduled. Failed transfers end as finished_reason
    "error", which the request counter already splits from `error_ratio`."""
    waiting = np.clip(raw.sig("kv_transfer_queue", name), 0, None)
    for stage, share in (*VLLM_FETCH_SHARES, ("completed_waiting", None)):
        mean = waiting * share if share is not None else np.full(raw.n, 0.3)
        values = raw.rng.poisson(mean).astype(float)
        raw.emit(
            "vllm:num_requests_kv_fetch_by_stage",
            {**labels, "stage": stage},
            raw.finish(values, mask, vanished),
            _fmt_int,
            target,
        )


def sglang_pd(
    raw: RawFleet,
    name: str,
    sched: Mapping[str, str],
    counter: Callable[[str, Mapping[str, str], Array], None],
    gauge: Callable[[str, Array, Callable[[float], str]], None],
    transfers: Array,
    life: _Life,
) -> None:
    """SGLang's PD metrics of a decode instance: transfer and bootstrap failures, the decode
    transfer queue and the KV transfer time histogram (one observation per transfer)."""
    failures = np.clip(raw.sig("kv_transfer_failures", name), 0, None) * raw.dt
    counter("sglang:num_transfer_failed_reqs_total", sched, raw.rng.poisson(0.8 * failures).astype(float))
    counter("sglang:num_bootstrap_failed_reqs_total", sched, raw.rng.poisson(0.2 * failures).astype(float))
    queue = raw.rng.poisson(np.clip(raw.sig("kv_transfer_queue", name), 0, None)).astype(float)
    gauge("sglang:num_decode_transfer_queue_reqs", queue, _fmt_int)
    p99_ms = 1000.0 * raw.sig("kv_transfer_p99_seconds", name, default=math.nan)
    if np.isfinite(p99_ms).all():
        raw._hist(
            "sglang:kv_transfer_latency_ms",
            sched,
            KV_TRANSFER_MS_BUCKETS,
            {0.99: p99_ms},
            transfers,
            sigma=0.6,
            jitter=0.05,
            life=life,
        )
