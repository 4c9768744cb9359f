"""Every serving stack at once on one real Prometheus: each one's fleet, signals and diagnosis.

The nine raw stack fixtures (fixtures/stack-*-raw.yaml: Ray Serve, Dynamo, KServe, TGI,
trtllm-serve, Triton, vLLM 0.33, SGLang, DCGM's default counters) hold exporter series in
each stack's own shape. Here they are served together by ONE temporary Prometheus (their
series concatenated, each fixture's timestamps shifted to a common start should they
differ), as a Prometheus that scrapes every stack would hold them, and every live command
runs in-process through the CLI entry point against it, per stack:

- `triage fleets` finds each stack's fleet keyed the stack's way (its engine, orchestrator,
  replicas, Dynamo's pools, KServe's revisions, the join that named it), plus the fleets
  beside them (Ray's second application, the second InferenceService on `/mnt/models`, the
  LLMInferenceService), and none named by `/mnt/models`;
- `triage signals check --fleet` leaves none of the stack's core signals blind, and reads
  each from a source of the stack itself: one whose metrics the stack exports, never one
  that exists on the server only because another stack exports it;
- `triage diagnose --fleet` reaches the fixture's expected verdict and cause, forbids what
  it expects forbidden, misses none of the core signals, and names every stand-in it read;
- values that a naive sum double counts are read once (SGLang's queue, Dynamo's rate);
- the Ray Serve fixture alone, on VictoriaMetrics, gives the same fleet and cause.

The expectations come from the fixtures themselves (`expect`, the replica labels of their
engine series) and from what each stack exports (the tables below), never from the
product's answers. Needs `prometheus` and `promtool` (and `victoria-metrics` for its test);
skipped loudly without them, failed under CI=true.
"""

from __future__ import annotations

import io
import json
import re
from collections.abc import Iterator, Mapping
from contextlib import redirect_stderr, redirect_stdout
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from promserver import require_prometheus_binaries
from stackexports import TGI, TRITON, TRTLLM
from vmserver import require_engine, temporary_engine

from signals.catalog import QueryOptions, SourceSpec, load_catalog
from signals.fixture import Fixture, load_fixture
from signals.fleets import discover
from signals.fleets.inventory import fetch_inventory
from signals.fleets.scope import scoped_options
from signals.frame import SignalFrame
from signals.live import fetch_frame
from signals.prometheus import PrometheusSource
from signals.tempprom import OpenMetricsSeries, TemporaryPrometheus, to_openmetrics
from signals.timeparse import format_instant
from signals.vocabulary import REPLICA_LABEL
from triage.cli.common import EXIT_OK
from triage.cli.main import main

ROOT = Path(__file__).resolve().parent.parent
STACK_IDS = ("ray-serve", "dynamo", "kserve", "tgi", "trtllm", "triton", "vllm-033", "sglang", "dcgm")

VLLM_ENGINE = (
    "ttft_p99_seconds",
    "tpot_p99_seconds",
    "e2e_p99_seconds",
    "request_rate",
    "error_ratio",
    "queue_waiting",
    "requests_running",
    "queue_time_p99_seconds",
    "prefix_hit_ratio",
    "kv_usage_ratio",
    "preemption_rate",
    "prompt_tokens_rate",
    "generation_tokens_rate",
)
GATEWAY = ("gateway_latency_p99_seconds", "gateway_queue", "gateway_inflight")
GPU = (
    "gpu_throttle",
    "gpu_ecc_errors",
    "gpu_temp_celsius",
    "gpu_power_watts",
    "gpu_util_ratio",
    "gpu_memory_used_ratio",
    "gpu_xid",
)


@dataclass(frozen=True)
class Stack:
    """What one stack exports: its core signals, and the prefixes of its own catalog sources."""

    core: tuple[str, ...]
    own: tuple[str, ...]
    blind: tuple[str, ...] = ()
    """Signals the stack does not export at all: blind, and rightly so."""
    pinned: Mapping[tuple[str, str], str] = field(default_factory=dict)
    """(signal, view) -> the one source that view must read."""
    stand_ins: Mapping[str, bool] = field(default_factory=dict)
    """Signal read from a stand-in -> whether the diagnosis must show an evidence line of it."""


