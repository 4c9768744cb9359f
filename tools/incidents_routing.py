"""Bundled incidents of misrouting: one model's traffic moved onto the wrong pool.

The gateway (here the Gateway API Inference Extension's endpoint picker) counts each
model's requests per target (`inference_objective_request_total{model_name,
target_model_name}`); `route_share_shift` is the largest move of any target's share against
the hour that ended half an hour before. Told twice: as signals, and as the raw series of
the engines, their cluster and the picker (`tools/rawedge.py`), with the picker's request
counter split per target by the shares the incident gives. The confounder is a burst of
requests that keeps every target's share: more traffic, same routing.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from tools.rawedge import EdgeFleet, EdgeSpec
from tools.rawsynth import Array, RawSpec, _fmt_int
from tools.registry import incident, path
from tools.synth import Fleet, write_document

MODEL = "meta-llama/Llama-3.1-8B-Instruct"
LONG_TARGET = "meta-llama/Llama-3.1-8B-Instruct-128k"
SHIFT = "route_share_shift"
REFERENCE_LAG = "32m"
"""The catalog's share shift compares with the hour that ended 30 minutes earlier: before
this much history (and a few samples) it has no reference and gives no value."""


class RoutedEdge(EdgeFleet):
    """An endpoint picker whose requests per model are split over several targets.

    `shares` gives, per target model name, its share of the requests at each step (the
    shares sum to 1); the picker's request counter is written once per target, each
    request drawn to a target by those shares.
    """

    def __init__(self, fleet: Fleet, spec: RawSpec, edge: EdgeSpec, shares: Mapping[str, Array]) -> None:
        super().__init__(fleet, spec, edge)
        self.shares = dict(shares)

    def _epp(self) -> None:
        super()._epp()
        metric = "inference_objective_request_total"
        (key,) = [k for k in self.out.series if k[0] == metric]
        total = self.out.series.pop(key)
        self.out.fmt.pop(key)
        where = self.out.target.pop(key)
        labels = dict(key[1])
        increments = np.diff(total, prepend=total[0])
        left = increments.astype(np.int64)
        names = sorted(self.shares)
        taken = np.zeros(self.n)
        for i, target in enumerate(names):
            share = np.clip(self.shares[target], 0.0, 1.0)
            if i == len(names) - 1:
                drawn = left.astype(float)
            else:
                rest = np.clip(1.0 - taken, 1e-9, None)
                drawn = self.rng.binomial(left, np.clip(share / rest, 0.0, 1.0)).astype(float)
            left = left - drawn.astype(np.int64)
            taken = taken + share
            start = float(np.floor(total[0] * share[0]))
            values = self.counter(drawn, [(0, self.n)], start)
            self.emit(metric, {**labels, "target_model_name": target}, values, _fmt_int, where)


def _shift_signal(f: Fleet, shares: Mapping[str, Array]) -> None:
    """The twin's `route_share_shift`: each target's share over the last 5 minutes against
    its share over the hour that ended 30 minutes earlier, the largest move of any."""
    window, lag, hour = f.idx("5m"), f.idx("30m"), f.idx("60m")
    out = np.full(f.n, np.nan)
    for i in range(f.idx(REFERENCE_LAG), f.n):
        moves = []
        for share in shares.values():
            now = float(np.mean(share[max(0, i - window + 1) : i + 1]))
            ref = share[max(0, i - lag - hour) : i - lag + 1]
            moves.append(abs(now - float(np.mean(ref))))
        out[i] = max(moves)
    f.series[(SHIFT, ())] = np.clip(out, 0.002, None)


def _shares(f: Fleet, onset: str, before: float, after: float, ramp: str = "2m") -> dict[str, Array]:
    """The long-context target's share going from `before` to `after` at `onset`; the base
    model's the rest."""
    long = np.full(f.n, before)
    i0, width = f.idx(onset), max(1, f.idx(ramp))
    weights = np.clip((np.arange(f.n - i0) + 1) / width, 0, 1)
    long[i0:] = before + (after - before) * weights
    return {MODEL: 1.0 - long, LONG_TARGET: long}


def _write_raw(
    f: Fleet, name: str, symptom: str, at: str, expect: dict[str, Any], shares: Mapping[str, Array]
) -> None:
    edge = EdgeSpec(edge="epp")
    raw = RoutedEdge(f, RawSpec(flavour="vllm", deployment=edge.deployment), edge, shares).build()
    description = f"Raw exporter series of the incident '{f.name}': {f.description}"
    raw_expect = {"fleet": f"llm/{MODEL}@Deployment/{edge.deployment}", **expect}
    write_document(path(name), raw.document(name, symptom, at, raw_expect, None, description))


