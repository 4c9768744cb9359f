"""Raw exporter series from a synthesised `Fleet`: what vLLM, SGLang, DCGM and
kube-state-metrics would have exposed while the Fleet's signals happened.

`tools.synth.Fleet` holds, per replica, the signal-level story of an incident (request
rate, TTFT P99, KV use, ...). This module plays each replica's exporters forward step by
step and writes their series as Prometheus would have scraped them, in the fixture
format with `level: raw`:

- counters are integrated from rates (`request_rate` split by finish reason from the
  error and truncation shares, token rates, preemptions, prefix-cache tokens), start at
  an uptime's worth of history and reset to zero when the engine comes back from a
  restart (its series were absent for a while);
- gauges are the Fleet's values with the per-scrape noise of `synth.HEALTHY`;
- histograms are cumulative `_bucket{le=...}` counters (plus `_sum`, `_count`) on the
  exporters' real bucket edges (reference/metrics.md 1.3 and 2.2). Each step's
  observations follow a lognormal whose quantiles were fitted so that Prometheus's own
  `histogram_quantile` (linear interpolation within a bucket) returns the Fleet's P50 /
  P99 / P95 target for that step; where a target lies below the first bucket edge (vLLM
  queue and prefill times under 0.3 s) the best the real buckets can say is what comes
  back, as it would from a real server;
- DCGM per GPU (last XID code with its `err_code`/`err_msg` labels, temperature, power,
  framebuffer, utilisation in percent, throttle-duration and ECC counters) and
  kube-state-metrics (deployment replicas, container restarts, last termination reason).

Flavours: `vllm` (V1 names, current releases), `vllm-mixed` (0.9-0.11: old and new names
side by side with the same values, finish reasons stop/length/abort only), `sglang`. A
fleet may mix flavours per replica. The replica's `instance` label is kept on every
engine, DCGM and per-pod kube series so the catalog's `by (instance)` and
`by (instance, gpu)` joins line up, as a relabelling rule would make them in production.

Seeded from the Fleet's seed: the same spec always writes the same file.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from signals.timeparse import parse_instant
from tools.rawlinks import dcgm_links, is_disaggregated, sglang_pd, vllm_pd
from tools.synth import GPU_HEALTHY, HEALTHY, Fleet, fixture_document, write_document

Array = np.ndarray
Key = tuple[str, tuple[tuple[str, str], ...]]

# --- bucket edges ---------------------------------------------------------------------
# vLLM V1, vllm/v1/metrics/buckets.py (reference/metrics.md 1.3)
VLLM_TTFT_BUCKETS = (
    0.001,
    0.005,
    0.01,
    0.02,
    0.04,
    0.06,
    0.08,
    0.1,
    0.25,
    0.5,
    0.75,
    1.0,
    2.5,
    5.0,
    7.5,
    10.0,
    20.0,
    40.0,
    80.0,
    160.0,
    640.0,
    2560.0,
)
VLLM_ITL_BUCKETS = (
    0.01,
    0.025,
    0.05,
    0.075,
    0.1,
    0.15,
    0.2,
    0.3,
    0.4,
    0.5,
    0.75,
    1.0,
    2.5,
    5.0,
    7.5,
    10.0,
    20.0,
    40.0,
    80.0,
)
VLLM_REQUEST_LATENCY_BUCKETS = (
    0.3,
    0.5,
    0.8,
    1.0,
    1.5,
    2.0,
    2.5,
    5.0,
    10.0,
    15.0,
    20.0,
    30.0,
    40.0,
    50.0,
    60.0,
    120.0,
    240.0,
    480.0,
    960.0,
    1920.0,
    7680.0,
)
# SGLang 0.5.x defaults (reference/metrics.md 2.2; sglang metrics collector)
SGLANG_TTFT_BUCKETS = (0.1, 0.2, 0.4, 0.6, 0.8, 1, 2, 4, 6, 8, 10, 20, 40, 60, 80, 100, 200, 400)
SGLANG_ITL_BUCKETS = (
    0.002,
    0.004,
    0.006,
    0.008,
    0.010,
    0.015,
    0.020,
    0.025,
    0.030,
    0.035,
    0.040,
    0.060,
    0.080,
    0.100,
    0.200,
    0.400,
    0.600,
    0.800,
    1.0,
    2.0,
    4.0,
    6.0,
    8.0,
)
SGLANG_E2E_BUCKETS = (
    0.1,
    0.2,
    0.4,
    0.6,
    0.8,
    1,
    2,
    4,
    6,
    8,
    10,
    20,
    40,
    60,
    80,
    100,
    200,
    400,
    600,
    1200,
    1800,
    2400,
)
SGLANG_QUEUE_BUCKETS = (
    0.0,
    0.1,
    0.2,
    0.5,
    1,
    2,
    3,
    4,
    5,
    10,
    15,
    20,
    30,
    40,
    50,
    60,
    70,
    80,
    90,
    100,
    200,
    300,
    400,
    500,
    600,
    700,
    800,
    900,
    1000,
    1200,
    1400,
    1600,
    1800,
    2000,
    2500,
    3000,
)
SGLANG_TOKENS_BUCKETS = (
    100,
    300,
    500,
    700,
    1000,
    1500,
    2000,
    3000,
    4000,
    5000,
    6000,
    7000,
    8000,
    9000,
    10000,
    12000,
    15000,
    20000,
    22000,
    25000,
    30000,
    35000,
    40000,
    66000,
    99000,
    132000,
    300000,
    600000,
    900000,
    1100000,
)

FLAVOURS = ("vllm", "vllm-mixed", "sglang")
VLLM_REASONS = ("stop", "length", "abort", "error", "repetition")
VLLM_MIXED_REASONS = ("stop", "length", "abort")
XID_TEXT = {
    0: "No Error",
    13: "Graphics Engine Exception",
    31: "GPU memory page fault",
    43: "GPU stopped processing",
    48: "Double Bit ECC Error",
    63: "ECC page retirement or row remapping recording event",
    64: "ECC page retirement or row remapper recording failure",
    74: "NVLINK Error",
    79: "GPU has fallen off the bus",
    92: "High single-bit ECC error rate",
    94: "Contained ECC error",
    95: "Uncontained ECC error",
    119: "GSP RPC Timeout",
    120: "GSP Error",
}
STALE = -math.inf
FB_TOTAL_MIB = 81559.0  # H100 80GB HBM3
FB_RESERVED_MIB = 570.0
Z = {0.5: 0.0, 0.95: 1.6448536269514722, 0.99: 2.3263478740408408}


def build_1_2_5_buckets(max_value: int) -> tuple[float, ...]:
    """vLLM's request-token buckets: 1, 2, 5, 10, 20, 50, ... up to max_model_len."""
    out: list[float] = []
    exponent = 0
    while True:
        for mantissa in (1, 2, 5):
            value = mantissa * 10**exponent
            if value > max_value:
                return tuple(out)
            out.append(float(value))
        exponent += 1


