"""DCGM as installed by default: what the catalog reads when the throttle and ECC counters are not exported.

dcgm-exporter's default counters CSV leaves out DCGM_FI_DEV_THERMAL_VIOLATION,
POWER_VIOLATION and ECC_DBE_VOL_TOTAL, and has no CLOCKS_EVENT_REASONS line at all. The
catalog then infers `gpu_throttle` from the SM clock (`dcgm_sm_clock`) and reads
`gpu_ecc_errors` from row remapping (`dcgm_remapped_rows`), each marked as a stand-in.

The inferred throttle is run here as the catalog writes it, on a real Prometheus over
backfilled series, one scenario per selector: a GPU braked to 1100 MHz at a normal
temperature reads 1 (among busy peers, and among idle ones), and boost jitter, an idle GPU
at low clocks, a fleet that slowed together under low load (or under a cap on every GPU)
and a GPU whose clocks were locked low all along read 0 at every step; a blank clock is no
reading. Each scenario is the one that fails if its part of the query is dropped (the util
test, the own-past test, the busy peers' median, the 0.8 margin, the `or 0 *`, the filter).
The remapped rows are read the same way, and a new remap is new to the walk's event check.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
import pytest
from promserver import require_prometheus_binaries

from signals.catalog import QueryOptions, load_catalog, resolve
from signals.frame import SignalFrame
from signals.live import FetchReport, fetch_frame
from signals.prometheus import PrometheusSource
from signals.tempprom import TemporaryPrometheus, to_openmetrics
from triage.core.checks.events import new_against_background

START = 1_791_000_000.0
STEP = 30.0
N = 300  # two and a half hours: the throttle's own-past window (1h) is full long before the events
EVENT = 200  # the brake, the idle spell, the slowdown and the remap start at this step
BOOST = 1980.0  # H100 SXM max boost, MHz
BRAKED = 1100.0
INT64_NOT_SUPPORTED = 9223372036854775794.0  # what DCGM stores where it has no reading
FloatArray = npt.NDArray[np.float64]

DEFAULT_COUNTERS = frozenset(
    {
        # the uncommented DCGM lines of dcgm-exporter's etc/default-counters.csv
        "DCGM_FI_DEV_SM_CLOCK",
        "DCGM_FI_DEV_MEM_CLOCK",
        "DCGM_FI_DEV_MEMORY_TEMP",
        "DCGM_FI_DEV_GPU_TEMP",
        "DCGM_FI_DEV_POWER_USAGE",
        "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION",
        "DCGM_FI_DEV_PCIE_REPLAY_COUNTER",
        "DCGM_FI_DEV_GPU_UTIL",
        "DCGM_FI_DEV_MEM_COPY_UTIL",
        "DCGM_FI_DEV_ENC_UTIL",
        "DCGM_FI_DEV_DEC_UTIL",
        "DCGM_FI_DEV_XID_ERRORS",
        "DCGM_FI_DEV_FB_FREE",
        "DCGM_FI_DEV_FB_USED",
        "DCGM_FI_DEV_FB_RESERVED",
        "DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL",
        "DCGM_FI_DEV_VGPU_LICENSE_STATUS",
        "DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS",
        "DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS",
        "DCGM_FI_DEV_ROW_REMAP_FAILURE",
        "DCGM_FI_PROF_GR_ENGINE_ACTIVE",
        "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE",
        "DCGM_FI_PROF_DRAM_ACTIVE",
        "DCGM_FI_PROF_PCIE_TX_BYTES",
        "DCGM_FI_PROF_PCIE_RX_BYTES",
    }
)


# --------------------------------------------------------------------------- resolution


def test_a_default_install_resolves_throttle_and_ecc_to_their_stand_ins() -> None:
    found = resolve(load_catalog(), set(DEFAULT_COUNTERS))
    throttle, ecc = found["gpu_throttle"], found["gpu_ecc_errors"]
    for res, source in ((throttle, "dcgm_sm_clock"), (ecc, "dcgm_remapped_rows")):
        assert res.replica is not None and res.fleet is not None, res
        assert res.replica.source == source and res.fleet.source == source
        assert res.replica.exporter == "gpu"
    assert throttle.replica is not None and throttle.replica.stands_in == (
        "inferred from the SM clock against its own past and its peers "
        "(DCGM's default counters export no throttle reasons)"
    )
    assert ecc.replica is not None and ecc.replica.stands_in == (
        "uncorrectable remapped rows and row-remap failures (ECC DBE counters are not exported)"
    )
    assert found["gpu_xid"].replica is not None and found["gpu_xid"].replica.source == "dcgm"
    assert found["gpu_xid"].replica.stands_in is None


@pytest.mark.parametrize(
    ("extra", "throttle", "ecc"),
    [
        ({"DCGM_FI_DEV_THERMAL_VIOLATION", "DCGM_FI_DEV_POWER_VIOLATION"}, "dcgm", "dcgm_remapped_rows"),
        ({"DCGM_FI_DEV_CLOCKS_EVENT_REASONS"}, "dcgm_clock_events", "dcgm_remapped_rows"),
        ({"DCGM_FI_DEV_ECC_DBE_VOL_TOTAL"}, "dcgm_sm_clock", "dcgm"),
    ],
)
def test_the_real_counters_win_once_enabled(extra: set[str], throttle: str, ecc: str) -> None:
    """The stand-ins are the last sources: uncommenting a counter puts the real reading back."""
    found = resolve(load_catalog(), set(DEFAULT_COUNTERS) | extra)
    chosen = {s: found[s].replica for s in ("gpu_throttle", "gpu_ecc_errors")}
    assert {s: c.source if c else None for s, c in chosen.items()} == {
        "gpu_throttle": throttle,
        "gpu_ecc_errors": ecc,
    }
    real = {"dcgm", "dcgm_clock_events"}
    assert all(c is not None and (c.stands_in is None) == (c.source in real) for c in chosen.values())


def test_without_the_clock_or_the_remap_rows_they_stay_blind() -> None:
    found = resolve(
        load_catalog(), {"DCGM_FI_DEV_GPU_UTIL", "DCGM_FI_DEV_GPU_TEMP", "DCGM_FI_DEV_XID_ERRORS"}
    )
    assert found["gpu_throttle"].blind and found["gpu_ecc_errors"].blind


# --------------------------------------------------------------------------- the data


@dataclass(frozen=True)
class Gpu:
    """One GPU's readings per step (NaN: no sample)."""

    clock: FloatArray
    util: FloatArray
    temp: FloatArray
    remapped: FloatArray | None = None
    remap_failure: FloatArray | None = None