def _pools(f: Fleet, long_pool: list[str], short_pool: list[str]) -> None:
    """Before the incident: the two long-context replicas take 15% of the requests, the six
    short-context ones 85%."""
    for signal in ("request_rate", "prompt_tokens_rate", "generation_tokens_rate"):
        for key in f.keys(signal, long_pool):
            f.series[key] = f.series[key] * 0.6
        for key in f.keys(signal, short_pool):
            f.series[key] = f.series[key] * (0.85 * 8 / 6)


@incident
def misrouting_short_to_long_pool() -> None:
    f = Fleet(
        "misrouting-short-to-long-pool",
        "Eight vLLM replicas behind an endpoint picker: six serve the model's short-context "
        "target, two the long-context one (128k context, a small batch), which takes 15% of the "
        "requests. At minute 80 a change to the objective's target weights sends 60% of the "
        "requests to the long-context target: its two replicas get four times their requests, "
        "queue and answer late, while the short-context replicas idle. The requests arriving "
        "at the picker are as many as before; TTFT P99 is up.",
        replicas=8,
        duration="120m",
        interval="30s",
        seed=261,
        gpu_signals=False,
        fleet_signals=False,
    )
    long_pool, short_pool = f.names[6:], f.names[:6]
    _pools(f, long_pool, short_pool)
    onset = "80m"
    for signal in ("request_rate", "prompt_tokens_rate", "generation_tokens_rate"):
        f.step(signal, onset, factor=4.0, replicas=long_pool, ramp="2m")
        f.step(signal, onset, factor=0.4 / 0.85, replicas=short_pool, ramp="2m")
    f.step("requests_running", onset, to=64, replicas=long_pool, ramp="3m")
    f.step("queue_waiting", "81m", to=24, replicas=long_pool, ramp="4m")
    f.step("kv_usage_ratio", onset, to=0.86, replicas=long_pool, ramp="4m")
    f.step("queue_time_p99_seconds", "81m", factor=20, replicas=long_pool, ramp="4m")
    f.step("ttft_p99_seconds", "81m", factor=6, replicas=long_pool, ramp="4m")
    f.step("ttft_p50_seconds", "81m", factor=3, replicas=long_pool, ramp="4m")
    f.step("tpot_p99_seconds", onset, factor=1.5, replicas=long_pool, ramp="3m")
    f.step("tpot_p50_seconds", onset, factor=1.4, replicas=long_pool, ramp="3m")
    f.step("e2e_p99_seconds", "81m", factor=1.8, replicas=long_pool, ramp="4m")
    f.step("requests_running", onset, factor=0.6, replicas=short_pool, ramp="2m")
    f.step("kv_usage_ratio", onset, factor=0.8, replicas=short_pool, ramp="2m")
    shares = _shares(f, onset, 0.15, 0.6)
    _shift_signal(f, shares)
    expect = {
        "cause": "misrouting",
        "forbidden": ["scale_out", "retune_wrong_pool"],
    }
    f.write(path(f.name), "ttft_slow", at="95m", expect=expect)
    _write_raw(f, f"{f.name}-raw", "ttft_slow", "95m", expect, shares)


@incident
def traffic_burst_shares_steady() -> None:
    f = Fleet(
        "traffic-burst-shares-steady",
        "Eight vLLM replicas behind an endpoint picker with two targets (the model and its "
        "long-context variant). At minute 80 one tenant's batch client starts and the "
        "requests double within three minutes; every target keeps its share of them, so the "
        "routing is unchanged: queues grow on every replica and TTFT P99 rises.",
        replicas=8,
        duration="120m",
        interval="30s",
        seed=262,
        gpu_signals=False,
        fleet_signals=False,
    )
    onset = "80m"
    for signal in ("request_rate", "prompt_tokens_rate", "generation_tokens_rate"):
        f.step(signal, onset, factor=2.1, ramp="3m")
    f.step("requests_running", onset, factor=1.7, ramp="3m")
    f.step("queue_waiting", "81m", to=9, ramp="4m")
    f.step("kv_usage_ratio", onset, to=0.78, ramp="4m")
    f.step("queue_time_p99_seconds", "81m", factor=8, ramp="4m")
    f.step("ttft_p99_seconds", "81m", factor=2.6, ramp="4m")
    f.step("ttft_p50_seconds", "81m", factor=1.8, ramp="4m")
    f.step("tpot_p99_seconds", onset, factor=1.2, ramp="3m")
    f.step("e2e_p99_seconds", "81m", factor=1.4, ramp="4m")
    shares = _shares(f, onset, 0.15, 0.15)
    _shift_signal(f, shares)
    f.write(
        path(f.name),
        "ttft_slow",
        at="95m",
        expect={"cause": "traffic_burst", "forbidden": ["scale_out"]},
    )