# --- histogram fitting ----------------------------------------------------------------
def _erf(x: Array) -> Array:
    """Abramowitz-Stegun 7.1.26 (|error| < 1.5e-7), vectorised."""
    sign = np.sign(x)
    a = np.abs(x)
    t = 1.0 / (1.0 + 0.3275911 * a)
    poly = t * (0.254829592 + t * (-0.284496736 + t * (1.421413741 + t * (-1.453152027 + t * 1.061405429))))
    return np.asarray(sign * (1.0 - poly * np.exp(-a * a)), dtype=float)


def lognormal_cdf(edges: Array, mu: Array, sigma: Array) -> Array:
    """CDF at each edge (columns) for each step's (mu, sigma) (rows)."""
    e = np.asarray(edges, dtype=float)[None, :]
    with np.errstate(divide="ignore"):
        z = (np.log(np.where(e > 0, e, 1e-300)) - mu[:, None]) / (sigma[:, None] * math.sqrt(2))
    cdf = 0.5 * (1.0 + _erf(z))
    return np.where(e > 0, cdf, 0.0)


def histogram_quantile(q: float, edges: Iterable[float], cdf: Array) -> Array:
    """Prometheus's histogram_quantile on per-step cumulative fractions at the finite edges."""
    le = np.asarray(list(edges), dtype=float)
    full = np.concatenate([cdf, np.ones((cdf.shape[0], 1))], axis=1)
    idx = np.argmax(full >= q - 1e-12, axis=1)
    upper = np.where(idx < len(le), le[np.minimum(idx, len(le) - 1)], le[-1])
    lower = np.where(idx > 0, le[np.maximum(idx - 1, 0)], 0.0)
    prev = np.where(idx > 0, full[np.arange(len(idx)), np.maximum(idx - 1, 0)], 0.0)
    here = full[np.arange(len(idx)), idx]
    width = np.where(here - prev > 0, here - prev, 1.0)
    inside = lower + (upper - lower) * (q - prev) / width
    return np.asarray(
        np.where(idx >= len(le), le[-1], np.where((idx == 0) & (le[0] <= 0), le[0], inside)), dtype=float
    )


def _solve_mu(edges: tuple[float, ...], q: float, want: Array, sigma: Array, iterations: int = 60) -> Array:
    """Per element, the mu whose bucketed q-quantile is `want` (bisection: it is monotone in mu)."""
    lo = np.log(want) - 12.0
    hi = np.log(want) + 12.0
    for _ in range(iterations):
        mid = (lo + hi) / 2
        got = histogram_quantile(q, edges, lognormal_cdf(np.asarray(edges), mid, sigma))
        low = got < want
        lo = np.where(low, mid, lo)
        hi = np.where(low, hi, mid)
    return np.asarray((lo + hi) / 2, dtype=float)


def fit_histogram(
    edges: tuple[float, ...], targets: Mapping[float, Array], sigma: float = 0.5, scale: Array | None = None
) -> tuple[Array, Array, Array]:
    """Per step, a lognormal whose bucketed quantiles match `targets` ({q: values}).

    Returns (cdf at the finite edges, mu, sigma). Two targets fix both parameters; one
    fixes the location with `sigma` given. The fit is made on Prometheus's own
    `histogram_quantile` (linear interpolation inside a bucket), so the quantile it
    computes is the target wherever the edges can express it at all; below the first
    edge it is the closest the buckets allow. `scale` (per step, around 1) then
    stretches each step's distribution, for scrape-to-scrape jitter.
    """
    qs = sorted(targets)
    want = np.stack([np.clip(np.asarray(targets[q], dtype=float), 1e-9, None) for q in qs], axis=1)
    rounded = np.array([[float(f"{v:.4g}") for v in row] for row in want])
    uniques, inverse = np.unique(rounded, axis=0, return_inverse=True)
    inverse = np.asarray(inverse).reshape(-1)
    if len(qs) == 1:
        sig = np.full(len(uniques), sigma)
        mu = _solve_mu(edges, qs[0], uniques[:, 0], sig)
    else:
        # pin the upper quantile (the tail the SLOs are written on), then widen or narrow
        # the distribution until the lower one matches; where the edges cannot hold both
        # (a tight distribution inside one wide bucket), the tail stays right. Sigma is
        # kept >= 0.15: a needle-thin distribution next to an edge would make the 5m
        # window's quantile swing with every scrape's jitter.
        qa, qb = qs[0], qs[-1]
        slo = np.full(len(uniques), np.log(0.15))
        shi = np.full(len(uniques), np.log(4.0))
        for _ in range(40):
            smid = np.exp((slo + shi) / 2)
            mu = _solve_mu(edges, qb, uniques[:, -1], smid, iterations=45)
            got = histogram_quantile(qa, edges, lognormal_cdf(np.asarray(edges), mu, smid))
            high = got > uniques[:, 0]
            slo = np.where(high, np.log(smid), slo)
            shi = np.where(high, shi, np.log(smid))
        sig = np.exp((slo + shi) / 2)
        mu = _solve_mu(edges, qb, uniques[:, -1], sig)
    mu_t, sig_t = mu[inverse], sig[inverse]
    if scale is not None:
        mu_t = mu_t + np.log(np.clip(scale, 0.2, 5.0))
    return lognormal_cdf(np.asarray(edges), mu_t, sig_t), mu_t, sig_t


# --- notation -------------------------------------------------------------------------
def _fmt_int(v: float) -> str:
    return str(int(v))


def _fmt_float(v: float) -> str:
    return f"{v:.10g}"