STACKS: dict[str, Stack] = {
    "ray-serve": Stack(
        (*VLLM_ENGINE, "replicas_ready", "replicas_desired", *GATEWAY),
        ("ray_vllm", "ray_serve", "kube"),
        pinned={("ttft_p99_seconds", "replica"): "ray_vllm", ("gateway_queue", "fleet"): "ray_serve"},
    ),
    "dynamo": Stack(
        (*VLLM_ENGINE, "rejected_ratio", *GATEWAY),
        ("vllm", "dynamo", "kube"),
        pinned={
            ("ttft_p99_seconds", "fleet"): "dynamo_frontend",
            ("request_rate", "fleet"): "dynamo_frontend",
        },
    ),
    "kserve": Stack(VLLM_ENGINE, ("vllm", "kube")),
    "tgi": Stack(
        TGI,
        ("tgi", "kube"),
        blind=("ttft_p99_seconds",),
        pinned={("request_rate", "replica"): "tgi"},
        stand_ins={"tpot_p99_seconds": True},
    ),
    "trtllm": Stack(
        TRTLLM,
        ("trtllm", "kube"),
    ),
    "triton": Stack(
        TRITON,
        ("triton", "kube"),
        stand_ins={"e2e_p99_seconds": False},
    ),
    "vllm-033": Stack(
        (*VLLM_ENGINE, "rejected_ratio", "spec_decode_acceptance_ratio", "engine_asleep"), ("vllm", "kube")
    ),
    "sglang": Stack(
        (
            "ttft_p99_seconds",
            "tpot_p99_seconds",
            "e2e_p99_seconds",
            "request_rate",
            "queue_waiting",
            "requests_running",
            "prefix_hit_ratio",
            "kv_usage_ratio",
        ),
        ("sglang", "kube"),
        pinned={("queue_waiting", "replica"): "sglang"},
    ),
    # The DCGM fixture's fleet is a vLLM Deployment: its engine signals are core as well.
    "dcgm": Stack((*GPU, *VLLM_ENGINE), ("dcgm", "vllm", "kube"), stand_ins={"gpu_throttle": True}),
}


@dataclass(frozen=True)
class Truth:
    """One fleet on the server as its fixture holds it: the marker series each replica exports
    once (those whose labels match every regex of `only`) name its replicas by `replica_label`."""

    name: str
    stack: str
    engine: str
    count: int
    marker: str
    orchestrator: str | None = None
    replica_label: str = "pod"
    keyed_by: tuple[str, ...] = ("kube_pod_owner",)
    """Labels the join that named the fleet must name."""
    only: Mapping[str, str] = field(default_factory=dict)
    pool_label: str = ""
    pools: Mapping[str, str] = field(default_factory=dict)
    """The marker series' values of `pool_label` -> the pool `triage fleets` must name."""
    revision_label: str = ""
    gpus: int = 0


VLLM = "vllm:num_requests_running"


def _ray(app: str, model: str, count: int) -> Truth:
    """A Ray Serve application's fleet: its replicas are the ReplicaIds of its engine series."""
    return Truth(
        f"ray/{model}@RayServe/raycluster-llm/{app}",
        "ray-serve",
        "ray_vllm",
        count,
        "ray_vllm_num_requests_running",
        orchestrator="ray_serve",
        replica_label="ReplicaId",
        keyed_by=("ray_io_cluster", "WorkerId"),
        only={"ReplicaId": f"{app}#.*"},
    )


def _kserve(name: str, count: int, keyed_by: str, only: Mapping[str, str], revision: str = "") -> Truth:
    return Truth(
        name,
        "kserve",
        "vllm",
        count,
        VLLM,
        "kserve",
        keyed_by=(keyed_by,),
        only=only,
        revision_label=revision,
    )


