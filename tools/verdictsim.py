"""A small physical model of an LLM serving fleet, written for the verdict corpus alone.

Why a simulator of its own: the corpus (`tools/generality_verdict.py`) measures the triage's
reasoning, so its data must come neither from the code that reasons nor from the generators
tuned beside it. What is modelled is what a vLLM fleet behind a router physically does, one
sample per scrape interval:

- arrivals are Poisson around the fleet's demand (per tenant where tenants are given, minus
  what the gateway rejects), split over the Ready replicas by the router's weights;
- a replica serves up to its capacity: requests per second at the baseline request mix,
  scaled down by the work per request (prefill of the uncached prompt plus one decode step
  per output token, slower on a slower build) and by its GPU's speed (a throttled GPU);
- what it cannot serve waits: a fluid backlog plus the stochastic queue of a busy server;
  clients give up after their patience; queue time follows from the backlog (Little's law);
- the running batch is throughput times time in decode; KV use is that batch times tokens
  per sequence; near a full cache the scheduler preempts and recomputes, which costs
  capacity; decode slows with the batch, with a slower GPU and with a slower build;
- GPU busy, power and temperature follow the work done;
- whatever a counter or histogram backs (rates, ratios, quantiles, token lengths, hit
  ratios) is read over a trailing 5-minute window as a PromQL `rate` reads it; gauges
  (queue, running, KV, GPU) are instantaneous.

Rows are pods. A row's engine and DCGM series exist while its engine runs (`alive`), its
kube-state-metrics series while its pod exists (`exists`), and it receives traffic while it
is Ready (`ready`). Fleet series (replicas, build_info, gateway, tenants) exist while the
fleet does; `scrape` False is a hole in the recording (Prometheus itself was down).
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import itertools
import zlib
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt
import yaml

Array = npt.NDArray[np.float64]
Mask = npt.NDArray[np.bool_]

SEED = 20_261_014
"""Every case's generator is seeded from this and the case's name, so a rerun writes the same bytes."""
WINDOW_S = 300.0
PREFILL_COST = 0.08
"""GPU time of one uncached prompt token, in units of one decode step of one sequence."""

DECIMALS = {
    "ttft_p99_seconds": 4,
    "ttft_p50_seconds": 4,
    "tpot_p99_seconds": 5,
    "e2e_p99_seconds": 3,
    "request_rate": 4,
    "error_ratio": 5,
    "queue_time_p99_seconds": 4,
    "prefill_time_p99_seconds": 4,
    "prefix_hit_ratio": 4,
    "kv_usage_ratio": 4,
    "preemption_rate": 4,
    "gpu_util_ratio": 3,
    "gpu_temp_celsius": 1,
    "gpu_power_watts": 1,
    "gateway_latency_p99_seconds": 4,
    "upstream_error_ratio": 4,
    "rejected_ratio": 4,
    "truncated_ratio": 4,
}
"""Digits after the point per signal; absent means a whole number (counts, tokens, flags)."""


@dataclass(frozen=True)
class Engine:
    """One replica's physics at the baseline request mix (an 8B model on one H100 by default)."""

    capacity: float = 4.0
    """Requests per second one replica completes at the baseline lengths at full speed."""
    prompt0: float = 1800.0
    output0: float = 600.0
    hit0: float = 0.5
    tpot0: float = 0.022
    """Inter-token latency P99 of an idle replica, seconds."""
    prefill0: float = 0.16
    """Prefill P99 at the baseline prompt and hit ratio, seconds."""
    kv_base: float = 0.35
    """KV use at half the capacity and the baseline lengths; sets the cache size in tokens."""
    tdp: float = 700.0
    tp: int = 1
    patience_s: float = 240.0
    """How long a waiting client stays before it gives up."""