def _jitter(rng: np.random.Generator, level: float, spread: float = 0.03) -> FloatArray:
    """A clock that wanders ±`spread` around `level` (boost jitter), whole MHz as DCGM reports."""
    return np.asarray(np.round(level * (1 + rng.uniform(-spread, spread, N))), dtype=np.float64)


def _busy(rng: np.random.Generator) -> Gpu:
    return Gpu(_jitter(rng, BOOST), np.round(rng.uniform(80, 95, N)), np.round(rng.uniform(62, 68, N)))


def _after(before: FloatArray, after: FloatArray | float) -> FloatArray:
    out = before.copy()
    out[EVENT:] = after if np.isscalar(after) else np.asarray(after)[EVENT:]
    return out


def _scenarios(rng: np.random.Generator) -> dict[str, list[Gpu]]:
    out: dict[str, list[Gpu]] = {}
    # A hardware power brake after a power event: one GPU held at 1100 MHz, busy (its work takes
    # longer), its temperature normal, even a little lower.
    held = _busy(rng)
    braked = Gpu(
        _after(held.clock, _jitter(rng, BRAKED, 0.01)), _after(held.util, 98.0), _after(held.temp, 60.0)
    )
    out["brake"] = [_busy(rng), _busy(rng), braked, _busy(rng)]
    # The same brake at night, its node's other GPU busy and the other node idle at low clocks:
    # the peers are the busy GPUs, the idle clocks never drag their median down.
    held = _busy(rng)
    night = Gpu(_after(held.clock, _jitter(rng, BRAKED, 0.01)), _after(held.util, 90.0), held.temp)
    asleep = [Gpu(np.full(N, 300.0), np.full(N, 3.0), np.full(N, 35.0)) for _ in range(2)]
    out["brake_idle_peers"] = [_busy(rng), night, *asleep]
    # Boost jitter alone: every clock wanders ±3% for the whole record.
    out["jitter"] = [_busy(rng) for _ in range(4)]
    # One GPU goes idle (util 2%, idle clocks) after being busy at full boost, one idles throughout.
    spell = _busy(rng)
    idle = Gpu(_after(spell.clock, 345.0), _after(spell.util, 2.0), _after(spell.temp, 38.0))
    always = Gpu(np.full(N, 210.0), np.zeros(N), np.full(N, 33.0))
    out["idle"] = [_busy(rng), idle, always, _busy(rng)]
    # Low load on every GPU at once: low util and clocks down together.
    out["together"] = [
        Gpu(_after(g.clock, _jitter(rng, 1000.0, 0.1)), _after(g.util, rng.uniform(10, 30, N)), g.temp)
        for g in (_busy(rng) for _ in range(4))
    ]
    # A cap on every GPU (a power limit lowered cluster-wide): busy, every clock down together.
    out["capped"] = [
        Gpu(_after(g.clock, _jitter(rng, 1300.0)), g.util, g.temp) for g in (_busy(rng) for _ in range(4))
    ]
    # A GPU whose clocks were locked low (nvidia-smi --lock-gpu-clocks) before the record: slower
    # than its peers all along, but no limit came down on it; its own past says so.
    locked = _busy(rng)
    out["locked"] = [_busy(rng), Gpu(_jitter(rng, 1400.0), locked.util, locked.temp), _busy(rng), _busy(rng)]
    # DCGM blanks: GPU 3 cannot read its SM clock (DCGM_INT64_NOT_SUPPORTED at every step), GPU 1
    # loses one reading at EVENT.
    gaps = [_busy(rng) for _ in range(4)]
    gaps[1].clock[EVENT] = INT64_NOT_SUPPORTED
    gaps[3].clock[:] = INT64_NOT_SUPPORTED
    out["blanks"] = gaps
    # Row remapping: GPU 1 remaps a row for an uncorrectable error at EVENT; GPU 2 has had its
    # remapping fail (and 8 rows remapped) since before the record; GPUs 0 and 3 are clean.
    zeros = np.zeros(N)
    clean = [_busy(rng) for _ in range(4)]
    out["remap"] = [
        Gpu(clean[0].clock, clean[0].util, clean[0].temp, zeros, zeros),
        Gpu(clean[1].clock, clean[1].util, clean[1].temp, _after(zeros, 1.0), zeros),
        Gpu(clean[2].clock, clean[2].util, clean[2].temp, np.full(N, 8.0), np.ones(N)),
        Gpu(clean[3].clock, clean[3].util, clean[3].temp, zeros, zeros),
    ]
    return out