TRUTHS = (
    _ray("llm-app", "meta-llama/Llama-3.1-8B-Instruct", 4),
    _ray("embed-app", "Qwen/Qwen3-Embedding-0.6B", 2),
    Truth(
        "dynamo/Qwen/Qwen3-32B@Dynamo/llm_prod",
        "dynamo",
        "vllm",
        5,
        VLLM,
        "dynamo",
        keyed_by=("dynamo_namespace",),
        pool_label="dynamo_component",
        pools={"prefill": "prefill", "backend": "decode"},
    ),
    _kserve(
        "serving/llama-chat@InferenceService/llama-chat",
        3,
        "serving_kserve_io_inferenceservice",
        {"pod": "llama-chat-.*"},
        "revision_name",
    ),
    _kserve(
        "serving/llama-batch@InferenceService/llama-batch",
        2,
        "serving_kserve_io_inferenceservice",
        {"pod": "llama-batch-.*"},
        "revision_name",
    ),
    _kserve(
        "serving/Qwen/Qwen3-8B@LLMInferenceService/qwen-llmd",
        2,
        "app_kubernetes_io_name",
        {"model_name": "Qwen/Qwen3-8B"},
    ),
    Truth("llm@Deployment/tgi-mistral-7b", "tgi", "tgi", 3, "tgi_queue_size"),
    Truth(
        "llm/meta-llama/Llama-3.1-70B-Instruct@Deployment/trtllm-llama",
        "trtllm",
        "trtllm",
        3,
        "trtllm_num_requests_running",
    ),
    Truth(
        "llm/tensorrt_llm@Deployment/triton-llama",
        "triton",
        "triton",
        4,
        "nv_trt_llm_request_metrics",
        only={"request_type": "active"},
    ),
    Truth("llm/Qwen/Qwen3-8B@Deployment/vllm-qwen", "vllm-033", "vllm", 4, VLLM),
    Truth(
        "llm/meta-llama/Llama-3.1-8B-Instruct@Deployment/sglang-llama",
        "sglang",
        "sglang",
        4,
        "sglang:num_running_reqs",
        only={"tp_rank": "0"},
    ),
    Truth("llm/meta-llama/Llama-3.1-8B-Instruct@Deployment/vllm-llama", "dcgm", "vllm", 6, VLLM, gpus=6),
)
BY_NAME = {t.name: t for t in TRUTHS}


def _sources() -> dict[str, dict[str, SourceSpec]]:
    return {signal: {s.source: s for s in specs} for signal, specs in load_catalog().sources.items()}


SOURCES = _sources()


def triage(*args: str) -> tuple[int, str, str]:
    """One CLI run in-process: exit code, stdout, stderr."""
    out, err = io.StringIO(), io.StringIO()
    with redirect_stdout(out), redirect_stderr(err):
        code = main(list(args))
    return code, out.getvalue(), err.getvalue()


@dataclass
class Placed:
    """One stack's fixture as placed on the shared server (`shift` seconds later than written)."""

    fixture: Fixture
    shift: float

    @property
    def at(self) -> float:
        return self.fixture.at + self.shift

    @property
    def start(self) -> float:
        return self.fixture.frame.start + self.shift

    @property
    def end(self) -> float:
        return self.fixture.frame.end + self.shift

    @property
    def fleet(self) -> str:
        assert self.fixture.expect is not None and self.fixture.expect.fleet is not None
        return self.fixture.expect.fleet

    def metric_names(self) -> set[str]:
        return {s.signal for s in self.fixture.frame.series}

    def rows(self, metric: str, only: Mapping[str, str]) -> list[tuple[dict[str, str], np.ndarray]]:
        """The fixture's series of `metric` whose labels match every regex of `only`."""
        return [
            (s.label_map, s.values)
            for s in self.fixture.frame.series
            if s.signal == metric and all(re.fullmatch(rx, s.label_map.get(k, "")) for k, rx in only.items())
        ]

    def index(self, t: float) -> int:
        return round((t - self.start) / self.fixture.frame.step)

    def series(self) -> Iterator[OpenMetricsSeries]:
        """The fixture's series as placed, for `to_openmetrics`."""
        frame = self.fixture.frame
        return (
            (s.signal, dict(s.labels), s.values, frame.start + self.shift, frame.step) for s in frame.series
        )


def place(fixtures: list[Fixture]) -> dict[str, Placed]:
    """Each fixture shifted so that every one starts when the earliest does."""
    start = min(f.frame.start for f in fixtures)
    return {
        f.name.removeprefix("stack-").removesuffix("-raw"): Placed(f, start - f.frame.start) for f in fixtures
    }


