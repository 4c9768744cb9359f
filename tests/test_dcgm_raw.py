"""DCGM as it really answers, through a real Prometheus: blank values and both host labels.

- DCGM writes a *blank* (DCGM_INT64_NOT_SUPPORTED 9223372036854775794, DCGM_FP64_BLANK
  2**47, DCGM_INT32_BLANK 2147483632 and their neighbours) where it has no reading, and
  dcgm-exporter releases export it as one. Replayed beside real readings, the signals keep
  the real GPUs' values; a GPU that reports only blanks is missing from them, and a signal
  every GPU blanks is missing from the diagnosis, never a 9.2e18 °C maximum or "0 errors".
- dcgm-exporter's HEAD names the node `hostname`, its releases `Hostname`: a fleet whose
  exporter maps no pod is joined to its GPUs through either, and scoped to them alone.

The exposition shape (labels, the last XID with `err_code`/`err_msg`) follows the real
dumps (`shared/real/exposition-dcgm-exporter-datadog-fixture.txt`); the values are ours.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from pathlib import Path

import numpy as np
import pytest
import yaml
from promserver import require_prometheus_binaries

from signals.catalog import Scope, load_catalog
from signals.dcgm import COUNTER_CEILING, DCGM_FP64_BLANK, DCGM_INT32_BLANK, GAUGE_CEILING
from signals.fixture import Fixture, load_fixture
from signals.live import frame_from_results
from signals.prometheus import QueryResult
from signals.rawreplay import replay_raw
from signals.selector import parse_selector
from triage.core.walk import diagnose
from triage.sources import load_graph

ROOT = Path(__file__).resolve().parent.parent
REAL = ROOT.parent / "shared" / "real" / "exposition-dcgm-exporter-datadog-fixture.txt"
STEPS = 40  # 20 minutes at 30 s
INT64_NOT_SUPPORTED = "9223372036854775794"
FP64_NOT_SUPPORTED = repr(DCGM_FP64_BLANK + 2)
INT32_NOT_SUPPORTED = str(DCGM_INT32_BLANK + 2)
GPU_SIGNALS = (
    "gpu_temp_celsius",
    "gpu_power_watts",
    "gpu_util_ratio",
    "gpu_memory_used_ratio",
    "gpu_xid",
    "gpu_throttle",
)


def _series(name: str, labels: Mapping[str, str]) -> str:
    return name + "{" + ",".join(f'{k}="{v}"' for k, v in labels.items()) + "}"


def _write(tmp_path: Path, name: str, series: list[dict[str, str]], **top: object) -> Fixture:
    doc = {
        "name": name,
        "level": "raw",
        "interval": "30s",
        "start": "2026-10-14T13:00:00Z",
        **top,
        "input_series": series,
    }
    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False, width=1 << 30), encoding="utf-8")
    return load_fixture(str(path))


def _dcgm(labels: Mapping[str, str], readings: Mapping[str, str]) -> list[dict[str, str]]:
    """One GPU's DCGM series, as an exporter of released versions writes them (labels in its order)."""
    out = []
    for metric, values in readings.items():
        own = dict(labels)
        if metric == "DCGM_FI_DEV_XID_ERRORS":
            own.update(err_code="0", err_msg="No Error")
        out.append({"series": _series(metric, own), "values": values})
    return out


def _gpu(index: int, host: str = "gpu-node-00", host_label: str = "Hostname", **extra: str) -> dict[str, str]:
    return {
        "gpu": str(index),
        "UUID": f"GPU-{host}-{index:04d}",
        "device": f"nvidia{index}",
        "modelName": "NVIDIA H100 80GB HBM3",
        host_label: host,
        "DCGM_FI_DRIVER_VERSION": "550.127.05",
        "instance": f"{host}:9400",
        "job": "dcgm-exporter",
        **extra,
    }


def _healthy(temp: int, used: int) -> dict[str, str]:
    n = STEPS - 1
    return {
        "DCGM_FI_DEV_GPU_TEMP": f"{temp}x{n}",
        "DCGM_FI_DEV_POWER_USAGE": f"{300 + temp}.5x{n}",
        "DCGM_FI_DEV_GPU_UTIL": f"80x{n}",
        "DCGM_FI_DEV_FB_USED": f"{used}x{n}",
        "DCGM_FI_DEV_FB_FREE": f"{81000 - used}x{n}",
        "DCGM_FI_DEV_XID_ERRORS": f"0x{n}",
        "DCGM_FI_DEV_THERMAL_VIOLATION": f"240000000000x{n}",
        "DCGM_FI_DEV_POWER_VIOLATION": f"610000000000x{n}",
        "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL": f"{INT64_NOT_SUPPORTED}x{n}",  # ECC off: blank on every GPU
    }