def _labels(scenario: str, index: int) -> dict[str, str]:
    """dcgm-exporter's labels for GPU `index` (two per node), plus the scenario the selector picks."""
    host = f"{scenario}-node-{index // 2}"
    return {
        "gpu": str(index % 2),
        "UUID": f"GPU-{host}-{index % 2:04d}",
        "device": f"nvidia{index % 2}",
        "modelName": "NVIDIA H100 80GB HBM3",
        "Hostname": host,
        "DCGM_FI_DRIVER_VERSION": "550.127.05",
        "instance": f"{host}:9400",
        "job": "dcgm-exporter",
        "scenario": scenario,
    }


def _series(scenarios: Mapping[str, list[Gpu]]) -> str:
    rows: list[tuple[str, dict[str, str], FloatArray, float, float]] = []
    for scenario, gpus in scenarios.items():
        for index, gpu in enumerate(gpus):
            labels = _labels(scenario, index)
            readings = {
                "DCGM_FI_DEV_SM_CLOCK": gpu.clock,
                "DCGM_FI_DEV_GPU_UTIL": gpu.util,
                "DCGM_FI_DEV_GPU_TEMP": gpu.temp,
                "DCGM_FI_DEV_POWER_USAGE": 300 + 4 * gpu.util,
                "DCGM_FI_DEV_XID_ERRORS": np.zeros(N),
                "DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS": gpu.remapped,
                "DCGM_FI_DEV_ROW_REMAP_FAILURE": gpu.remap_failure,
            }
            rows.extend(
                (name, labels, values, START, STEP) for name, values in readings.items() if values is not None
            )
    return to_openmetrics(rows)


@dataclass(frozen=True)
class Read:
    frame: SignalFrame
    report: FetchReport

    def per_gpu(self, signal: str) -> dict[str, FloatArray]:
        """`host/gpu` -> the signal's replica row (the replica is the exporter's instance here)."""
        return {
            f"{s.label_map['instance'].split(':')[0]}/{s.label_map['gpu']}": s.values
            for s in self.frame.rows(signal)
            if s.replica is not None
        }


@pytest.fixture(scope="module")
def reads() -> Iterator[dict[str, Read]]:
    require_prometheus_binaries()
    scenarios = _scenarios(np.random.default_rng(7))
    at = START + STEP * (N - 1)
    with (
        TemporaryPrometheus(_series(scenarios), lookback_delta=2 * STEP) as prom,
        PrometheusSource(prom.url, timeout=60) as source,
    ):
        out = {}
        for scenario in scenarios:
            options = QueryOptions(selector=f'scenario="{scenario}"')
            frame, report = fetch_frame(
                source, load_catalog(), options, at=at, lookback=at - START, step=STEP
            )
            out[scenario] = Read(frame, report)
        yield out


# --------------------------------------------------------------------------- the inferred throttle


def _all_zero_every_step(read: Read) -> None:
    """Every GPU's flag and the fleet's are 0 at every step: present, never missing, never 1."""
    assert read.report.statuses["gpu_throttle"].replica_source == "dcgm_sm_clock"
    rows = read.per_gpu("gpu_throttle")
    assert len(rows) == 4, rows.keys()
    for name, values in rows.items():
        assert np.isfinite(values).all(), (name, values)
        assert (values == 0).all(), (name, np.flatnonzero(values))
    fleet = read.frame.fleet("gpu_throttle")
    assert np.isfinite(fleet).all() and (fleet == 0).all()