def _fmt_gauge(v: float) -> str:
    return f"{v:.4g}"


def compress_raw(values: Array, fmt: Callable[[float], str]) -> str:
    """promtool notation: constant runs `axn`, integer progressions `a+bxn`, `_`, `stale`."""
    items: list[str] = []
    i, n = 0, len(values)
    texts = [fmt(v) if math.isfinite(v) else "" for v in values]
    while i < n:
        v = values[i]
        if v == STALE:
            items.append("stale")
            i += 1
            continue
        if math.isnan(v):
            j = i + 1
            while j < n and math.isnan(values[j]) and values[j] != STALE:
                j += 1
            items.append("_" if j - i == 1 else f"_x{j - i}")
            i = j
            continue
        j = i + 1
        while j < n and texts[j] == texts[i]:
            j += 1
        if j - i >= 2:
            items.append(f"{texts[i]}x{j - i - 1}")
            i = j
            continue
        # an exact integer progression of at least four samples
        if fmt is _fmt_int and i + 3 < n and all(math.isfinite(values[k]) for k in range(i, i + 4)):
            b = values[i + 1] - values[i]
            j = i + 1
            while j < n and math.isfinite(values[j]) and values[j] - values[j - 1] == b:
                j += 1
            if j - i >= 4 and b > 0:
                items.append(f"{texts[i]}+{int(b)}x{j - i - 1}")
                i = j
                continue
        items.append(texts[i])
        i += 1
    while items and items[-1].startswith("_"):
        items.pop()  # nothing after the end: the loader pads with gaps
    return " ".join(items)


# --- the generator --------------------------------------------------------------------
@dataclass
class RawSpec:
    """What the fleet runs and how it is scraped."""

    flavour: str = "vllm"
    flavours: dict[str, str] = field(default_factory=dict)  # per-replica overrides
    model: str = "meta-llama/Llama-3.1-8B-Instruct"
    max_model_len: int = 131072
    namespace: str = "llm"
    deployment: str = ""
    gpu_model: str = "NVIDIA H100 80GB HBM3"
    driver: str = "550.127.05"
    engine_version: str = ""
    created: bool = True  # prometheus_client's `_created` gauges (vLLM, not multiprocess)
    sglang_tokens_histogram: bool = True  # SGLang --collect-tokens-histogram
    info_series: bool = True  # vllm:cache_config_info, kube_pod_container_info
    scrape_gaps: int = 1  # missed scrapes per target (0..n, seeded)
    restart_resets: bool = True  # counters restart from zero when the engine comes back
    min_restart_gap: int = 2  # absent steps that mean the process restarted


@dataclass(frozen=True)
class _Life:
    """When one scrape target's series exist: presence runs (a new run after a restart)."""

    segments: list[tuple[int, int]]
    mask: Array
    vanished: bool
    uptime: float
    target: str
    created: float | None = None


@dataclass
class _Out:
    series: dict[Key, Array] = field(default_factory=dict)
    fmt: dict[Key, Callable[[float], str]] = field(default_factory=dict)
    target: dict[Key, str] = field(default_factory=dict)


def _labels(**kw: str) -> tuple[tuple[str, str], ...]:
    return tuple(sorted(kw.items()))


def _digest(*parts: str) -> str:
    return hashlib.sha256("/".join(parts).encode()).hexdigest()