def _blank() -> dict[str, str]:
    n = STEPS - 1
    return {
        "DCGM_FI_DEV_GPU_TEMP": f"{INT64_NOT_SUPPORTED}x{n}",
        "DCGM_FI_DEV_POWER_USAGE": f"{FP64_NOT_SUPPORTED}x{n}",
        "DCGM_FI_DEV_GPU_UTIL": f"{INT32_NOT_SUPPORTED}x{n}",
        "DCGM_FI_DEV_FB_USED": f"{INT64_NOT_SUPPORTED}x{n}",
        "DCGM_FI_DEV_FB_FREE": f"{INT64_NOT_SUPPORTED}x{n}",
        "DCGM_FI_DEV_XID_ERRORS": f"{INT64_NOT_SUPPORTED}x{n}",
        "DCGM_FI_DEV_THERMAL_VIOLATION": f"{INT64_NOT_SUPPORTED}x{n}",
        "DCGM_FI_DEV_POWER_VIOLATION": f"{INT64_NOT_SUPPORTED}x{n}",
        "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL": f"{INT64_NOT_SUPPORTED}x{n}",
    }


def _blanks_fixture(tmp_path: Path) -> Fixture:
    one = _healthy(70, 60000)
    # GPU 1 loses one temperature reading and its free memory for a step, mid-window.
    one["DCGM_FI_DEV_GPU_TEMP"] = f"70x18 {INT64_NOT_SUPPORTED} 70x19"
    one["DCGM_FI_DEV_FB_FREE"] = f"21000x18 {INT64_NOT_SUPPORTED} 21000x19"
    series = [
        *_dcgm(_gpu(0), _healthy(60, 40000)),
        *_dcgm(_gpu(1), one),
        *_dcgm(_gpu(2), _blank()),  # a GPU DCGM cannot read: blanks only
    ]
    return _write(tmp_path, "dcgm-blanks", series)


def test_the_catalog_filters_every_dcgm_selector() -> None:
    """Each gauge selector keeps readings below DCGM_INT32_BLANK; each counter is read only over
    windows whose samples all lie below DCGM_FP64_BLANK."""
    gauge, counter = f" < {GAUGE_CEILING})", f" < {COUNTER_CEILING:.0f}"
    checked = 0
    for name, sources in load_catalog().sources.items():
        for source in sources:
            if source.exporter != "gpu":
                continue
            for query in (source.replica, source.fleet):
                assert query is not None
                for found in re.finditer(r"(DCGM_\w+)\{\$sel\}(\[\$window\])?", query):
                    metric, ranged = found.groups()
                    checked += 1
                    if ranged:
                        assert f"max_over_time({metric}{{$sel}}[$window]){counter}" in query, (name, query)
                    else:
                        assert query[found.end() :].startswith(gauge[:-1]), (name, query)
    assert checked > 20


def test_answers_for_dcgm_signals_drop_blanks_and_only_theirs() -> None:
    """The second guard, without a server: a DCGM signal's blank samples are no samples (a
    series left with none is no series); another exporter's large values are left alone."""
    times = np.array([0.0, 30.0, 60.0])
    blank = float(INT64_NOT_SUPPORTED)
    results = {
        "gpu_temp_celsius/replica": QueryResult(
            "q",
            [
                ({"instance": "a", "gpu": "0"}, times, np.array([61.0, blank, 62.0])),
                ({"instance": "a", "gpu": "1"}, times, np.array([blank, blank, blank])),
            ],
        ),
        "gpu_util_ratio/fleet": QueryResult("q", [({}, times, np.array([0.5, blank / 100, 0.5]))]),
        "prompt_tokens_rate/fleet": QueryResult("q", [({}, times, np.array([3e9, 3e9, 3e9]))]),
    }
    scopes = {
        "gpu_temp_celsius/replica": Scope("", "instance", exporter="gpu"),
        "gpu_util_ratio/fleet": Scope("", "instance", exporter="gpu"),
        "prompt_tokens_rate/fleet": Scope("", "instance", exporter="engine"),
    }
    frame, problems = frame_from_results(results, times, 30.0, "instance", "test", scopes)
    assert not problems
    (temp,) = frame.rows("gpu_temp_celsius")
    assert temp.label_map == {"instance": "a", "gpu": "0"}
    assert temp.values[0] == 61 and math.isnan(temp.values[1]) and temp.values[2] == 62
    assert math.isnan(frame.fleet("gpu_util_ratio")[1]) and frame.fleet("gpu_util_ratio")[0] == 0.5
    assert frame.fleet("prompt_tokens_rate").tolist() == [3e9, 3e9, 3e9]