@pytest.mark.parametrize(("scenario", "gpu"), [("brake", "node-1/0"), ("brake_idle_peers", "node-0/1")])
def test_a_braked_gpu_at_a_normal_temperature_reads_throttled(
    reads: dict[str, Read], scenario: str, gpu: str
) -> None:
    read = reads[scenario]
    assert read.report.statuses["gpu_throttle"].replica_source == "dcgm_sm_clock"
    rows = read.per_gpu("gpu_throttle")
    assert len(rows) == 4, rows.keys()
    braked = rows.pop(f"{scenario}-{gpu}")
    assert np.isfinite(braked).all()
    assert (braked[:EVENT] == 0).all() and (braked[EVENT:] == 1).all(), np.flatnonzero(braked)
    for name, values in rows.items():
        assert np.isfinite(values).all() and (values == 0).all(), name
    fleet = read.frame.fleet("gpu_throttle")
    assert (fleet[:EVENT] == 0).all() and (fleet[EVENT:] == 1).all()
    # a normal temperature: the playbook's other road (>= 87 °C) would not see it
    assert np.nanmax(read.frame.fleet("gpu_temp_celsius")) < 87


@pytest.mark.parametrize("scenario", ["jitter", "idle", "together", "capped", "locked"])
def test_what_is_no_throttle_reads_zero_at_every_step(reads: dict[str, Read], scenario: str) -> None:
    _all_zero_every_step(reads[scenario])


def test_a_blank_clock_is_no_reading(reads: dict[str, Read]) -> None:
    """A GPU whose clock DCGM cannot read is missing from the flag, never flagged or 0; a blank
    step is a missing step, and the hour after it still reads against real clocks."""
    rows = reads["blanks"].per_gpu("gpu_throttle")
    assert set(rows) == {"blanks-node-0/0", "blanks-node-0/1", "blanks-node-1/0"}
    gap = rows["blanks-node-0/1"]
    assert np.isnan(gap[EVENT]) and np.isfinite(np.delete(gap, EVENT)).all()
    assert all((np.nan_to_num(v) == 0).all() for v in rows.values())


def test_the_scenarios_hold_clocks_well_below_their_own_past() -> None:
    """The zeros above are not for want of a low clock: the idle GPU and every slowed one sit
    far below their own past maximum, which only util and the peers' median excuse."""
    gpus = _scenarios(np.random.default_rng(7))
    assert gpus["idle"][1].clock[EVENT:].max() < 0.5 * gpus["idle"][1].clock[:EVENT].max()
    for g in gpus["together"] + gpus["capped"]:
        assert g.clock[EVENT:].max() < 0.8 * g.clock[:EVENT].max()
    assert all(g.util[EVENT:].min() > 50 for g in gpus["capped"])


# --------------------------------------------------------------------------- remapped rows


def test_a_new_uncorrectable_remap_is_an_event(reads: dict[str, Read]) -> None:
    read = reads["remap"]
    assert read.report.statuses["gpu_ecc_errors"].replica_source == "dcgm_remapped_rows"
    assert read.report.statuses["gpu_ecc_errors"].fleet_source == "dcgm_remapped_rows"
    rows = read.per_gpu("gpu_ecc_errors")
    assert set(rows) == {"remap-node-0/0", "remap-node-0/1", "remap-node-1/0", "remap-node-1/1"}
    remapped, failed = rows["remap-node-0/1"], rows["remap-node-1/0"]
    # before the remap, nothing; within the 5m window after it, about one row (increase extrapolates)
    assert (remapped[:EVENT] == 0).all()
    window = remapped[EVENT : EVENT + 10]
    assert np.isfinite(window).all() and (window >= 0.9).all(), window
    # the failed remapping reads 1 all along; the clean GPUs 0
    assert np.isfinite(failed).all() and (failed == 1).all()
    assert (rows["remap-node-0/0"] == 0).all() and (rows["remap-node-1/1"] == 0).all()
    # As the walk's event check reads them: the new remap is new against its own past, the
    # failure held since before the record is background.
    pre, incident = slice(EVENT - 60, EVENT), slice(EVENT, N)
    duty = {name: (float((v[incident] > 0).mean()), float((v[pre] > 0).mean())) for name, v in rows.items()}
    assert new_against_background(*duty["remap-node-0/1"])
    assert not new_against_background(*duty["remap-node-1/0"])
    assert not new_against_background(*duty["remap-node-0/0"])
    fleet = read.frame.fleet("gpu_ecc_errors")
    assert fleet[EVENT - 1] == 1 and fleet[EVENT + 1] >= 1.9  # the held failure, plus the new row
