"""The edge's raw fixtures through a real Prometheus: the edge's sources resolve and read right.

Two raw fixtures hold an edge in front of vLLM, with the label sets a Prometheus Operator
scrape gives every series (tools/rawedge.py): an endpoint picker (Gateway API Inference
Extension) and a vLLM production-stack router. `triage signals check` must resolve the
edge's, the kubelet's and kube-state-metrics' new sources on them, scoped to the fleet
and not; the router's re-export of the engines' queue under the engines' own metric name
must never be added to the engines' own, in either mode; and the endpoint picker's
pre-1.0 metric names must give the same signals as the current ones.

Their expectations (`gateway_bottleneck`, `stale_backend`) are checked with every raw
fixture's in tests/test_raw_fixtures.py.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from promserver import require_prometheus_binaries

from signals.catalog import load_catalog
from signals.fixture import Fixture, load_fixture
from signals.frame import SignalFrame
from signals.live import FetchReport
from signals.rawreplay import replay_raw
from signals.tempprom import TemporaryPrometheus, to_openmetrics
from signals.timeparse import format_instant
from triage.cli.main import main

ROOT = Path(__file__).resolve().parent.parent
EPP = ROOT / "fixtures" / "gateway-bottleneck-epp-vllm-raw.yaml"
ROUTER = ROOT / "fixtures" / "stale-backend-router-vllm-raw.yaml"
CLUSTER = {
    "probe_failures": "kubelet",
    "terminated_error": "kube",
    "exit_code": "kube",
    "replicas_ready": "kube",
    "restarts": "kube",
}
EDGE = {
    EPP: {
        "gateway_latency_p99_seconds": "epp",
        "gateway_queue": "epp",
        "gateway_inflight": "epp",
        "upstream_error_ratio": "epp",
        "backends_routed": "epp",
        "rejected_ratio": "epp",
    },
    ROUTER: {
        "gateway_latency_p99_seconds": "production_stack",
        "gateway_inflight": "production_stack",
        "upstream_error_ratio": "production_stack",
        "backends_routed": "production_stack",
    },
}
Replay = Callable[[Fixture], tuple[Fixture, FetchReport]]


def text_of(fixture: Fixture) -> str:
    frame = fixture.frame
    return to_openmetrics((s.signal, dict(s.labels), s.values, frame.start, frame.step) for s in frame.series)


@pytest.fixture(scope="module")
def replay() -> Replay:
    """Each replay once for the module: scoped to the fixture's fleet, or (`fleet=None`) not."""
    cache: dict[tuple[str, str, bool], tuple[Fixture, FetchReport]] = {}
    catalog = load_catalog()

    def run(fixture: Fixture) -> tuple[Fixture, FetchReport]:
        require_prometheus_binaries()
        key = (fixture.path, fixture.name, fixture.expect is not None)
        if key not in cache:
            cache[key] = replay_raw(fixture, catalog)
        return cache[key]

    return run


def unscoped(fixture: Fixture) -> Fixture:
    return replace(fixture, fleet=None, expect=None)