class RawFleet:
    """The raw exporter series of a Fleet; `build()` once, then `document()` or `write()`."""

    def __init__(self, fleet: Fleet, spec: RawSpec | None = None) -> None:
        self.f = fleet
        self.spec = spec or RawSpec()
        for name in [self.spec.flavour, *self.spec.flavours.values()]:
            if name not in FLAVOURS:
                raise ValueError(f"unknown flavour {name!r}; known: {', '.join(FLAVOURS)}")
        self.rng = np.random.default_rng(fleet.seed * 7919 + 17)
        self.n = fleet.n
        self.dt = fleet.step_s
        self.t0 = _epoch(fleet.start)
        self.out = _Out()
        self.built = False

    # --- inputs ----------------------------------------------------------------------
    def flavour(self, replica: str) -> str:
        return self.spec.flavours.get(replica, self.spec.flavour)

    def _raw(self, signal: str, replica: str | None, gpu: str | None = None) -> Array | None:
        labels: dict[str, str] = {}
        if replica is not None:
            labels["instance"] = replica
        if gpu is not None:
            labels["gpu"] = gpu
        return self.f.series.get((signal, tuple(sorted(labels.items()))))

    def sig(self, signal: str, replica: str, gpu: str | None = None, default: float = 0.0) -> Array:
        """The Fleet's clean values, holes filled from the neighbours (absence is handled apart)."""
        raw = self._raw(signal, replica, gpu)
        if raw is None:
            return np.full(self.n, default)
        return _fill(raw, default)

    def present(self, signal: str, replica: str, gpu: str | None = None) -> Array:
        raw = self._raw(signal, replica, gpu)
        if raw is None:
            return np.zeros(self.n, dtype=bool)
        return np.asarray(np.isfinite(raw), dtype=bool)

    def noisy(self, values: Array, rel: float) -> Array:
        return values * (1 + self.rng.normal(0, rel, len(values)))

    # --- output ----------------------------------------------------------------------
    def emit(
        self, metric: str, labels: Mapping[str, str], values: Array, fmt: Callable[[float], str], target: str
    ) -> None:
        key = (metric, _labels(**labels))
        if key in self.out.series:
            raise ValueError(f"series emitted twice: {metric}{dict(labels)}")
        self.out.series[key] = np.asarray(values, dtype=float)
        self.out.fmt[key] = fmt
        self.out.target[key] = target

    def history(self, increments: Array, mask: Array, uptime: float) -> float:
        """What a counter had counted before the fixture starts: its early pace times the uptime."""
        first = int(np.flatnonzero(mask)[0]) if mask.any() else 0
        if first > 0:
            return 0.0  # the process started inside the fixture
        return float(np.mean(increments[first : first + 20])) * uptime / self.dt

    def counter(
        self, increments: Array, segments: list[tuple[int, int]], offset: float, integer: bool = True
    ) -> Array:
        """Cumulative values of a counter over its presence segments; a restart begins at zero."""
        out = np.full(self.n, np.nan)
        for k, (i0, i1) in enumerate(segments):
            start = offset if k == 0 and i0 == 0 else 0.0
            if k > 0 and not self.spec.restart_resets:
                start = float(out[segments[k - 1][1] - 1])
            cum = start + np.cumsum(np.concatenate([[0.0], increments[i0 + 1 : i1]]))
            out[i0:i1] = np.floor(cum + 1e-9) if integer else cum
        return out

    # --- presence --------------------------------------------------------------------
    def segments(self, mask: Array) -> list[tuple[int, int]]:
        """Runs of presence; short holes (missed scrapes) do not split a run."""
        runs: list[tuple[int, int]] = []
        i = 0
        while i < self.n:
            if not mask[i]:
                i += 1
                continue
            j = i
            while j < self.n and mask[j]:
                j += 1
            if runs and i - runs[-1][1] < self.spec.min_restart_gap:
                runs[-1] = (runs[-1][0], j)
            else:
                runs.append((i, j))
            i = j
        return runs

    def finish(self, values: Array, mask: Array, vanished: bool) -> Array:
        """Absent steps become gaps, the first one after a run a staleness marker."""
        out = values.copy()
        out[~mask] = np.nan
        edges = np.flatnonzero(mask[:-1] & ~mask[1:]) + 1
        for e in edges:
            if vanished or not mask[e:].any() or (~mask[e : e + self.spec.min_restart_gap]).all():
                out[e] = STALE
        return out

    # --- build -----------------------------------------------------------------------
    def build(self) -> RawFleet:
        if self.built:
            return self
        self.node_of: dict[str, tuple[str, int]] = {}
        for i, name in enumerate(self.f.names):
            self.node_of[name] = (f"gpu-node-{i // 4:02d}", i % 4)
            tp = sum(1 for k in self.f.series if k[0] == "gpu_temp_celsius" and ("instance", name) in k[1])
            if tp > 1:  # a tensor-parallel replica: its GPUs side by side on an 8-GPU node
                self.node_of[name] = (f"gpu-node-{i * tp // 8:02d}", i * tp % 8)
        for name in self.f.names:
            flavour = self.flavour(name)
            if flavour == "sglang":
                self._sglang(name)
            else:
                self._vllm(name, mixed=flavour == "vllm-mixed")
            if self.f.gpu_signals:
                self._dcgm(name)
            if self.f.kube_signals:
                self._kube_pod(name)
        if self.f.kube_signals:
            self._kube_deployment()
        self._scrape_gaps()
        self.built = True
        return self

    def _engine_mask(self, name: str) -> tuple[Array, bool]:
        mask = self.present("kv_usage_ratio", name) | self.present("requests_running", name)
        raw = self._raw("kv_usage_ratio", name)
        vanished = bool(raw is not None and np.isneginf(raw).any())
        return mask, vanished

    def _uptime(self, name: str, what: str) -> float:
        h = int(_digest(self.f.name, name, what)[:8], 16)
        return 3600.0 * (0.5 + (h % 350) / 100.0)  # 30 min .. 4 h

    def _requests(self, name: str, reasons: tuple[str, ...]) -> tuple[Array, dict[str, Array]]:
        """Finished requests per step, and their split by finish reason."""
        rate = np.clip(self.sig("request_rate", name), 0, None)
        n = self.rng.poisson(rate * self.dt).astype(float)
        err = np.clip(self.sig("error_ratio", name), 0, 1)
        trunc = np.clip(self.sig("truncated_ratio", name), 0, 1)
        shares = {"length": trunc}
        if "error" in reasons:
            shares["abort"] = 0.8 * err
            shares["error"] = 0.2 * err
            shares["repetition"] = np.zeros(self.n)
        else:
            shares["abort"] = err
        total = np.clip(sum(shares.values()), 0, 1)
        shares["stop"] = 1 - total
        split: dict[str, Array] = {r: np.zeros(self.n) for r in reasons}
        order = [r for r in reasons if r != "stop"] + ["stop"]
        p = np.stack([shares.get(r, np.zeros(self.n)) for r in order], axis=1)
        p = p / np.clip(p.sum(axis=1, keepdims=True), 1e-12, None)
        for t in range(self.n):
            counts = self.rng.multinomial(int(n[t]), p[t])
            for r, c in zip(order, counts, strict=True):
                split[r][t] = c
        return n, split

    def _tokens(self, name: str, signal: str, n: Array) -> Array:
        rate = np.clip(self.sig(signal, name), 0, None)
        expected = np.clip(self.sig("request_rate", name), 0, None) * self.dt
        scale = np.where(expected > 0, n / np.where(expected > 0, expected, 1), 1.0)
        return np.asarray(np.round(rate * self.dt * scale), dtype=float)

    def _hist(
        self,
        metric: str,
        labels: Mapping[str, str],
        edges: tuple[float, ...],
        targets: Mapping[float, Array],
        counts: Array,
        life: _Life,
        sigma: float = 0.5,
        sums: Array | None = None,
        jitter: float = 0.0,
        scale: Array | None = None,
    ) -> None:
        """A cumulative histogram: `_bucket{le}` per edge and +Inf, `_count`, `_sum` (and `_created`)."""
        segments, mask, vanished, target = life.segments, life.mask, life.vanished, life.target
        uptime, created = life.uptime, life.created
        if scale is None and jitter:
            scale = self.noisy(np.ones(self.n), jitter)
        cdf, mu, sig = fit_histogram(edges, targets, sigma, scale)
        mean = np.exp(mu + sig**2 / 2)
        for k, le in enumerate([*edges, math.inf]):
            frac = cdf[:, k] if k < len(edges) else np.ones(self.n)
            inc = counts * frac
            values = self.counter(inc, segments, self.history(inc, mask, uptime))
            text = "+Inf" if math.isinf(le) else _le(le)
            self.emit(
                f"{metric}_bucket",
                {**labels, "le": text},
                self.finish(values, mask, vanished),
                _fmt_int,
                target,
            )
        values = self.counter(counts, segments, self.history(counts, mask, uptime))
        self.emit(f"{metric}_count", labels, self.finish(values, mask, vanished), _fmt_int, target)
        inc_sum = sums if sums is not None else counts * mean
        values = self.counter(inc_sum, segments, self.history(inc_sum, mask, uptime), integer=False)
        self.emit(f"{metric}_sum", labels, self.finish(values, mask, vanished), _fmt_float, target)
        if created is not None:
            self.emit(
                f"{metric}_created",
                labels,
                self.finish(self._created(segments, created), mask, vanished),
                _fmt_float,
                target,
            )

    def _created(self, segments: list[tuple[int, int]], started: float) -> Array:
        out = np.full(self.n, np.nan)
        for k, (i0, i1) in enumerate(segments):
            out[i0:i1] = started if k == 0 and i0 == 0 else self.t0 + i0 * self.dt - 95.0
        return out

    def _gauge(self, name: str, signal: str, rel: float | None = None) -> Array:
        values = self.sig(signal, name)
        spec = HEALTHY.get(signal) or GPU_HEALTHY.get(signal)
        noise = rel if rel is not None else (spec[1] if spec else 0.03)
        return self.noisy(values, noise)

    def _vllm(self, name: str, mixed: bool) -> None:
        mask, vanished = self._engine_mask(name)
        segments = self.segments(mask)
        target = f"{name}/engine"
        labels = {"model_name": self.spec.model, "engine": "0", "instance": name}
        uptime = self._uptime(name, "engine")
        started = self.t0 - uptime
        created = started if self.spec.created else None

        def counter(metric: str, inc: Array, extra: Mapping[str, str] | None = None) -> None:
            lab = {**labels, **(extra or {})}
            values = self.counter(inc, segments, self.history(inc, mask, uptime))
            self.emit(metric, lab, self.finish(values, mask, vanished), _fmt_int, target)
            if created is not None:
                base = metric.removesuffix("_total")
                self.emit(
                    f"{base}_created",
                    lab,
                    self.finish(self._created(segments, created), mask, vanished),
                    _fmt_float,
                    target,
                )

        def gauge(metric: str, values: Array, fmt: Callable[[float], str] = _fmt_gauge) -> None:
            self.emit(metric, labels, self.finish(values, mask, vanished), fmt, target)

        reasons = VLLM_MIXED_REASONS if mixed else VLLM_REASONS
        n, split = self._requests(name, reasons)
        for reason in reasons:
            counter("vllm:request_success_total", split[reason], {"finished_reason": reason})
        prompt = self._tokens(name, "prompt_tokens_rate", n)
        gen = self._tokens(name, "generation_tokens_rate", n)
        counter("vllm:prompt_tokens_total", prompt)
        counter("vllm:generation_tokens_total", gen)
        preempt = self.rng.poisson(np.clip(self.sig("preemption_rate", name), 0, None) * self.dt).astype(
            float
        )
        counter("vllm:num_preemptions_total", preempt)
        hit = np.clip(self.noisy(self.sig("prefix_hit_ratio", name), 0.02), 0, 1)
        hits = np.floor(prompt * hit)
        counter("vllm:prefix_cache_queries_total", prompt)
        counter("vllm:prefix_cache_hits_total", hits)
        if mixed:
            counter("vllm:gpu_prefix_cache_queries_total", prompt)
            counter("vllm:gpu_prefix_cache_hits_total", hits)

        gauge(
            "vllm:num_requests_running",
            self.rng.poisson(np.clip(self.sig("requests_running", name), 0, None)).astype(float),
            _fmt_int,
        )
        waiting = self.rng.poisson(np.clip(self.sig("queue_waiting", name), 0, None)).astype(float)
        if self._raw("queue_deferred", name) is not None and not mixed:
            # vLLM >= 0.24: the waiting gauge counts capacity + deferred, split by reason beside it
            deferred = self.rng.poisson(np.clip(self.sig("queue_deferred", name), 0, None)).astype(float)
            for reason, values in (("capacity", waiting), ("deferred", deferred)):
                self.emit(
                    "vllm:num_requests_waiting_by_reason",
                    {**labels, "reason": reason},
                    self.finish(values, mask, vanished),
                    _fmt_int,
                    target,
                )
            waiting = waiting + deferred
        gauge("vllm:num_requests_waiting", waiting, _fmt_int)
        if is_disaggregated(self, name):
            vllm_pd(self, name, labels, mask, vanished, target)
        kv = np.clip(self._gauge(name, "kv_usage_ratio"), 0, 1)
        gauge("vllm:kv_cache_usage_perc", kv)
        if mixed:
            gauge("vllm:gpu_cache_usage_perc", kv)

        hist = _Life(segments, mask, vanished, uptime, target, created)
        self._hist(
            "vllm:time_to_first_token_seconds",
            labels,
            VLLM_TTFT_BUCKETS,
            {0.5: self.sig("ttft_p50_seconds", name), 0.99: self.sig("ttft_p99_seconds", name)},
            n,
            jitter=0.05,
            life=hist,
        )
        itl_count = np.clip(gen - n, 0, None)
        itl_targets = {0.5: self.sig("tpot_p50_seconds", name), 0.99: self.sig("tpot_p99_seconds", name)}
        itl_scale = self.noisy(np.ones(self.n), 0.03)
        self._hist(
            "vllm:inter_token_latency_seconds",
            labels,
            VLLM_ITL_BUCKETS,
            itl_targets,
            itl_count,
            scale=itl_scale,
            life=hist,
        )
        if mixed:  # 0.9-0.11 observe the same per-token intervals under both names
            self._hist(
                "vllm:time_per_output_token_seconds",
                labels,
                VLLM_ITL_BUCKETS,
                itl_targets,
                itl_count,
                scale=itl_scale,
                life=hist,
            )
        self._hist(
            "vllm:e2e_request_latency_seconds",
            labels,
            VLLM_REQUEST_LATENCY_BUCKETS,
            {0.99: self.sig("e2e_p99_seconds", name)},
            n,
            sigma=0.45,
            jitter=0.05,
            life=hist,
        )
        self._hist(
            "vllm:request_queue_time_seconds",
            labels,
            VLLM_REQUEST_LATENCY_BUCKETS,
            {0.99: self.sig("queue_time_p99_seconds", name)},
            n,
            sigma=1.0,
            jitter=0.08,
            life=hist,
        )
        self._hist(
            "vllm:request_prefill_time_seconds",
            labels,
            VLLM_REQUEST_LATENCY_BUCKETS,
            {0.99: self.sig("prefill_time_p99_seconds", name)},
            n,
            sigma=0.5,
            jitter=0.05,
            life=hist,
        )
        token_edges = build_1_2_5_buckets(self.spec.max_model_len)
        self._hist(
            "vllm:request_prompt_tokens",
            labels,
            token_edges,
            {0.95: self.sig("prompt_tokens_p95", name)},
            n,
            sigma=0.3,
            sums=prompt,
            jitter=0.03,
            life=hist,
        )
        self._hist(
            "vllm:request_generation_tokens",
            labels,
            token_edges,
            {0.95: self.sig("output_tokens_p95", name)},
            n,
            sigma=0.35,
            sums=gen,
            jitter=0.03,
            life=hist,
        )

        if self.spec.info_series:
            info = {
                "block_size": "16",
                "cache_dtype": "fp8" if not mixed else "auto",
                "enable_prefix_caching": "True",
                "gpu_memory_utilization": "0.9",
                "num_gpu_blocks": "31440",
                "num_cpu_blocks": "0",
                "prefix_caching_hash_algo": "sha256",
                "sliding_window": "None",
                "swap_space": "4",
                "engine": "0",
                "instance": name,
            }
            self.emit(
                "vllm:cache_config_info", info, self.finish(np.ones(self.n), mask, vanished), _fmt_int, target
            )

    def _sglang(self, name: str) -> None:
        mask, vanished = self._engine_mask(name)
        segments = self.segments(mask)
        target = f"{name}/engine"
        mode = "decode" if is_disaggregated(self, name) else "unified"
        sched = {
            "model_name": self.spec.model,
            "engine_type": mode,
            "tp_rank": "0",
            "pp_rank": "0",
            "moe_ep_rank": "0",
            "instance": name,
        }
        tok = {"model_name": self.spec.model, "engine_type": mode, "instance": name}
        stream = {**tok, "is_streaming": "true"}
        uptime = self._uptime(name, "engine")

        def counter(metric: str, labels: Mapping[str, str], inc: Array) -> None:
            values = self.counter(inc, segments, self.history(inc, mask, uptime))
            self.emit(metric, labels, self.finish(values, mask, vanished), _fmt_int, target)

        def gauge(metric: str, values: Array, fmt: Callable[[float], str] = _fmt_gauge) -> None:
            self.emit(metric, sched, self.finish(values, mask, vanished), fmt, target)

        n, split = self._requests(name, ("stop", "length", "abort"))
        counter("sglang:num_requests_total", stream, n)
        counter("sglang:num_aborted_requests_total", tok, split["abort"])
        prompt = self._tokens(name, "prompt_tokens_rate", n)
        gen = self._tokens(name, "generation_tokens_rate", n)
        counter("sglang:prompt_tokens_total", stream, prompt)
        counter("sglang:generation_tokens_total", stream, gen)
        hit = np.clip(self.noisy(self.sig("prefix_hit_ratio", name), 0.04), 0, 1)
        counter("sglang:cached_tokens_total", {**tok, "cache_source": "device"}, np.floor(prompt * hit))
        retract = self.rng.poisson(np.clip(self.sig("preemption_rate", name), 0, None) * self.dt).astype(
            float
        )
        counter("sglang:num_retracted_requests_total", sched, retract)

        running = self.rng.poisson(np.clip(self.sig("requests_running", name), 0, None)).astype(float)
        gauge("sglang:num_running_reqs", running, _fmt_int)
        gauge(
            "sglang:num_queue_reqs",
            self.rng.poisson(np.clip(self.sig("queue_waiting", name), 0, None)).astype(float),
            _fmt_int,
        )
        usage = np.clip(self._gauge(name, "kv_usage_ratio"), 0, 1)
        gauge("sglang:token_usage", usage)
        max_tokens = 1_031_424
        gauge("sglang:max_total_num_tokens", np.full(self.n, float(max_tokens)), _fmt_int)
        gauge("sglang:num_used_tokens", np.round(usage * max_tokens), _fmt_int)
        gauge("sglang:cache_hit_rate", hit)
        gauge("sglang:gen_throughput", np.clip(self._gauge(name, "generation_tokens_rate"), 0, None))
        gauge("sglang:num_retracted_reqs", np.minimum(retract, running), _fmt_int)

        hist = _Life(segments, mask, vanished, uptime, target)
        if mode == "decode":
            sglang_pd(self, name, sched, counter, gauge, n, hist)
        self._hist(
            "sglang:time_to_first_token_seconds",
            stream,
            SGLANG_TTFT_BUCKETS,
            {0.5: self.sig("ttft_p50_seconds", name), 0.99: self.sig("ttft_p99_seconds", name)},
            n,
            jitter=0.05,
            life=hist,
        )
        itl_count = np.clip(gen - n, 0, None)
        self._hist(
            "sglang:inter_token_latency_seconds",
            tok,
            SGLANG_ITL_BUCKETS,
            {0.5: self.sig("tpot_p50_seconds", name), 0.99: self.sig("tpot_p99_seconds", name)},
            itl_count,
            jitter=0.03,
            life=hist,
        )
        self._hist(
            "sglang:e2e_request_latency_seconds",
            stream,
            SGLANG_E2E_BUCKETS,
            {0.99: self.sig("e2e_p99_seconds", name)},
            n,
            sigma=0.45,
            jitter=0.05,
            life=hist,
        )
        self._hist(
            "sglang:queue_time_seconds",
            sched,
            SGLANG_QUEUE_BUCKETS,
            {0.99: self.sig("queue_time_p99_seconds", name)},
            n,
            sigma=1.0,
            jitter=0.08,
            life=hist,
        )
        if self.spec.sglang_tokens_histogram:
            self._hist(
                "sglang:prompt_tokens_histogram",
                tok,
                SGLANG_TOKENS_BUCKETS,
                {0.95: self.sig("prompt_tokens_p95", name)},
                n,
                sigma=0.3,
                sums=prompt,
                jitter=0.03,
                life=hist,
            )
            self._hist(
                "sglang:generation_tokens_histogram",
                tok,
                SGLANG_TOKENS_BUCKETS,
                {0.95: self.sig("output_tokens_p95", name)},
                n,
                sigma=0.35,
                sums=gen,
                jitter=0.03,
                life=hist,
            )

    def _dcgm(self, name: str) -> None:
        node, slot = self.node_of[name]
        gpus = sorted(
            {
                dict(k[1])["gpu"]
                for k in self.f.series
                if k[0] == "gpu_temp_celsius" and dict(k[1]).get("instance") == name
            }
        )
        target = f"{node}/dcgm"
        for g in gpus:
            index = slot + int(g)
            mask = self.present("gpu_temp_celsius", name, g)
            raw = self._raw("gpu_temp_celsius", name, g)
            vanished = bool(raw is not None and np.isneginf(raw).any())
            uuid = _digest("gpu", node, str(index))
            labels = {
                "gpu": str(index),
                "UUID": f"GPU-{uuid[:8]}-{uuid[8:12]}-{uuid[12:16]}-{uuid[16:20]}-{uuid[20:32]}",
                "pci_bus_id": f"00000000:{0x18 + 0x10 * index:02X}:00.0",
                "device": f"nvidia{index}",
                "modelName": self.spec.gpu_model,
                "Hostname": node,
                "DCGM_FI_DRIVER_VERSION": self.spec.driver,
                "namespace": self.spec.namespace,
                "pod": self.pod(name),
                "container": self.container(name),
                "instance": name,
            }

            def put(
                metric: str,
                values: Array,
                fmt: Callable[[float], str],
                extra: Mapping[str, str] | None = None,
                lab: dict[str, str] = labels,
                m: Array = mask,
                v: bool = vanished,
            ) -> None:
                self.emit(metric, {**lab, **(extra or {})}, self.finish(values, m, v), fmt, target)

            temp = np.round(self.noisy(self.sig("gpu_temp_celsius", name, g), 0.01))
            put("DCGM_FI_DEV_GPU_TEMP", temp, _fmt_int)
            put(
                "DCGM_FI_DEV_POWER_USAGE",
                np.clip(self.noisy(self.sig("gpu_power_watts", name, g), 0.05), 0, None),
                lambda v: f"{v:.3f}",
            )
            used_ratio = np.clip(self.noisy(self.sig("gpu_memory_used_ratio", name, g), 0.002), 0, 1)
            usable = FB_TOTAL_MIB - FB_RESERVED_MIB
            used = np.round(used_ratio * usable)
            put("DCGM_FI_DEV_FB_USED", used, _fmt_int)
            put("DCGM_FI_DEV_FB_FREE", usable - used, _fmt_int)
            put("DCGM_FI_DEV_FB_RESERVED", np.full(self.n, FB_RESERVED_MIB), _fmt_int)
            util = np.clip(np.round(100 * self.noisy(self.sig("gpu_util_ratio", name, g), 0.06)), 0, 100)
            put("DCGM_FI_DEV_GPU_UTIL", util, _fmt_int)
            throttle = self.sig("gpu_throttle", name, g) > 0
            segments = [(0, self.n)]
            uptime = self._uptime(name, "node") * 3
            thermal = np.where(throttle, 0.7 * self.dt * 1e9, 0.0) * (1 + 0.1 * self.rng.random(self.n))
            power = np.where(throttle, 0.05 * self.dt * 1e9, 0.0) * self.rng.random(self.n)
            for metric, inc, base in (
                ("DCGM_FI_DEV_THERMAL_VIOLATION", thermal, 3.1e11),
                ("DCGM_FI_DEV_POWER_VIOLATION", power, 9.4e11),
            ):
                put(metric, self.counter(inc, segments, base * uptime / 86400.0), _fmt_int)
            ecc = self.sig("gpu_ecc_errors", name, g) * self.dt / 300.0
            put("DCGM_FI_DEV_ECC_DBE_VOL_TOTAL", self.counter(ecc, segments, 0.0), _fmt_int)
            dcgm_links(self, name, g, segments, put)
            # the last XID: one series per code (its err_code/err_msg labels change with it)
            xid = np.round(self.sig("gpu_xid", name, g))
            codes = [int(c) for c in dict.fromkeys(xid[mask].tolist())] or [0]
            for code in codes:
                own = mask & (xid == code)
                extra = {"err_code": str(code), "err_msg": XID_TEXT.get(code, "Unknown Error")}
                self.emit(
                    "DCGM_FI_DEV_XID_ERRORS",
                    {**labels, **extra},
                    self.finish(np.full(self.n, float(code)), own, vanished or not own[-1]),
                    _fmt_int,
                    target,
                )

    def pod(self, name: str) -> str:
        h = _digest(self.f.name, name, "pod")
        alphabet = "bcdfghjklmnpqrstvwxz2456789"
        suffix = "".join(alphabet[int(h[k : k + 2], 16) % len(alphabet)] for k in range(0, 10, 2))
        return f"{self.deployment(name)}-{h[10:19]}-{suffix}"

    def deployment(self, name: str) -> str:
        if self.spec.deployment:
            return self.spec.deployment
        engine = "sglang" if self.flavour(name) == "sglang" else "vllm"
        return f"{engine}-llama-3-1-8b"

    def container(self, name: str) -> str:
        return "sglang" if self.flavour(name) == "sglang" else "vllm"

    def image(self, name: str) -> str:
        flavour = self.flavour(name)
        if flavour == "sglang":
            return f"lmsysorg/sglang:v{self.spec.engine_version or '0.5.3'}-cu126"
        default = "0.10.2" if flavour == "vllm-mixed" else "0.12.0"
        return f"vllm/vllm-openai:v{self.spec.engine_version or default}"

    def _kube_pod(self, name: str) -> None:
        mask = self.present("restarts", name)
        raw = self._raw("restarts", name)
        vanished = bool(raw is not None and np.isneginf(raw).any())
        target = "kube-state-metrics"
        pod = self.pod(name)
        labels = {
            "namespace": self.spec.namespace,
            "pod": pod,
            "container": self.container(name),
            "uid": _uuid(_digest(pod, "uid")),
            "instance": name,
        }
        restarts = self.sig("restarts", name)
        bumps = np.clip(np.diff(np.concatenate([[0.0], restarts])), 0, None)
        self.emit(
            "kube_pod_container_status_restarts_total",
            labels,
            self.finish(self.counter(bumps, [(0, self.n)], 0.0), mask, vanished),
            _fmt_int,
            target,
        )
        oom = self.sig("oom_killed", name) > 0
        if oom.any():
            self.emit(
                "kube_pod_container_status_last_terminated_reason",
                {**labels, "reason": "OOMKilled"},
                self.finish(np.ones(self.n), mask & oom, vanished),
                _fmt_int,
                target,
            )
            self.emit(
                "kube_pod_container_status_last_terminated_exitcode",
                labels,
                self.finish(np.full(self.n, 137.0), mask & oom, vanished),
                _fmt_int,
                target,
            )
        if self.spec.info_series:
            image = self.image(name)
            self.emit(
                "kube_pod_container_info",
                {
                    **labels,
                    "image": image,
                    "image_spec": image,
                    "image_id": f"docker.io/{image.split(':')[0]}@sha256:{_digest(image)[:64]}",
                    "container_id": f"containerd://{_digest(pod, 'container')[:64]}",
                },
                self.finish(np.ones(self.n), mask, vanished),
                _fmt_int,
                target,
            )

    def _kube_deployment(self) -> None:
        ready = self.f.series.get(("replicas_ready", ()))
        desired = self.f.series.get(("replicas_desired", ()))
        if ready is None or desired is None:
            return
        deployments = sorted({self.deployment(n) for n in self.f.names})
        share = {
            d: sum(1 for n in self.f.names if self.deployment(n) == d) / len(self.f.names)
            for d in deployments
        }
        for d in deployments:
            labels = {"deployment": d, "namespace": self.spec.namespace}
            want = np.round(_fill(desired, 0) * share[d])
            have = np.round(_fill(ready, 0) * share[d])
            for metric, values in (
                ("kube_deployment_spec_replicas", want),
                ("kube_deployment_status_replicas", want),
                ("kube_deployment_status_replicas_ready", have),
                ("kube_deployment_status_replicas_available", have),
                ("kube_deployment_status_replicas_unavailable", want - have),
            ):
                self.emit(metric, labels, values, _fmt_int, "kube-state-metrics")

    def _scrape_gaps(self) -> None:
        """A few missed scrapes per target: every series of that target misses the step."""
        if not self.spec.scrape_gaps:
            return
        targets = sorted(set(self.out.target.values()))
        for target in targets:
            count = int(self.rng.integers(0, self.spec.scrape_gaps + 1))
            for _ in range(count):
                i = int(self.rng.integers(2, self.n - 2))
                for key, t in self.out.target.items():
                    if (
                        t == target
                        and np.isfinite(self.out.series[key][i])
                        and np.isfinite(self.out.series[key][i - 1])
                        and np.isfinite(self.out.series[key][i + 1])
                    ):
                        self.out.series[key][i] = np.nan

    # --- document --------------------------------------------------------------------
    def document(
        self,
        name: str,
        symptom: str | None,
        at: str | None,
        expect: dict[str, Any] | None,
        alert: dict[str, Any] | None = None,
        description: str | None = None,
    ) -> dict[str, Any]:
        self.build()
        items = []
        for key in sorted(self.out.series):
            values = self.out.series[key]
            if not np.isfinite(values).any():
                continue
            metric, labels = key
            label_text = ",".join(f'{k}="{_escape(v)}"' for k, v in labels)
            items.append(
                {
                    "series": f"{metric}{{{label_text}}}" if labels else metric,
                    "values": compress_raw(values, self.out.fmt[key]),
                }
            )
        head = {
            "name": name,
            "description": description if description is not None else self.f.description,
            "level": "raw",
            "interval": self.f.interval,
            "start": self.f.start,
        }
        return fixture_document(head, items, symptom, at, expect, alert)

    def write(
        self,
        path: str,
        name: str,
        symptom: str | None,
        at: str | None = None,
        expect: dict[str, Any] | None = None,
        alert: dict[str, Any] | None = None,
        header: str = "",
        description: str | None = None,
    ) -> None:
        write_document(path, self.document(name, symptom, at, expect, alert, description), header)


