"""`triage audit` on DCGM as installed by default: nodes.dcgm_alerts names the counters to enable.

dcgm-exporter's default counters CSV leaves DCGM_FI_DEV_THERMAL_VIOLATION, POWER_VIOLATION
and ECC_DBE_VOL_TOTAL commented out and has no CLOCKS_EVENT_REASONS line at all. Where the
server has DCGM series without them, the item says exactly which lines to uncomment (and the
one to add), and what a diagnosis reads meanwhile: the stand-ins the catalog resolves to, or
that the signal is blind. It is advice: the item's verdict stays the XID and ECC alerts'.
Unit tests drive the check with metric-name sets; one runs it against a real Prometheus.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import pytest
from promserver import require_prometheus_binaries

from signals.catalog import QueryOptions, load_catalog
from signals.prometheus import PrometheusSource
from signals.tempprom import TemporaryPrometheus, to_openmetrics
from triage.audit.engine import audit
from triage.audit.fetch import run_audit
from triage.audit.model import AuditItem, AuditSettings, Fetched, Sample

START = 1_791_000_000.0
STEP = 60.0
N = 121  # two hours
AT = START + STEP * (N - 1)
SETTINGS = AuditSettings(lookback=2 * 3600.0, step=60.0)
CATALOG = load_catalog()

THERMAL, POWER = "DCGM_FI_DEV_THERMAL_VIOLATION", "DCGM_FI_DEV_POWER_VIOLATION"
ECC_DBE, CLOCK_EVENTS = "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL", "DCGM_FI_DEV_CLOCKS_EVENT_REASONS"
DEFAULT_DCGM = frozenset(
    {
        # what the default CSV exports that the catalog or the audit reads
        "DCGM_FI_DEV_SM_CLOCK",
        "DCGM_FI_DEV_GPU_TEMP",
        "DCGM_FI_DEV_POWER_USAGE",
        "DCGM_FI_DEV_GPU_UTIL",
        "DCGM_FI_DEV_XID_ERRORS",
        "DCGM_FI_DEV_FB_FREE",
        "DCGM_FI_DEV_FB_USED",
        "DCGM_FI_DEV_PCIE_REPLAY_COUNTER",
        "DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS",
        "DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS",
        "DCGM_FI_DEV_ROW_REMAP_FAILURE",
    }
)
ENGINE = frozenset({"vllm:num_requests_running", "vllm:kv_cache_usage_perc"})
GPUS = {
    "dcgm_gpus": [Sample({"Hostname": "n1", "instance": "a"}, 1.0)],
    "gpu_nodes": [Sample({"node": "n1"}, 8.0)],
}
THROTTLE_SAID = (
    "for gpu_throttle, inferred from the SM clock against its own past and its peers "
    "(DCGM's default counters export no throttle reasons)"
)
ECC_SAID = (
    "for gpu_ecc_errors, uncorrectable remapped rows and row-remap failures "
    "(ECC DBE counters are not exported)"
)


def _rules(*alerts: str) -> dict[str, Any]:
    rules = [{"type": "alerting", "name": f"A{i}", "query": q} for i, q in enumerate(alerts)]
    return {"groups": [{"name": "g", "file": "r.yaml", "rules": rules}]}


RULES = _rules("max(DCGM_FI_DEV_XID_ERRORS) > 0", "increase(DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS[5m]) > 0")


def _item(names: frozenset[str], instant: Mapping[str, list[Sample]] = GPUS) -> AuditItem:
    fetched = Fetched(
        "http://prom:9090",
        AT,
        ENGINE | names,
        RULES,
        {"activeTargets": []},
        None,
        instant,
        {},
        SETTINGS.lookback,
    )
    return audit(fetched, CATALOG, QueryOptions(), SETTINGS).by_id("nodes.dcgm_alerts")


def _advice(item: AuditItem) -> list[str]:
    return [line for line in item.evidence.split("; ") if line.startswith(("advisory:", "meanwhile", "gpu_"))]


def test_a_default_install_names_the_lines_to_uncomment_and_what_is_inferred() -> None:
    item = _item(DEFAULT_DCGM)
    assert item.status == "pass", item.evidence  # advice: the XID and ECC alerts are there
    advice, meanwhile = _advice(item)
    assert advice.startswith("advisory: DCGM's default counters leave out")
    assert (
        f"uncomment {THERMAL} and {POWER} (# Errors and violations) and {ECC_DBE} (# ECC) "
        "in its counters CSV (etc/default-counters.csv" in advice
    )
    assert f"add `{CLOCK_EVENTS}, gauge," in advice and "no line of it to uncomment" in advice
    assert meanwhile == f"meanwhile a diagnosis reads stand-ins and says so: {THROTTLE_SAID}, and {ECC_SAID}"


@pytest.mark.parametrize(
    ("enabled", "named", "unnamed", "said"),
    [
        # the violation counters uncommented: the throttle is read for real, only ECC is left
        ({THERMAL, POWER}, [ECC_DBE], [THERMAL, POWER, CLOCK_EVENTS], [ECC_SAID]),
        # the clock event reasons added: the same, by the other real source
        ({CLOCK_EVENTS}, [ECC_DBE], [THERMAL, POWER, CLOCK_EVENTS], [ECC_SAID]),
        # ECC enabled, and one of the two violation counters: only the other one is named
        ({ECC_DBE, THERMAL}, [POWER, CLOCK_EVENTS], [ECC_DBE, THERMAL], [THROTTLE_SAID]),
    ],
)
def test_only_what_is_missing_is_named(
    enabled: set[str], named: list[str], unnamed: list[str], said: list[str]
) -> None:
    item = _item(DEFAULT_DCGM | enabled)
    advice, meanwhile = _advice(item)
    assert all(n in advice for n in named), advice
    assert not [n for n in unnamed if n in advice], advice
    assert meanwhile == f"meanwhile a diagnosis reads stand-ins and says so: {', and '.join(said)}"
    assert item.status == "pass"


def test_every_counter_enabled_is_said_and_nothing_asked() -> None:
    item = _item(DEFAULT_DCGM | {THERMAL, POWER, ECC_DBE})
    assert "DCGM exports the throttle and ECC counters the catalog reads" in item.evidence
    assert "uncomment" not in item.evidence and "stand-in" not in item.evidence


def test_without_the_clock_or_row_remapping_the_signals_are_said_blind() -> None:
    """An older exporter or GPU (no SM clock, no row remapping): nothing to infer from."""
    item = _item(frozenset({"DCGM_FI_DEV_GPU_UTIL", "DCGM_FI_DEV_XID_ERRORS"}))
    advice, blind = _advice(item)
    assert f"uncomment {THERMAL} and {POWER}" in advice and ECC_DBE in advice
    assert blind == "gpu_throttle and gpu_ecc_errors are blind until then"
    assert "DCGM exports no ECC counter" in item.evidence  # the item's own failure stands
    assert item.status == "fail"


def test_no_dcgm_no_advice() -> None:
    item = _item(frozenset(), instant={})
    assert _advice(item) == [] and "uncomment" not in item.evidence


# --------------------------------------------------------------------------- a real Prometheus


def test_the_advice_from_a_real_server_with_the_default_counters() -> None:
    """The metric names come from a real Prometheus over backfilled default-counter series."""
    require_prometheus_binaries()
    labels = {
        "gpu": "0",
        "UUID": "GPU-0000",
        "device": "nvidia0",
        "modelName": "NVIDIA H100 80GB HBM3",
        "Hostname": "gpu-node-00",
        "instance": "gpu-node-00:9400",
        "job": "dcgm-exporter",
        "namespace": "llm",
    }
    readings = {name: np.full(N, 1.0) for name in DEFAULT_DCGM}
    readings["DCGM_FI_DEV_SM_CLOCK"] = np.full(N, 1980.0)
    series = [(name, labels, values, START, STEP) for name, values in sorted(readings.items())]
    with (
        TemporaryPrometheus(to_openmetrics(series)) as prom,
        PrometheusSource(prom.url, timeout=30) as source,
    ):
        report = run_audit(source, load_catalog(), QueryOptions(selector='namespace="llm"'), AT, SETTINGS)
    item = report.by_id("nodes.dcgm_alerts")
    advice, meanwhile = _advice(item)
    assert f"uncomment {THERMAL} and {POWER} (# Errors and violations) and {ECC_DBE} (# ECC)" in advice
    assert THROTTLE_SAID in meanwhile and ECC_SAID in meanwhile