class Live:
    """The shared server, every stack placed on it, and the CLI's answers (each asked once)."""

    def __init__(self, url: str, placed: dict[str, Placed]) -> None:
        self.url = url
        self.placed = placed
        self._answers: dict[tuple[str, ...], tuple[int, str, str]] = {}
        self._frames: dict[str, SignalFrame] = {}

    def run(self, *args: str) -> tuple[int, str, str]:
        if args not in self._answers:
            self._answers[args] = triage(*args, "--prometheus", self.url)
        return self._answers[args]

    def json(self, *args: str) -> Any:
        code, out, err = self.run(*args, "--format", "json")
        assert code == EXIT_OK, err
        return json.loads(out)

    def window(self, stack: str | None = None) -> tuple[str, str]:
        """`--at` and `--lookback` covering one stack's fixture, or all of them."""
        placed = [self.placed[stack]] if stack else list(self.placed.values())
        end, start = max(p.end for p in placed), min(p.start for p in placed)
        return format_instant(end), f"{round(end - start)}s"

    def fleets(self, stack: str | None = None) -> Any:
        at, lookback = self.window(stack)
        return self.json("fleets", "--at", at, "--lookback", lookback)

    def fleets_text(self) -> str:
        at, lookback = self.window()
        code, out, err = self.run("fleets", "--at", at, "--lookback", lookback)
        assert code == EXIT_OK, err
        return out

    def fleet(self, name: str, stack: str | None = None) -> dict[str, Any]:
        names = [f["name"] for f in self.fleets(stack)["fleets"]]
        assert names.count(name) == 1, f"{name} not among {names}"
        entry: dict[str, Any] = self.fleets(stack)["fleets"][names.index(name)]
        return entry

    def check(self, stack: str) -> Any:
        placed = self.placed[stack]
        return self.json("signals", "check", "--fleet", placed.fleet, "--at", format_instant(placed.end))

    def diagnosis(self, stack: str) -> Any:
        placed = self.placed[stack]
        return self.json("diagnose", "--fleet", placed.fleet, "--at", format_instant(placed.at))

    def frame(self, stack: str) -> SignalFrame:
        """The stack's fleet read by `signals.live.fetch_frame`, scoped as a live `--fleet` is,
        up to the fixture's `at`."""
        if stack not in self._frames:
            self._frames[stack] = self._fetch(stack)
        return self._frames[stack]

    def _fetch(self, stack: str) -> SignalFrame:
        placed = self.placed[stack]
        lookback = placed.at - placed.start
        with PrometheusSource(self.url, timeout=60) as source:
            found = discover(fetch_inventory(source, placed.at, lookback))
            options = scoped_options(found.one(placed.fleet, self.url), QueryOptions())
            frame, _ = fetch_frame(
                source,
                load_catalog(),
                options,
                at=placed.at,
                lookback=lookback,
                step=placed.fixture.frame.step,
            )
        return frame


@pytest.fixture(scope="module")
def live() -> Iterator[Live]:
    require_prometheus_binaries()
    paths = [ROOT / "fixtures" / f"stack-{s}-raw.yaml" for s in STACK_IDS]
    placed = place([load_fixture(str(p)) for p in paths])
    assert set(placed) == set(STACK_IDS)
    text = to_openmetrics(s for p in placed.values() for s in p.series())
    step = max(p.fixture.frame.step for p in placed.values())
    with TemporaryPrometheus(text, lookback_delta=2 * step, startup_timeout=120) as server:
        yield Live(server.url, placed)


def expected_replicas(live: Live, truth: Truth) -> dict[str, dict[str, str]]:
    """Replica -> the labels of its marker series, from the fixture."""
    rows = live.placed[truth.stack].rows(truth.marker, truth.only)
    return {labels[truth.replica_label]: labels for labels, _ in rows}


# ------------------------------------------------------------------ triage fleets


def test_the_server_holds_one_fleet_per_stack_and_the_fleets_beside_them(live: Live) -> None:
    names = [f["name"] for f in live.fleets()["fleets"]]
    assert sorted(names) == sorted(BY_NAME)
    assert {p.fleet for p in live.placed.values()} <= set(names)
    assert not [n for n in names if "/mnt/models" in n]