def test_blank_values_are_missing_never_readings(tmp_path: Path) -> None:
    require_prometheus_binaries()
    fixture = _blanks_fixture(tmp_path)
    replayed, report = replay_raw(fixture, load_catalog())
    frame = replayed.frame
    for signal in GPU_SIGNALS:
        rows = frame.rows(signal)
        gpus = sorted({s.label_map.get("gpu") for s in rows if s.replica is not None})
        assert gpus == ["0", "1"], (signal, gpus)  # GPU 2 reports blanks only: missing
        finite = np.concatenate([s.values[np.isfinite(s.values)] for s in rows])
        assert finite.size and finite.max() < 1000, (signal, finite.max())
    last = frame.position(frame.end)
    assert frame.fleet("gpu_temp_celsius")[last] == 70
    assert frame.fleet("gpu_power_watts")[last] == 370.5
    assert frame.fleet("gpu_util_ratio")[last] == pytest.approx(0.8)
    assert frame.fleet("gpu_memory_used_ratio")[last] == pytest.approx((40000 / 81000 + 60000 / 81000) / 2)
    assert frame.fleet("gpu_xid")[last] == 0
    # GPU 1's one blank temperature is one missing step: the fleet's maximum is GPU 0's reading then.
    gap = frame.position(frame.start + 19 * 30)
    one = next(s for s in frame.rows("gpu_temp_celsius") if s.label_map.get("gpu") == "1")
    assert math.isnan(one.values[gap]) and frame.fleet("gpu_temp_celsius")[gap] == 60
    # ECC is blank on every GPU (ECC off): unknown, not "no errors".
    assert not frame.has("gpu_ecc_errors")
    diagnosis = diagnose(load_graph(), frame, "errors", frame.end)
    assert "gpu_ecc_errors" in diagnosis.missing_signals
    assert not {"gpu_temp_celsius", "gpu_xid"} & set(diagnosis.missing_signals)
    assert report.statuses["gpu_ecc_errors"].fleet_source == "dcgm"


def test_the_live_path_drops_blanks_a_user_source_lets_through(tmp_path: Path) -> None:
    """A user's catalog source without the filter: the answers are still checked, the blank
    GPU is missing and the maximum is a real temperature."""
    require_prometheus_binaries()
    user = tmp_path / "catalog.yaml"
    user.write_text(
        yaml.safe_dump(
            {
                "schema_version": 1,
                "signals": {
                    "gpu_temp_celsius": [
                        {
                            "source": "dcgm_unfiltered",
                            "exporter": "gpu",
                            "requires": ["DCGM_FI_DEV_GPU_TEMP"],
                            "replica": "max by ($replica, gpu) (DCGM_FI_DEV_GPU_TEMP{$sel})",
                            "fleet": "max(DCGM_FI_DEV_GPU_TEMP{$sel})",
                        }
                    ]
                },
            }
        ),
        encoding="utf-8",
    )
    replayed, report = replay_raw(_blanks_fixture(tmp_path), load_catalog([str(user)]))
    assert report.statuses["gpu_temp_celsius"].replica_source == "dcgm_unfiltered"
    frame = replayed.frame
    gpus = sorted({s.label_map.get("gpu") for s in frame.rows("gpu_temp_celsius") if s.replica is not None})
    assert gpus == ["0", "1"]
    # The fleet query's own maximum was the blank: dropped, so the fleet view comes from the replicas.
    fleet_rows = [s for s in frame.rows("gpu_temp_celsius") if s.replica is None]
    assert all(not np.isfinite(s.values).any() for s in fleet_rows)
    assert frame.fleet("gpu_temp_celsius")[frame.position(frame.end)] == 70


# ----------------------------------------------------------------------------- host labels

NS, MODEL = "llm", "m-8b"
PODS = {"vllm-8b-7d9f8-a1": "gpu-node-a", "vllm-8b-7d9f8-b2": "gpu-node-b"}
OTHER = {"other-13b-5c4d-c3": "gpu-node-c"}  # another fleet's pod, on its own node