def _fill(raw: Array, default: float) -> Array:
    """Finite values with holes (NaN, stale markers) filled forward, then backward."""
    values = np.where(np.isfinite(raw), raw, np.nan)
    if not np.isfinite(values).any():
        return np.full(len(values), default)
    idx = np.where(np.isfinite(values), np.arange(len(values)), 0)
    np.maximum.accumulate(idx, out=idx)
    filled = values[idx]
    first = int(np.flatnonzero(np.isfinite(values))[0])
    filled[:first] = values[first]
    return filled


def _le(value: float) -> str:
    """`le` as prometheus_client writes it (floatToGoString): 0.25, 1.0, 2560.0, 1.1e+06."""
    text = repr(float(value))
    dot = text.find(".")
    if value > 0 and dot > 6:
        mantissa = f"{text[0]}.{text[1:dot]}{text[dot + 1 :]}".rstrip("0.")
        return f"{mantissa}e+0{dot - 1}"
    return text


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"')


def _uuid(h: str) -> str:
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:32]}"


def _epoch(start: str) -> float:
    return float(parse_instant(start))


def write_raw(
    fleet: Fleet,
    path: str,
    name: str,
    symptom: str | None,
    at: str | None = None,
    expect: dict[str, Any] | None = None,
    alert: dict[str, Any] | None = None,
    header: str = "",
    description: str | None = None,
    **spec: Any,
) -> RawFleet:
    """Write the raw twin of `fleet` (call after the signal-level `fleet.write`)."""
    raw = RawFleet(fleet, RawSpec(**spec)).build()
    raw.write(path, name, symptom, at, expect, alert, header, description)
    return raw


__all__ = [
    "FLAVOURS",
    "SGLANG_ITL_BUCKETS",
    "SGLANG_TTFT_BUCKETS",
    "VLLM_ITL_BUCKETS",
    "VLLM_REQUEST_LATENCY_BUCKETS",
    "VLLM_TTFT_BUCKETS",
    "RawFleet",
    "RawSpec",
    "build_1_2_5_buckets",
    "fit_histogram",
    "histogram_quantile",
    "write_raw",
]