@pytest.mark.parametrize("truth", TRUTHS, ids=[t.name for t in TRUTHS])
def test_each_fleet_is_keyed_the_way_its_stack_keys_it(live: Live, truth: Truth) -> None:
    fleet = live.fleet(truth.name, truth.stack)
    kind, _, workload = truth.name.split("@", 1)[1].partition("/")
    assert (fleet["engine"], fleet["orchestrator"]) == (truth.engine, truth.orchestrator)
    assert fleet["workload"] == {"kind": kind, "name": workload}
    assert fleet["labels"]["namespace"] == re.split("[/@]", truth.name, maxsplit=1)[0]
    assert fleet["replica_label"] == truth.replica_label
    replicas = expected_replicas(live, truth)
    assert len(replicas) == truth.count, "the fixture no longer holds the replicas described"
    assert sorted(fleet["replicas"]) == sorted(replicas)
    joins = fleet["joins"]
    assert joins[0].startswith(f"{kind} {workload} by " if truth.orchestrator else f"{kind}/{workload} by ")
    for label in truth.keyed_by:
        assert label in joins[0], joins
    if truth.pool_label:
        pools = {r: truth.pools[labels[truth.pool_label]] for r, labels in replicas.items()}
        assert fleet["pools"] == pools
        assert set(fleet["pools"].values()) == {"prefill", "decode"}
    if truth.revision_label:
        assert fleet["revisions"] == {r: labels[truth.revision_label] for r, labels in replicas.items()}
    if truth.gpus:
        assert len(fleet["gpus"]) == truth.gpus
        assert {g["replica"] for g in fleet["gpus"]} == set(replicas)
        assert {g["joined_by"] for g in fleet["gpus"]} == {"exported_pod"}


def test_the_kserve_service_mid_rollout_shows_both_revisions(live: Live) -> None:
    revisions = live.fleet("serving/llama-chat@InferenceService/llama-chat", "kserve")["revisions"]
    assert sorted(set(revisions.values())) == ["llama-chat-predictor-00001", "llama-chat-predictor-00002"]


def test_the_text_names_each_fleets_orchestrator_and_its_joins(live: Live) -> None:
    text = live.fleets_text()
    assert text.startswith(f"{len(TRUTHS)} fleets in {live.url}\n")
    blocks = {b.splitlines()[0]: b for b in text.split("\n\n")[1:]}
    for entry in live.fleets()["fleets"]:
        block = blocks[entry["name"]]
        workload = f"{entry['workload']['kind']}/{entry['workload']['name']}"
        assert f"  engine {entry['engine']} · {workload} · replicas by {entry['replica_label']}" in block
        for join in entry["joins"]:
            assert f"  joined:             {join}\n" in block + "\n", (entry["name"], join)
    dynamo = blocks["dynamo/Qwen/Qwen3-32B@Dynamo/llm_prod"]
    assert re.search(r"^  pools: +decode 3 \(.*\) · prefill 2 \(", dynamo, re.MULTILINE), dynamo
    assert "dynamo's own series by dynamo_namespace" in dynamo
    chat = blocks["serving/llama-chat@InferenceService/llama-chat"]
    assert re.search(
        r"^  revisions: +llama-chat-predictor-00001 1 \(.*\) · llama-chat-predictor-00002 2", chat, re.M
    )
    ray = blocks["ray/meta-llama/Llama-3.1-8B-Instruct@RayServe/raycluster-llm/llm-app"]
    assert 'ray_serve\'s own series by ray_io_cluster="raycluster-llm",application="llm-app"' in ray


# ------------------------------------------------------------------ triage signals check


def _not_own(signal: str, view: str, source: str, stack: Stack, names: set[str]) -> str | None:
    """Why `source` is not the stack's own for `signal`, or None when it is."""
    spec = SOURCES[signal].get(source)
    if spec is None:
        return f"{signal}/{view}: source {source} is not in the catalog"
    if not source.startswith(stack.own):
        return f"{signal}/{view}: {source} is another stack's source (own: {', '.join(stack.own)})"
    absent = [n for n in spec.requires if n not in names]
    if spec.requires_any and not any(n in names for n in spec.requires_any):
        absent.append(" or ".join(spec.requires_any))
    if absent:
        return f"{signal}/{view}: {source} reads {', '.join(absent)}, which this stack does not export"
    return None