def _cluster(host_labels: Mapping[str, str], uuid: bool = True) -> list[dict[str, str]]:
    """Two fleets; DCGM maps no pod (no Kubernetes pod resources), so GPUs join by node."""
    n = STEPS - 1
    series: list[dict[str, str]] = []
    for i, (pod, node) in enumerate({**PODS, **OTHER}.items()):
        model = MODEL if pod in PODS else "m-13b"
        engine = {"namespace": NS, "model_name": model, "pod": pod, "instance": f"10.0.0.{i}:8000"}
        series.append({"series": _series("vllm:num_requests_running", engine), "values": f"4x{n}"})
        series.append({"series": _series("vllm:request_success_total", engine), "values": f"0+60x{n}"})
        info = {"namespace": NS, "pod": pod, "node": node, "pod_ip": f"10.0.0.{i}"}
        series.append({"series": _series("kube_pod_info", info), "values": f"1x{n}"})
        rs = pod.rsplit("-", 1)[0]
        owner = {"namespace": NS, "pod": pod, "owner_kind": "ReplicaSet", "owner_name": rs}
        series.append({"series": _series("kube_pod_owner", owner), "values": f"1x{n}"})
        rs_owner = {
            "namespace": NS,
            "replicaset": rs,
            "owner_kind": "Deployment",
            "owner_name": rs.rsplit("-", 1)[0],
        }
        rs_series = {"series": _series("kube_replicaset_owner", rs_owner), "values": f"1x{n}"}
        if rs_series not in series:
            series.append(rs_series)
        for index in range(2):
            labels = _gpu(index, node, host_labels.get(node, "Hostname"))
            if not uuid:
                del labels["UUID"]
            temp = 50 + 10 * i + index
            readings = {k: v for k, v in _healthy(temp, 40000).items() if "ECC" not in k}
            series.extend(_dcgm(labels, readings))
    return series


@pytest.mark.parametrize(
    ("host_labels", "uuid"),
    [
        ({"gpu-node-a": "hostname", "gpu-node-b": "hostname", "gpu-node-c": "hostname"}, True),
        ({"gpu-node-a": "hostname", "gpu-node-b": "Hostname", "gpu-node-c": "Hostname"}, True),
        ({"gpu-node-a": "hostname", "gpu-node-b": "hostname", "gpu-node-c": "Hostname"}, False),
    ],
    ids=["HEAD-hostname", "mixed-during-an-upgrade", "hostname-without-UUID"],
)
def test_gpus_joined_by_node_through_either_host_label(
    tmp_path: Path, host_labels: Mapping[str, str], uuid: bool
) -> None:
    require_prometheus_binaries()
    fleet = {"labels": {"namespace": NS, "model_name": MODEL}}
    fixture = _write(tmp_path, "dcgm-hostname", _cluster(host_labels, uuid), fleet=fleet)
    replayed, _ = replay_raw(fixture, load_catalog())
    assert replayed.fleet is not None
    frame = replayed.frame
    for signal in ("gpu_temp_celsius", "gpu_xid", "gpu_memory_used_ratio"):
        seen = {(s.replica, s.label_map.get("gpu")) for s in frame.rows(signal) if s.replica is not None}
        assert seen == {(pod, g) for pod in PODS for g in ("0", "1")}, (signal, seen)
    # Scoped to this fleet: its GPUs read 50-61 °C; the other fleet's, on gpu-node-c, 70-71 °C.
    assert frame.fleet("gpu_temp_celsius")[frame.position(frame.end)] == 61


def test_the_real_label_set_with_the_host_label_lowercased(tmp_path: Path) -> None:
    """The label set of a real dump (a container hostname, driver and process labels), with
    `Hostname` renamed `hostname` as dcgm-exporter's HEAD writes it, and one blank beside it."""
    if not REAL.exists():
        pytest.skip(f"the real DCGM dump is not at {REAL} (the steering repo's shared/real)")
    require_prometheus_binaries()
    line = next(
        line
        for line in REAL.read_text(encoding="utf-8").splitlines()
        if line.startswith("DCGM_FI_DEV_GPU_TEMP{")
    )
    selector, _, value = line.rpartition(" ")
    _, real = parse_selector(selector)
    reading = float(value)
    assert "Hostname" in real
    real["hostname"] = real.pop("Hostname")
    real["instance"] = "10.0.0.9:9400"  # what the scrape adds
    blank = {**real, "gpu": "1", "UUID": real["UUID"] + "-1", "device": "nvidia1"}
    series = [
        {"series": _series("DCGM_FI_DEV_GPU_TEMP", real), "values": f"{reading:g}x{STEPS - 1}"},
        {"series": _series("DCGM_FI_DEV_GPU_TEMP", blank), "values": f"{INT64_NOT_SUPPORTED}x{STEPS - 1}"},
    ]
    replayed, _ = replay_raw(_write(tmp_path, "dcgm-real-labels", series), load_catalog())
    rows = replayed.frame.rows("gpu_temp_celsius")
    assert {s.label_map.get("gpu") for s in rows if s.replica is not None} == {real["gpu"]}
    assert replayed.frame.fleet("gpu_temp_celsius")[-1] == reading