@pytest.mark.parametrize("path", [EPP, ROUTER], ids=["epp", "router"])
def test_signals_check_resolves_the_edges_sources(path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    require_prometheus_binaries()
    fixture = load_fixture(str(path))
    assert fixture.expect is not None and fixture.expect.fleet is not None
    wanted = {**CLUSTER, **EDGE[path]}
    with TemporaryPrometheus(text_of(fixture)) as prometheus:
        at = format_instant(fixture.frame.end)
        for scope in ([], ["--fleet", fixture.expect.fleet, "--at", at]):
            assert main(["signals", "check", "--prometheus", prometheus.url, "--format", "json", *scope]) == 0
            report = json.loads(capsys.readouterr().out)
            assert report["fleet"] == (fixture.expect.fleet if scope else None)
            for signal, source in wanted.items():
                found = report["signals"][signal]
                assert not found["blind"], (signal, scope, found)
                assert source in (found["replica"], found["fleet"]), (signal, found)
            if path == ROUTER:
                assert report["signals"]["gateway_queue"]["blind"]  # the router holds no queue of its own
                waiting = report["signals"]["queue_waiting"]
                assert waiting["replica"] == waiting["fleet"] == "vllm"


def _engines_own_sum(raw: Fixture, name: str) -> tuple[np.ndarray, np.ndarray]:
    """The sum of the engines' own series of `name` at each step, and the steps where a
    Prometheus instant query must give exactly that (no series missing a scrape or ending)."""
    rows = [s.values for s in raw.frame.series if s.signal == name and "server" not in s.label_map]
    stack = np.vstack(rows)
    present = np.isfinite(stack)
    recent = np.zeros_like(present)
    recent[:, 1:] |= present[:, :-1]
    recent[:, 2:] |= present[:, :-2]
    exact = ~np.any(~present & recent, axis=0)
    return np.nansum(stack, axis=0), exact


@pytest.mark.parametrize("scoped", [True, False], ids=["fleet", "unscoped"])
def test_queue_waiting_is_the_engines_own_never_the_routers_re_export(scoped: bool, replay: Replay) -> None:
    raw = load_fixture(str(ROUTER))
    router = [
        s.values
        for s in raw.frame.series
        if s.signal == "vllm:num_requests_waiting" and "server" in s.label_map
    ]
    assert len(router) == 7 and all(np.nanmax(v) >= 1 for v in router)  # present, and not zeros
    signals, report = replay(raw if scoped else unscoped(raw))
    assert report.statuses["queue_waiting"].fleet_source == "vllm"
    got = signals.frame.fleet("queue_waiting")
    want, exact = _engines_own_sum(raw, "vllm:num_requests_waiting")
    exact &= np.isfinite(got)
    assert exact.sum() > 0.8 * len(got)
    np.testing.assert_allclose(got[exact], want[exact])
    # where the router's copies hold waiting requests, a sum of both would read more
    assert (np.nansum(np.vstack(router), axis=0)[exact] > 0).mean() > 0.9
    running, exact_running = _engines_own_sum(raw, "vllm:num_requests_running")
    exact_running &= np.isfinite(signals.frame.fleet("requests_running"))
    np.testing.assert_allclose(signals.frame.fleet("requests_running")[exact_running], running[exact_running])


def test_the_routers_errors_are_one_backends_and_it_routes_one_more_than_are_ready(replay: Replay) -> None:
    raw = load_fixture(str(ROUTER))
    signals, _ = replay(raw)
    frame, at = signals.frame, signals.at
    i = frame.position(at)
    assert frame.fleet("backends_routed")[i] == frame.fleet("replicas_ready")[i] + 1 == 7
    per_backend = {
        r.label_map["instance"]: float(np.nanmedian(r.values[i - 8 : i + 1]))
        for r in frame.rows("upstream_error_ratio")
        if r.replica
    }
    failing = [name for name, v in per_backend.items() if v > 0.5]
    assert len(failing) == 1 and all(v < 0.01 for n, v in per_backend.items() if n not in failing)
    # scoped to the fleet, each backend goes by its pod's name: the gone one too
    pods = {s.label_map.get("pod") for s in raw.frame.series if s.signal == "kube_pod_info"}
    assert set(per_backend) <= pods


def test_the_endpoint_pickers_pre_1_0_names_give_the_same_signals(tmp_path: Path, replay: Replay) -> None:
    text = EPP.read_text(encoding="utf-8")
    assert "inference_model_" not in text
    old = tmp_path / "epp-pre-1.0.yaml"
    old.write_text(text.replace("inference_objective_", "inference_model_"), encoding="utf-8")
    current, _ = replay(load_fixture(str(EPP)))
    legacy, report = replay(load_fixture(str(old)))
    for signal in (
        "gateway_latency_p99_seconds",
        "gateway_inflight",
        "upstream_error_ratio",
        "rejected_ratio",
        "gateway_queue",
        "backends_routed",
    ):
        assert report.statuses[signal].fleet_source == "epp", signal
        a, b = current.frame.fleet(signal), legacy.frame.fleet(signal)
        assert np.isfinite(a).sum() > 0.8 * len(a), signal
        np.testing.assert_allclose(a, b, equal_nan=True, err_msg=signal)
    assert "inference_model_request_duration_seconds_bucket" in (
        report.statuses["gateway_latency_p99_seconds"].deprecated_in_use
    )


def test_ready_replicas_from_the_endpoints_match_the_workloads(replay: Replay) -> None:
    """Without the workload's series, Endpoints addresses give the ready replicas: scoped to
    the fleet by its pods' IPs."""
    raw = load_fixture(str(ROUTER))
    frame = raw.frame
    kept = [s for s in frame.series if not s.signal.startswith(("kube_deployment_", "kube_statefulset_"))]
    trimmed = replace(raw, name=raw.name + "-no-workload", frame=SignalFrame(frame.times, kept, frame.source))
    with_workload, _ = replay(raw)
    signals, report = replay(trimmed)
    assert report.statuses["replicas_ready"].fleet_source == "kube_endpoints"
    got, want = signals.frame.fleet("replicas_ready"), with_workload.frame.fleet("replicas_ready")
    both = np.isfinite(got) & np.isfinite(want)
    assert both.sum() > 0.8 * len(got)
    # backfilled blocks carry no staleness marker: the gone pod's address is still read for the
    # lookback (two steps) after its series ends
    off = np.flatnonzero(got[both] != want[both])
    assert len(off) <= 2 and np.all(np.diff(off) == 1), off