@dataclass(frozen=True)
class Build:
    """The labels of `build_info`: a change of any of them is a release or a config change."""

    model: str
    model_version: str
    engine: str = "vllm"
    engine_version: str = "0.11.0"
    quantization: str = "fp8"
    route: str = "primary"

    def but(self, **changes: str) -> Build:
        return dataclasses.replace(self, **changes)

    def labels(self) -> dict[str, str]:
        return dataclasses.asdict(self)


@dataclass
class Gateway:
    """The router in front of the engines: how much it forwards before queueing, and which
    addresses of pods that are gone it still routes to (address -> first and end step)."""

    capacity: Array
    stale: dict[str, tuple[int, int]] = field(default_factory=dict)


@dataclass(frozen=True)
class Expect:
    """What a replay must conclude; `cause` None leaves the key out (an ambiguous verdict)."""

    verdict: str
    cause: str | None = None
    forbidden: tuple[str, ...] = ()
    not_forbidden: tuple[str, ...] = ()

    def document(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        if self.cause is not None:
            out["cause"] = self.cause
        out["verdict"] = self.verdict
        if self.forbidden:
            out["forbidden"] = list(self.forbidden)
        if self.not_forbidden:
            out["not_forbidden"] = list(self.not_forbidden)
        return out


@dataclass(frozen=True)
class Out:
    """One written series: NaN where there is no sample."""

    metric: str
    labels: tuple[tuple[str, str], ...]
    values: Array

    def selector(self) -> str:
        inner = ",".join(f'{k}="{v}"' for k, v in self.labels)
        return f"{self.metric}{{{inner}}}" if inner else self.metric


@dataclass(frozen=True)
class Case:
    """One fixture, ready to be written."""

    name: str
    klass: str
    description: str
    interval: int
    start: str
    at: str
    symptom: str | None
    alert: dict[str, str] | None
    expect: Expect
    series: tuple[Out, ...]

    def text(self) -> str:
        """The fixture's YAML. The series are written by hand, one selector and one values
        string per item, single-quoted (neither holds a quote); the rest by PyYAML."""
        head: dict[str, Any] = {
            "name": self.name,
            "description": self.description,
            "interval": f"{self.interval}s",
            "start": self.start,
            "at": self.at,
        }
        if self.symptom:
            head["symptom"] = self.symptom
        if self.alert:
            head["alert"] = {"labels": dict(self.alert)}
        lines = [yaml.safe_dump(head, sort_keys=False, width=10**9, allow_unicode=True).rstrip("\n")]
        lines.append("input_series:")
        for s in self.series:
            lines.append(f"  - series: '{s.selector()}'")
            lines.append(f"    values: '{encode(s.values, DECIMALS.get(s.metric, 0))}'")
        lines.append("expect:")
        for key, value in self.expect.document().items():
            lines.append(f"  {key}: [{', '.join(value)}]" if isinstance(value, list) else f"  {key}: {value}")
        return "\n".join(lines) + "\n"


def encode(values: Array, decimals: int) -> str:
    """promtool's expanding notation: runs of one printed value as `axn`, holes as `_xn`.

    Values are printed with `decimals` digits after the point, trailing zeros dropped.
    Trailing holes are left out: the loader pads a shorter series with no-value.
    """
    finite = np.flatnonzero(~np.isnan(values))
    values = np.round(values[: int(finite[-1]) + 1], decimals) + 0.0
    fmt = f"{{:.{decimals}f}}".format
    if decimals:
        texts = ["_" if v != v else fmt(v).rstrip("0").rstrip(".") for v in values.tolist()]
    else:
        texts = ["_" if v != v else fmt(v) for v in values.tolist()]
    texts = ["0" if x == "-0" else x for x in texts]
    items: list[str] = []
    for text, group in itertools.groupby(texts):
        run = sum(1 for _ in group)
        if run == 1:
            items.append(text)
        else:
            items.append(f"_x{run}" if text == "_" else f"{text}x{run - 1}")
    return " ".join(items)


def _rolling_sum(x: Array, width: int) -> Array:
    """Sum over the trailing `width` samples along the last axis (zeros before the start)."""
    c = np.cumsum(x, axis=-1)
    out = c.copy()
    out[..., width:] = c[..., width:] - c[..., :-width]
    return out


def _per_second(window_sum: Array, width: int, interval: float) -> Array:
    """A rate over the trailing window. The recording starts in a running fleet, so the first
    windows are divided by the time they cover, not by a whole window (a pod born inside the
    recording still ramps up: its zeros before birth are real)."""
    covered = np.minimum(np.arange(1, window_sum.shape[-1] + 1), width) * interval
    return window_sum / covered


class Sim:
    """A fleet's inputs over time (arrays a case edits), and `run` to turn them into series."""

    def __init__(
        self,
        name: str,
        *,
        pods: list[str],
        interval: int,
        history_min: int,
        at: str,
        engine: Engine,
        build: Build,
        desired: int | None = None,
    ) -> None:
        self.name, self.pods, self.interval, self.engine = name, pods, interval, engine
        self.history_min = history_min
        self.rng = np.random.default_rng([SEED, zlib.crc32(name.encode())])
        moment = dt.datetime.fromisoformat(at.replace("Z", "+00:00"))
        self.start = (moment - dt.timedelta(minutes=history_min)).strftime("%Y-%m-%dT%H:%M:%SZ")
        T = self.T = history_min * 60 // interval + 1
        R = len(pods)
        self.minutes = (np.arange(T) - (T - 1)) * interval / 60.0
        self.demand: Array = np.ones(T)
        self.tenants: dict[str, Array] = {}
        self.rejected: dict[str, Array] = {}
        self.weight: Array = (1 + self.rng.normal(0, 0.04, (R, 1))) * self.ou((R, T), 0.02, 900)
        self.exists: Mask = np.ones((R, T), bool)
        self.alive: Mask = np.ones((R, T), bool)
        self.ready: Mask = np.ones((R, T), bool)
        self.prompt: Array = np.full(T, engine.prompt0)
        self.output: Array = np.full(T, engine.output0)
        self.hit: Array = np.full((R, T), engine.hit0)
        self.speed: Array = np.ones((R, T))
        self.decode: Array = np.ones((R, T))
        self.throttle: Array = np.zeros((R, T))
        self.temp_extra: Array = np.zeros((R, T))
        self.power_cap: Array = np.full((R, T), engine.tdp)
        self.err_extra: Array = np.zeros((R, T))
        self.restart_events: Array = np.zeros((R, T))
        self.oom: Array = np.zeros((R, T))
        self.ttft_extra: Array = np.zeros((R, T))
        self.truncated: Array | None = None
        self.desired: Array = np.full(T, float(desired if desired is not None else R))
        self.updated: Array | None = None
        self.builds: list[tuple[Build, int, int]] = [(build, 0, T)]
        self.gateway: Gateway | None = None
        self.fleet_alive: Mask = np.ones(T, bool)
        self.scrape: Mask = np.ones(T, bool)
        self.temp_offset: Array = self.rng.normal(0, 2.0, (R, engine.tp))

    # --- time -------------------------------------------------------------------------------

    def i(self, ago_min: float) -> int:
        """The step `ago_min` minutes before `at` (the last sample)."""
        return max(0, self.T - 1 - round(ago_min * 60 / self.interval))

    def steps(self, minutes: float) -> int:
        return max(1, round(minutes * 60 / self.interval))

    def ou(self, shape: tuple[int, ...], sigma: float, tau_s: float) -> Array:
        """A slow multiplicative wander around 1 (Ornstein-Uhlenbeck in log space)."""
        phi = np.exp(-self.interval / tau_s)
        noise = self.rng.normal(0, sigma * np.sqrt(1 - phi**2), shape)
        x = np.zeros(shape)
        x[..., 0] = self.rng.normal(0, sigma, shape[:-1])
        for t in range(1, shape[-1]):
            x[..., t] = phi * x[..., t - 1] + noise[..., t]
        return np.exp(x)

    def wavy(self, level: float, amp: float = 0.04, period_min: float = 110.0) -> Array:
        """A demand that breathes (slow waves and wander) around `level`."""
        phase = self.rng.uniform(0, 2 * np.pi)
        wave = 1 + amp * np.sin(2 * np.pi * self.minutes / period_min + phase)
        return level * wave * self.ou((self.T,), 0.03, 600)

    def ramp(self, ago_min: float, over_min: float) -> Array:
        """0 before `ago_min`, rising linearly to 1 over `over_min` minutes, 1 after."""
        x = (self.minutes + ago_min) / max(over_min, self.interval / 60.0)
        return np.clip(x, 0.0, 1.0)

    def shift(self, arr: Array, ago_min: float, factor: float, over_min: float = 1.0) -> None:
        """Multiply `arr` from `ago_min` on, reaching `factor` after `over_min` minutes."""
        arr *= 1 + (factor - 1) * self.ramp(ago_min, over_min)

    def move_to(self, arr: Array, ago_min: float, value: float, over_min: float = 1.0) -> None:
        """Blend `arr` into `value` from `ago_min` on, over `over_min` minutes."""
        r = self.ramp(ago_min, over_min)
        arr[...] = arr * (1 - r) + value * r

    def periodic(self, every_min: float, lasting_min: float, offset_min: float = 0.0) -> Array:
        """1 during a burst that recurs every `every_min` minutes, else 0."""
        phase = np.mod(self.minutes - offset_min, every_min)
        return (phase < lasting_min).astype(np.float64)

    # --- pods and builds ----------------------------------------------------------------------

    def absent_until(self, row: int, ago_min: float) -> None:
        """The pod does not exist before `ago_min` (created then)."""
        k = self.i(ago_min)
        self.exists[row, :k] = self.alive[row, :k] = self.ready[row, :k] = False

    def kill(self, row: int, ago_min: float) -> None:
        """The pod is gone from `ago_min` on: no engine, no pod series, no traffic."""
        k = self.i(ago_min)
        self.exists[row, k:] = self.alive[row, k:] = self.ready[row, k:] = False

    def restart(self, row: int, ago_min: float, load_min: float, warm_errors: float = 0.0) -> None:
        """The container restarts in place: down while the model loads, then back, erring a
        little while it warms up (first requests hit CUDA-graph capture and time out)."""
        k, back = self.i(ago_min), self.i(ago_min) + self.steps(load_min)
        self.alive[row, k:back] = self.ready[row, k:back] = False
        self.restart_events[row, k] += 1
        self.err_extra[row, back : back + self.steps(4)] += warm_errors

    def release(self, build: Build, from_ago: float, until_ago: float | None) -> None:
        """The new build reports from `from_ago`; the old one stops reporting at `until_ago`
        (None: old pods still run at `at`)."""
        old, first, _ = self.builds[-1]
        self.builds[-1] = (old, first, self.T if until_ago is None else self.i(until_ago))
        self.builds.append((build, self.i(from_ago), self.T))

    def rolling_update(
        self, rows: list[int], start_ago: float, every_min: float, load_min: float, build: Build
    ) -> float:
        """A StatefulSet rolling update: each pod in turn recreated under its own name on the
        new template (one restart each), the next one once the previous is Ready. Returns
        how many minutes before `at` the last pod was Ready again (negative: not yet)."""
        updated = np.zeros(self.T)
        for k, row in enumerate(rows):
            ago = start_ago - k * every_min
            if ago >= 0:
                self.restart(row, ago, load_min, warm_errors=0.03)
                updated += self.minutes >= -ago
        self.updated = np.where(self.minutes < -start_ago, self.desired, updated)
        last_ago = start_ago - (len(rows) - 1) * every_min
        self.release(build, start_ago - load_min, last_ago if last_ago >= 0 else None)
        return last_ago - load_min

    def blink(self, row: int, duty: float) -> None:
        """A healthy GPU brushing its power limit: the throttle flag blinks on about `duty` of
        the samples, in bursts of one or two, all along; clocks dip a few percent only then."""
        starts = self.rng.random(self.T) < duty / 1.5
        flag = starts | np.roll(starts, 1) & (self.rng.random(self.T) < 0.5)
        self.throttle[row] = np.maximum(self.throttle[row], flag)
        self.speed[row] = np.where(flag, self.speed[row] * 0.96, self.speed[row])
        self.temp_extra[row] += 6.0

    # --- the physics --------------------------------------------------------------------------

    def _arrivals(self) -> tuple[Array, Array, list[Out]]:
        """Counts per step admitted to the fleet, the expected admitted rate, and the tenants'
        own series (arrivals at the gateway, and the share it refused)."""
        dt_s, width = float(self.interval), round(WINDOW_S / self.interval)
        if not self.tenants:
            return self.rng.poisson(self.demand * dt_s).astype(np.float64), self.demand, []
        admitted = np.zeros(self.T)
        expected = np.zeros(self.T)
        outs: list[Out] = []
        for tenant, rate in self.tenants.items():
            refused = self.rejected.get(tenant, np.full(self.T, 0.0008))
            counts = self.rng.poisson(rate * dt_s).astype(np.float64)
            rej = self.rng.binomial(counts.astype(np.int64), np.clip(refused, 0, 1)).astype(np.float64)
            admitted += counts - rej
            expected += rate * (1 - refused)
            n = _rolling_sum(counts, width)
            ratio = np.where(n > 0, _rolling_sum(rej, width) / np.maximum(n, 1), np.nan)
            outs.append(Out("request_rate", (("tenant", tenant),), _per_second(n, width, dt_s)))
            outs.append(Out("rejected_ratio", (("tenant", tenant),), ratio))
        return admitted, expected, outs

    def run(self) -> list[Out]:
        """Simulate, then read every series as the exporters and Prometheus would."""
        e, rng, T, R = self.engine, self.rng, self.T, len(self.pods)
        dt_s = float(self.interval)
        counts, expected, tenant_outs = self._arrivals()
        stale_on = np.zeros(T)
        if self.gateway is not None:
            for first, end in self.gateway.stale.values():
                stale_on[first:end] += 1
        n_ready = self.ready.sum(axis=0).astype(np.float64)
        blackhole = np.where(stale_on > 0, stale_on / np.maximum(n_ready + stale_on, 1), 0.0)
        lost = rng.binomial(counts.astype(np.int64), blackhole).astype(np.float64)
        w = self.weight * self.ready
        share = w / np.maximum(w.sum(axis=0), 1e-9)
        arrivals = np.zeros((R, T))
        for t in range(T):
            if share[:, t].sum() > 0.5 and counts[t] - lost[t] > 0:
                arrivals[:, t] = rng.multinomial(int(counts[t] - lost[t]), share[:, t] / share[:, t].sum())
        lam = (expected * (1 - blackhole))[None, :] * share

        uncached = self.prompt[None, :] * (1 - 0.9 * self.hit)
        uncached0 = e.prompt0 * (1 - 0.9 * e.hit0)
        work = uncached * PREFILL_COST + self.output[None, :] * self.decode
        cap = e.capacity * self.speed * (uncached0 * PREFILL_COST + e.output0) / work
        out_mean, tokens = 0.45 * self.output, 0.5 * self.prompt + 0.225 * self.output
        lam0 = 0.5 * e.capacity
        run0 = lam0 * 0.45 * e.output0 * 0.7 * e.tpot0 * (1 + 0.5 * lam0 / e.capacity)
        kv_tokens = run0 * (0.5 * e.prompt0 + 0.225 * e.output0) / e.kv_base

        backlog, stoch, mu_t, util, tpot, running, kv, preempt = (np.zeros((R, T)) for _ in range(8))
        B, pen = np.zeros(R), np.zeros(R)
        for t in range(T):
            mu = cap[:, t] / (1 + pen)
            avail = B + arrivals[:, t]
            served = np.minimum(avail, mu * dt_s)
            B = (avail - served) * (1 - dt_s / e.patience_s)
            B = np.where(self.ready[:, t], B, 0.0)
            thr = served / dt_s
            u = np.where(B > 1, 1.0, np.clip(thr / mu, 0, 1))
            rho = np.clip(lam[:, t] / mu, 0, 0.97)
            tp = e.tpot0 * self.decode[:, t] / self.speed[:, t] * (1 + 0.5 * u)
            demand_kv = thr * out_mean[t] * 0.7 * tp * tokens[t] / kv_tokens
            full = 0.9 + 0.09 * (1 - np.exp(-(demand_kv - 0.9) / 0.08))
            kv[:, t] = np.where(demand_kv < 0.9, demand_kv, full)
            preempt[:, t] = np.maximum(0.0, demand_kv - 0.93) * thr * 2.0
            pen = 1.5 * np.maximum(0.0, demand_kv - 0.95)
            frac = np.clip(preempt[:, t] / np.maximum(thr, 1e-6), 0, 1)
            tpot[:, t] = tp * (1 + 2.5 * frac)
            running[:, t] = (
                thr * out_mean[t] * 0.7 * tpot[:, t] * np.minimum(1, kv[:, t] / demand_kv.clip(1e-9))
            )
            backlog[:, t], stoch[:, t], mu_t[:, t], util[:, t] = B, 0.4 * rho**4 / (1 - rho), mu, u
        return self._read(arrivals, backlog, stoch, mu_t, util, tpot, running, kv, preempt) + tenant_outs

    def _read(
        self,
        arrivals: Array,
        backlog: Array,
        stoch: Array,
        mu: Array,
        util: Array,
        tpot: Array,
        running: Array,
        kv: Array,
        preempt: Array,
    ) -> list[Out]:
        e, rng, R = self.engine, self.rng, len(self.pods)
        width = round(WINDOW_S / self.interval)
        n_win = _rolling_sum(arrivals, width)
        spread = 1 + 3 / np.sqrt(1 + n_win)

        def window(v: Array) -> Array:
            """A histogram's quantile (or a ratio of counters) over the trailing window."""
            return np.where(n_win > 0, _rolling_sum(v * arrivals, width) / np.maximum(n_win, 1e-9), np.nan)

        def noisy(v: Array, sigma: float) -> Array:
            return v * np.exp(rng.normal(0, sigma, v.shape) * spread)

        uncached = self.prompt[None, :] * (1 - 0.9 * self.hit)
        prefill = e.prefill0 * uncached / (e.prompt0 * (1 - 0.9 * e.hit0)) / self.speed * (1 + 0.4 * util)
        qtime = 0.008 + (backlog + 2.3 * stoch) / mu
        ttft = 0.015 + prefill + qtime + self.ttft_extra
        ttft50 = 0.008 + 0.35 * prefill + (0.5 * backlog + 0.3 * stoch) / mu + 0.85 * self.ttft_extra
        out95 = np.broadcast_to(self.output, (R, self.T))
        timeouts = np.clip((backlog / mu - 20) / 100, 0, 0.4)
        p_err = np.clip(0.0012 * np.exp(rng.normal(0, 0.5, arrivals.shape)) + self.err_extra + timeouts, 0, 1)
        errors = rng.binomial(arrivals.astype(np.int64), p_err).astype(np.float64)
        pre_counts = rng.poisson(preempt * self.interval).astype(np.float64)
        restarts = _rolling_sum(self.restart_events, width)
        ttft_w = noisy(window(ttft), 0.05)
        eng = self.alive & self.scrape[None, :]
        pod = self.exists & self.scrape[None, :]
        per_replica: dict[str, tuple[Array, Mask]] = {
            "ttft_p99_seconds": (ttft_w, eng),
            "ttft_p50_seconds": (noisy(window(ttft50), 0.05), eng),
            "tpot_p99_seconds": (noisy(window(tpot), 0.04), eng),
            "e2e_p99_seconds": (noisy(window(ttft + 0.75 * out95 * tpot), 0.04), eng),
            "request_rate": (_per_second(n_win, width, self.interval), eng),
            "error_ratio": (
                np.where(n_win > 0, _rolling_sum(errors, width) / np.maximum(n_win, 1), np.nan),
                eng,
            ),
            "queue_waiting": (rng.poisson(backlog + stoch).astype(np.float64), eng),
            "requests_running": (rng.poisson(running).astype(np.float64), eng),
            "queue_time_p99_seconds": (noisy(window(qtime), 0.06), eng),
            "prefill_time_p99_seconds": (noisy(window(prefill), 0.05), eng),
            "prompt_tokens_p95": (
                np.round(noisy(window(np.broadcast_to(self.prompt, (R, self.T))), 0.03)),
                eng,
            ),
            "output_tokens_p95": (np.round(noisy(window(out95), 0.03)), eng),
            "prefix_hit_ratio": (np.clip(window(self.hit) + rng.normal(0, 0.012, self.hit.shape), 0, 1), eng),
            "kv_usage_ratio": (np.clip(kv * np.exp(rng.normal(0, 0.03, kv.shape)), 0, 0.995), eng),
            "preemption_rate": (_per_second(_rolling_sum(pre_counts, width), width, self.interval), eng),
            "restarts": (restarts, pod),
            "oom_killed": (self.oom, pod),
        }
        outs: list[Out] = []
        for r, name in enumerate(self.pods):
            for metric, (values, mask) in per_replica.items():
                series = np.where(mask[r], values[r], np.nan)
                if not np.isnan(series).all():
                    outs.append(Out(metric, (("instance", name),), series))
            outs.extend(self._gpus(r, name, util[r], eng[r]))
        if self.truncated is not None:
            outs.extend(
                Out("truncated_ratio", (("instance", n),), np.where(eng[r], self.truncated, np.nan))
                for r, n in enumerate(self.pods)
            )
        return outs + self._fleet(ttft_w, errors, n_win)

    def _gpus(self, r: int, name: str, util: Array, mask: Mask) -> list[Out]:
        """DCGM's view of the replica's GPUs; a throttle or heat of the row lands on GPU 0."""
        e, rng, outs = self.engine, self.rng, []
        alpha = self.interval / (180.0 + self.interval)
        for g in range(e.tp):
            hot = 1.0 if g == 0 else 0.0
            busy = np.clip(0.05 + 0.9 * util + rng.normal(0, 0.015, self.T), 0, 1)
            power = 75 + (e.tdp - 75) * 0.9 * busy * (0.85 + 0.15 * self.speed[r])
            power = np.minimum(power, np.where(hot > 0, self.power_cap[r], e.tdp)) * np.exp(
                rng.normal(0, 0.02, self.T)
            )
            target = 30 + 0.062 * power + self.temp_offset[r, g] + hot * self.temp_extra[r]
            temp = np.empty(self.T)
            temp[0] = target[0]
            for t in range(1, self.T):
                temp[t] = temp[t - 1] + alpha * (target[t] - temp[t - 1])
            labels = (("instance", name), ("gpu", str(g)))
            for metric, values in (
                ("gpu_util_ratio", busy),
                ("gpu_temp_celsius", temp + rng.normal(0, 0.3, self.T)),
                ("gpu_power_watts", power),
                ("gpu_throttle", hot * self.throttle[r]),
                ("gpu_xid", np.zeros(self.T)),
            ):
                outs.append(Out(metric, labels, np.where(mask, values, np.nan)))
        return outs

    def _fleet(self, ttft: Array, errors: Array, n_win: Array) -> list[Out]:
        """kube-state-metrics' replica counts, build_info, and the gateway's own view."""
        on = self.fleet_alive & self.scrape
        gone = np.where(on, 1.0, np.nan)
        ready = self.ready.sum(axis=0).astype(np.float64)
        updated = self.updated if self.updated is not None else self.desired
        outs = [
            Out("replicas_desired", (), self.desired * gone),
            Out("replicas_ready", (), ready * gone),
            Out("replicas_updated", (), updated * gone),
        ]
        for build, first, end in self.builds:
            present = np.zeros(self.T, bool)
            present[first:end] = True
            values = np.where(present & on, 1.0, np.nan)
            if not np.isnan(values).all():
                outs.append(Out("build_info", tuple(build.labels().items()), values))
        if self.gateway is None:
            return outs
        rng, width = self.rng, round(WINDOW_S / self.interval)
        demand = np.maximum(self._arrivals_expected(), 1e-3)
        rho = np.clip(demand / self.gateway.capacity, 0, 0.985)
        held = rho**2 / (1 - rho)
        wait = _rolling_sum(held / demand, width) / width
        worst = np.nanmax(np.where(self.alive, ttft, np.nan), axis=0, initial=0.0)
        latency = (worst + 0.012 + 4.6 * wait) * np.exp(rng.normal(0, 0.03, self.T))
        stale_on = np.zeros(self.T)
        for first, end in self.gateway.stale.values():
            stale_on[first:end] += 1
        outs += [
            Out("gateway_latency_p99_seconds", (), latency * gone),
            Out("gateway_queue", (), rng.poisson(held).astype(np.float64) * gone),
            Out("backends_routed", (), (ready + stale_on) * gone),
        ]
        ratio = np.where(n_win > 0, _rolling_sum(errors, width) / np.maximum(n_win, 1), 0.0)
        for r, name in enumerate(self.pods):
            # A backend that goes away fails what it held in flight and the connections the
            # router makes before its endpoints update; its window holds them for 5 minutes.
            aborted = np.zeros(self.T)
            for k in np.flatnonzero(self.alive[r, :-1] & ~self.alive[r, 1:]) + 1:
                aborted[k : k + width] = np.linspace(0.35, 0.05, len(aborted[k : k + width]))
            connect = np.abs(rng.normal(0, 0.0003, self.T))
            present = (self.alive[r] | (aborted > 0)) & self.scrape
            values = np.where(present, np.clip(ratio[r] + connect + aborted, 0, 1), np.nan)
            if not np.isnan(values).all():
                outs.append(Out("upstream_error_ratio", (("instance", name),), values))
        for address, (first, end) in self.gateway.stale.items():
            present = np.zeros(self.T, bool)
            present[first:end] = True
            values = np.clip(0.985 + rng.normal(0, 0.01, self.T), 0, 1)
            outs.append(
                Out("upstream_error_ratio", (("instance", address),), np.where(present & on, values, np.nan))
            )
        return outs

    def _arrivals_expected(self) -> Array:
        if not self.tenants:
            return self.demand
        total = np.zeros(self.T)
        for tenant, rate in self.tenants.items():
            total += rate * (1 - self.rejected.get(tenant, np.full(self.T, 0.0008)))
        return total

    def case(
        self,
        klass: str,
        description: str,
        expect: Expect,
        symptom: str | None = None,
        alert: dict[str, str] | None = None,
    ) -> Case:
        return Case(
            name=self.name,
            klass=klass,
            description=description,
            interval=self.interval,
            start=self.start,
            at=f"{self.history_min}m",
            symptom=symptom,
            alert=alert,
            expect=expect,
            series=tuple(s for s in self.run() if not np.isnan(s.values).all()),
        )