@pytest.mark.parametrize("stack", STACK_IDS)
def test_signals_check_reads_every_core_signal_from_the_stacks_own_sources(live: Live, stack: str) -> None:
    placed, spec = live.placed[stack], STACKS[stack]
    check = live.check(stack)
    assert check["fleet"] == placed.fleet
    names = placed.metric_names()
    wrong: list[str] = []
    for signal in spec.core:
        entry = check["signals"][signal]
        if entry["blind"]:
            wrong.append(f"{signal}: blind")
            continue
        for view in ("replica", "fleet"):
            if entry[view] is not None:
                why = _not_own(signal, view, entry[view], spec, names)
                wrong += [why] if why else []
    for (signal, view), source in spec.pinned.items():
        if check["signals"][signal][view] != source:
            wrong.append(f"{signal}/{view}: {check['signals'][signal][view]}, not {source}")
    for signal in spec.blind:
        if not check["signals"][signal]["blind"]:
            wrong.append(f"{signal}: not blind, though the stack does not export it")
    assert not wrong, f"{placed.fleet}:\n  " + "\n  ".join(wrong)


@pytest.mark.parametrize("stack", STACK_IDS)
def test_every_core_signal_holds_data_for_its_fleet(live: Live, stack: str) -> None:
    """Not blind in fact: the fleet's own series answer every core signal's scoped queries."""
    frame = live.frame(stack)
    empty = [s for s in STACKS[stack].core if not frame.has(s)]
    assert not empty, f"{live.placed[stack].fleet}: no data for {empty}"
    assert not [s for s in STACKS[stack].blind if frame.has(s)]


# ------------------------------------------------------------------ triage diagnose


def _evidence(diagnosis: Mapping[str, Any]) -> list[dict[str, Any]]:
    return [*diagnosis["symptom_evidence"], *(e for c in diagnosis["causes"] for e in c["evidence"])]


@pytest.mark.parametrize("stack", STACK_IDS)
def test_each_fleet_is_diagnosed_as_its_fixture_expects(live: Live, stack: str) -> None:
    placed = live.placed[stack]
    expect = placed.fixture.expect
    assert expect is not None
    diagnosis = live.diagnosis(stack)
    kind_name = placed.fleet.split("@", 1)[1]
    assert diagnosis["fleet"]["workload"] == kind_name
    causes = [c["cause"] for c in diagnosis["causes"]]
    assert (diagnosis["verdict"], causes[:1]) == (expect.verdict, [expect.cause]), (
        f"{placed.fleet}: {diagnosis['verdict']} {causes}; missing {diagnosis['missing_signals']}"
    )
    forbidden = {f["action"] for f in diagnosis["forbidden"]}
    assert set(expect.forbidden) <= forbidden, sorted(forbidden)


@pytest.mark.parametrize("stack", STACK_IDS)
def test_no_core_signal_is_missing_from_the_diagnosis(live: Live, stack: str) -> None:
    missing = set(live.diagnosis(stack)["missing_signals"]) & set(STACKS[stack].core)
    assert not missing, f"{live.placed[stack].fleet}: {sorted(missing)}"


@pytest.mark.parametrize("stack", STACK_IDS)
def test_evidence_read_from_a_stand_in_says_so(live: Live, stack: str) -> None:
    diagnosis = live.diagnosis(stack)
    read = diagnosis["stand_ins"]
    evidence = _evidence(diagnosis)
    for signal, visible in STACKS[stack].stand_ins.items():
        assert signal in read, f"{signal} not among the stand-ins {sorted(read)}"
        if visible:
            assert [e for e in evidence if e["signal"] == signal], f"no evidence line of {signal}"
    if any(STACKS[stack].stand_ins.values()):
        assert any("read as" in (e.get("note") or "") for e in evidence)
    for line in evidence:
        if line["signal"] in read:
            assert f"read as {read[line['signal']]}" in (line.get("note") or ""), line


# ------------------------------------------------------------------ values a naive sum double counts


def test_sglang_queue_is_the_total_once_per_replica(live: Live) -> None:
    """With priority scheduling the total sits under `priority=""` beside each priority's
    share, and every TP rank repeats it: the queue is that total of one rank, per replica."""
    placed = live.placed["sglang"]
    totals = {
        labels["pod"]: values
        for labels, values in placed.rows("sglang:num_queue_reqs", {"priority": "", "tp_rank": "0"})
    }
    assert len(totals) == 4 and max(float(np.nanmax(v)) for v in totals.values()) > 0
    frame = live.frame("sglang")
    rows = {s.replica: s.values for s in frame.rows("queue_waiting") if s.replica is not None}
    assert set(rows) == set(totals), sorted(rows)
    grid = [(i, placed.index(t)) for i, t in enumerate(frame.times)]
    both = [(i, j) for i, j in grid if 0 <= j < len(placed.fixture.frame.times)]
    assert len(both) > 100 and frame.times[-1] == placed.at and both[-1][0] == len(frame.times) - 1
    got = np.array([[rows[pod][i] for i, _ in both] for pod in sorted(totals)])
    want = np.array([[totals[pod][j] for _, j in both] for pod in sorted(totals)])
    seen = np.isfinite(got) & np.isfinite(want)
    assert seen.sum() > 0.9 * seen.size
    np.testing.assert_allclose(got[seen], want[seen], rtol=1e-6)
    assert frame.fleet("queue_waiting")[-1] == pytest.approx(float(np.nansum(want[:, -1])), rel=1e-6)


def _rate(placed: Placed, metric: str, at: float, window: float = 300.0) -> float:
    """The summed per-second rate of a counter over the window before `at`, from the fixture."""
    times = placed.fixture.frame.times + placed.shift
    inside = (times > at - window) & (times <= at)
    total = 0.0
    for _, values in placed.rows(metric, {}):
        seen = inside & np.isfinite(values)
        t, v = times[seen], values[seen]
        total += float((v[-1] - v[0]) / (t[-1] - t[0]))
    return total


def test_dynamo_request_rate_is_the_frontends_not_the_workers_sum(live: Live) -> None:
    placed = live.placed["dynamo"]
    frontend = _rate(placed, "dynamo_frontend_requests_total", placed.at)
    workers = _rate(placed, "vllm:request_success_total", placed.at)
    assert frontend > 0 and abs(workers - frontend) > 0.25 * frontend, (frontend, workers)
    frame = live.frame("dynamo")
    assert [s for s in frame.rows("request_rate") if REPLICA_LABEL not in s.label_map], "no fleet series"
    assert frame.times[-1] == placed.at
    rate = frame.fleet("request_rate")[-1]
    assert rate == pytest.approx(frontend, rel=0.03), f"{rate} (frontend {frontend}, workers {workers})"


# ------------------------------------------------------------------ VictoriaMetrics


def test_ray_serve_on_victoriametrics_gives_the_same_fleet_and_cause(live: Live) -> None:
    require_engine("victoriametrics")
    placed = live.placed["ray-serve"]
    text = to_openmetrics(placed.series())
    name, expect = placed.fleet, placed.fixture.expect
    assert expect is not None
    at, lookback = format_instant(placed.end), f"{round(placed.end - placed.start)}s"
    step = placed.fixture.frame.step
    with temporary_engine("victoriametrics", text, lookback_delta=2 * step) as server:
        code, out, err = triage(
            "fleets", "--prometheus", server.url, "--at", at, "--lookback", lookback, "--format", "json"
        )
        assert code == EXIT_OK, err
        fleets = {f["name"]: f for f in json.loads(out)["fleets"]}
        args = ["--fleet", name, "--at", format_instant(placed.at), "--format", "json"]
        code, out, err = triage("diagnose", "--prometheus", server.url, *args)
        assert code == EXIT_OK, err
        diagnosis = json.loads(out)
    assert sorted(fleets) == sorted(t.name for t in TRUTHS if t.stack == "ray-serve")
    keys = ("engine", "orchestrator", "workload", "replica_label", "replicas", "workers", "joins")
    on_prometheus = live.fleet(name, "ray-serve")
    assert {k: fleets[name][k] for k in keys} == {k: on_prometheus[k] for k in keys}
    assert (diagnosis["verdict"], diagnosis["causes"][0]["cause"]) == (expect.verdict, expect.cause)
    assert set(expect.forbidden) <= {f["action"] for f in diagnosis["forbidden"]}
