"""The field corpus: incidents rebuilt from the classes of failure public incident reports show.

`python -m tools.generality_field --out DIR` writes one signal-level fixture per case, each
with the conclusion a replay must reach. Seeded: a rerun writes identical files.

Every case is told the way a postmortem tells it: a fleet serving at its usual load, the
change that came in, and what each exporter showed. Engine fleets come from a small
queueing model (arrivals, prompt and output lengths, prefix hits, decode step and
prefill speed per replica, routed only to ready replicas) so the signals of a case agree
with each other; what the model does not hold (a scheduler's stalls, a kernel's tail, a
crash) each case adds by hand. Hosted-provider cases have no engine at all, only what a
gateway and the provider's bill show (tokens, cached tokens, spend, the blended price).

The classes (each with at least two cases, plus confounders that look alike):

1. cost: the blended price paid rises without a list price change (cache hits collapse,
   output share grows), against real price changes and plain volume growth;
2. a release that regresses speed or correctness, against a batch grown by a config change;
3. decode starved by prefill-first scheduling on ordinary prompts, against a traffic burst;
4. the tail of prompt lengths (well under 1% at 100k+ tokens) while the P95 stays flat;
5. a CUDA out-of-memory crash that ends the container with reason Error and exit code 1,
   against exit-code-1 crash loops that are not memory (a bad config, a GPU fault);
6. a rollout that removes the only replica before its successor is ready;
7. one replica's throttled GPU under a modest fleet-wide rise in arrivals;
8. chains: interference fed by a long-prompt surge; a fallback serving for lost replicas.

Longer than 500 lines because each case is a short story and they read best side by side.
"""

from __future__ import annotations

import argparse
import hashlib
import math
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np
import yaml

SEED = 4_417
WINDOW_S = 300.0
"""The window of the windowed signals (restarts, rates): 5 minutes."""

Labels = dict[str, str]


# ---------------------------------------------------------------- writing series


def fmt(v: float) -> str:
    """Four significant digits, positional where the value allows it."""
    if v == int(v) and abs(v) < 1e9:
        return str(int(v))
    if abs(v) >= 1e4:
        return str(int(round(v, 3 - math.floor(math.log10(abs(v))))))
    return f"{v:.4g}"


def notation(values: np.ndarray, stale: np.ndarray) -> str:
    """promtool's expanding notation: runs as `axn` (n+1 values), gaps as `_xn` (n gaps)."""
    tokens = [
        "stale" if st else ("_" if v != v else fmt(v))
        for v, st in zip(values.tolist(), stale.tolist(), strict=True)
    ]
    while tokens and tokens[-1] == "_":
        tokens.pop()
    items: list[str] = []
    i = 0
    while i < len(tokens):
        j = i + 1
        if tokens[i] != "stale":
            while j < len(tokens) and tokens[j] == tokens[i]:
                j += 1
        run = j - i
        if tokens[i] == "_":
            items.append("_" if run == 1 else f"_x{run}")
        else:
            items.append(tokens[i] if run == 1 else f"{tokens[i]}x{run - 1}")
        i = j
    return " ".join(items)


def selector(name: str, labels: Labels | None) -> str:
    if not labels:
        return name
    inner = ",".join(f'{k}="{labels[k]}"' for k in sorted(labels))
    return f"{name}{{{inner}}}"


# (relative or absolute, sd, AR(1) coefficient); a signal absent here gets no noise.
NOISE: dict[str, tuple[str, float, float]] = {
    "ttft_p99_seconds": ("rel", 0.10, 0.5),
    "ttft_p50_seconds": ("rel", 0.06, 0.5),
    "tpot_p99_seconds": ("rel", 0.08, 0.5),
    "tpot_p50_seconds": ("rel", 0.04, 0.6),
    "e2e_p99_seconds": ("rel", 0.07, 0.4),
    "request_rate": ("rel", 0.05, 0.6),
    "error_ratio": ("rel", 0.30, 0.3),
    "timeout_ratio": ("rel", 0.35, 0.3),
    "rejected_ratio": ("rel", 0.3, 0.3),
    "truncated_ratio": ("rel", 0.15, 0.4),
    "fallback_ratio": ("rel", 0.12, 0.5),
    "prompt_tokens_p95": ("rel", 0.03, 0.5),
    "output_tokens_p95": ("rel", 0.04, 0.5),
    "long_prompt_ratio": ("rel", 0.25, 0.3),
    "queue_waiting": ("rel", 0.30, 0.5),
    "requests_running": ("rel", 0.05, 0.6),
    "queue_time_p99_seconds": ("rel", 0.15, 0.4),
    "prefill_time_p99_seconds": ("rel", 0.08, 0.4),
    "prefix_hit_ratio": ("abs", 0.015, 0.6),
    "prompt_tokens_rate": ("rel", 0.05, 0.6),
    "generation_tokens_rate": ("rel", 0.05, 0.6),
    "kv_usage_ratio": ("abs", 0.01, 0.8),
    "preemption_rate": ("rel", 0.3, 0.3),
    "gpu_memory_used_ratio": ("abs", 0.0008, 0.9),
    "gpu_util_ratio": ("abs", 0.02, 0.5),
    "gpu_temp_celsius": ("abs", 0.5, 0.9),
    "gpu_power_watts": ("rel", 0.03, 0.5),
    "cost_per_1k_tokens": ("rel", 0.012, 0.5),
    "spend_rate": ("rel", 0.04, 0.6),
    "gateway_latency_p99_seconds": ("rel", 0.08, 0.5),
    "gateway_queue": ("rel", 0.3, 0.5),
    "gateway_inflight": ("rel", 0.05, 0.6),
    "upstream_error_ratio": ("rel", 0.3, 0.3),
}
RATIOS = {
    "error_ratio",
    "timeout_ratio",
    "rejected_ratio",
    "truncated_ratio",
    "fallback_ratio",
    "long_prompt_ratio",
    "prefix_hit_ratio",
    "kv_usage_ratio",
    "gpu_memory_used_ratio",
    "gpu_util_ratio",
    "upstream_error_ratio",
}


def ramp(T: int, t0: int, t1: int, a: float, b: float) -> np.ndarray:
    """`a` before step t0, `b` from step t1, a straight line between."""
    k = np.arange(T, dtype=float)
    if t1 <= t0:
        return np.where(k < t0, a, b).astype(float)
    return a + (b - a) * np.clip((k - t0) / (t1 - t0), 0.0, 1.0)


def window(T: int, t: int, steps: int) -> np.ndarray:
    """1 in [t, t+steps), else 0: one event as a windowed count sees it."""
    out = np.zeros(T)
    out[max(t, 0) : min(t + steps, T)] = 1.0
    return out


class Scene:
    """One fixture: its clock, its random stream, and the series written so far."""

    def __init__(self, name: str, interval: int, minutes: int, start: str, gap_rate: float = 0.002):
        digest = int(hashlib.sha256(name.encode()).hexdigest()[:12], 16)
        self.rng = np.random.default_rng([SEED, digest])
        self.name = name
        self.dt = float(interval)
        self.interval = interval
        self.T = int(minutes * 60 // interval) + 1
        self.start = start
        self.out: dict[str, tuple[np.ndarray, np.ndarray]] = {}
        self.gap_rate = gap_rate
        # Whole scrapes lost (a Prometheus restart, a slow rule evaluation): every series misses them.
        lost = self.rng.random(self.T) < gap_rate
        lost[:3] = False
        lost[-3:] = False
        self.lost = lost

    def step(self, minute: float) -> int:
        return round(minute * 60 / self.dt)

    def steps(self, minutes: float) -> int:
        return max(1, round(minutes * 60 / self.dt))

    def noisy(self, name: str, values: np.ndarray) -> np.ndarray:
        spec = NOISE.get(name)
        v = values.astype(float).copy()
        if spec is None:
            return v
        kind, sd, phi = spec
        # AR(1) as a convolution with phi**k, warmed up so it starts stationary.
        pad = 64
        e = self.rng.normal(0.0, sd * np.sqrt(1 - phi * phi), len(v) + pad)
        x = np.convolve(e, phi ** np.arange(pad))[pad : pad + len(v)]
        v = v * np.exp(x - sd * sd / 2) if kind == "rel" else v + x
        v = np.maximum(v, 0.0)
        if name in RATIOS:
            v = np.minimum(v, 1.0)
        return v

    def put(
        self,
        name: str,
        labels: Labels | None,
        values: np.ndarray | float,
        mask: np.ndarray | None = None,
        noise: bool = True,
        drop: float = 0.003,
        every: int = 1,
    ) -> None:
        """A series; NaN where `mask` is False, a staleness marker where it turns False.

        `every` keeps one sample in that many (an exporter or recording rule slower than
        the scrape); `drop` is the chance of a lost sample."""
        v = np.full(self.T, float(values)) if np.isscalar(values) else np.asarray(values, dtype=float)
        if noise:
            v = self.noisy(name, v)
        m = np.ones(self.T, dtype=bool) if mask is None else mask.astype(bool)
        stale = np.zeros(self.T, dtype=bool)
        stale[1:] = m[:-1] & ~m[1:]
        sporadic = self.rng.random(self.T) < drop
        sparse = (np.arange(self.T) % every) != 0
        v = np.where(m & ~self.lost & ~sporadic & ~sparse, v, np.nan)
        if not m.any():
            return
        key = selector(name, labels)
        assert key not in self.out, key
        self.out[key] = (v, stale)

    def write(self, out: Path, case: Case) -> None:
        doc: dict[str, Any] = {
            "name": case.name,
            "description": case.description,
            "interval": f"{self.interval}s",
            "start": self.start,
            "at": f"{case.at}m",
        }
        if case.symptom:
            doc["symptom"] = case.symptom
        head = [f"# class: {case.klass}"] + [f"# {line}" for line in case.why]
        top = yaml.safe_dump(doc, sort_keys=False, width=1 << 30, allow_unicode=True)
        # The series are written by hand: a selector never holds a single quote, and the
        # notation only digits, dots, signs, `x`, `_` and `stale`.
        series = [f"- series: '{k}'\n  values: '{notation(v, s)}'\n" for k, (v, s) in self.out.items()]
        tail = yaml.safe_dump({"expect": case.expect}, sort_keys=False, width=1 << 30)
        text = "\n".join(head) + "\n" + top + "input_series:\n" + "".join(series) + tail
        (out / f"{case.name}.yaml").write_text(text, encoding="utf-8")


@dataclass
class Case:
    name: str
    klass: str
    description: str
    at: int
    symptom: str | None
    expect: dict[str, Any]
    why: list[str] = field(default_factory=list)


# ---------------------------------------------------------------- engine fleets


@dataclass(frozen=True)
class Profile:
    """A model on its hardware, at the load a fleet of it usually carries."""

    model: str
    model_version: str
    engine: str
    engine_version: str
    quantization: str
    gpus: int  # GPUs per replica (tensor parallel)
    d0: float  # decode step with an empty batch, s
    b0: float  # running batch at which the decode step doubles
    pf: float  # prefill throughput, tokens/s
    kv_tokens: float  # KV capacity per replica, tokens
    max_seqs: int
    batched_tokens: int
    chunked: bool
    mem_util: float
    rate: float  # requests/s per replica
    prompt_p95: float
    output_p95: float
    hit: float
    tdp: float  # W per GPU
    idle_w: float
    prefix: str  # pod name stem


L8_H100 = Profile(
    "llama-3.1-8b-instruct", "2024-07", "vllm", "0.10.1.1", "bf16", 1,
    0.0068, 120, 24000, 440e3, 256, 8192, True, 0.90, 9.0, 2600, 700, 0.50, 700, 90, "llama8b",
)  # fmt: skip
L70_H100 = Profile(
    "llama-3.3-70b-instruct", "2024-12", "vllm", "0.10.1.1", "fp8", 4,
    0.019, 100, 14000, 650e3, 256, 8192, True, 0.92, 4.2, 3100, 600, 0.45, 700, 110, "llama70b",
)  # fmt: skip
Q32_A100 = Profile(
    "qwen2.5-32b-instruct", "2024-09", "sglang", "0.4.9.post2", "bf16", 2,
    0.024, 80, 5200, 260e3, 128, 16384, True, 0.88, 1.4, 3800, 520, 0.60, 400, 60, "qwen32b",
)  # fmt: skip
M7_L40S = Profile(
    "mistral-7b-instruct-v0.3", "2024-05", "vllm", "0.9.2", "awq", 1,
    0.014, 60, 9000, 180e3, 128, 4096, True, 0.90, 5.0, 1500, 380, 0.35, 350, 40, "mistral7b",
)  # fmt: skip


M7_L4 = Profile(
    "mistral-7b-instruct-v0.3", "2024-05", "vllm", "0.10.1.1", "awq", 1,
    0.02, 40, 5000, 60e3, 64, 2048, True, 0.94, 2.5, 1400, 360, 0.35, 72, 16, "mistral7b-l4",
)  # fmt: skip


def pod_name(rng: np.random.Generator, stem: str, rs: str) -> str:
    alphabet = "bcdfghjklmnpqrstvwxz2456789"
    return f"{stem}-{rs}-" + "".join(alphabet[i] for i in rng.integers(0, len(alphabet), 5))


def rs_hash(rng: np.random.Generator) -> str:
    alphabet = "bcdfghjklmnpqrstvwxz2456789"
    return "".join(alphabet[i] for i in rng.integers(0, len(alphabet), 9))


NO_BUCKET = frozenset({"prompt_tokens_max_bucket"})


class Fleet:
    """Replicas of one model (slots), each served by one pod at a time, and the load they share."""

    def __init__(self, sc: Scene, p: Profile, n: int, statefulset: bool = False):
        self.sc, self.p, self.S, self.T = sc, p, n, sc.T
        r = sc.rng
        S, T = n, sc.T
        ones = np.ones((S, T))
        self.demand = np.full(T, p.rate * n)
        self.share = r.lognormal(0.0, 0.05, (S, 1)) * ones
        self.P = p.prompt_p95 * r.lognormal(0.0, 0.02, (S, 1)) * ones
        self.mean_frac = np.full((S, T), 0.42)
        self.O = p.output_p95 * r.lognormal(0.0, 0.02, (S, 1)) * ones
        self.h = np.clip(p.hit + r.normal(0.0, 0.02, (S, 1)), 0, 1) * ones
        self.longr = np.full((S, T), 0.0005)
        self.maxb = np.full((S, T), 8192.0)
        self.f_dec = ones.copy()
        self.f_pre = ones.copy()
        self.max_seqs = np.full((S, T), float(p.max_seqs))
        self.err = np.full((S, T), 0.0015)
        self.tmo = np.full((S, T), 0.0004)
        self.mem = np.full((S, T), p.mem_util + 0.013) + r.normal(0.0, 0.002, (S, 1))
        self.up = np.ones((S, T), dtype=bool)
        self.ready = np.ones((S, T), dtype=bool)
        self.present = np.ones((S, T), dtype=bool)
        if statefulset:
            self.names = [[(0, f"{p.prefix}-{s}")] for s in range(S)]
        else:
            rs = rs_hash(r)
            self.names = [[(0, pod_name(r, p.prefix, rs))] for s in range(S)]
        build = {
            "model": p.model,
            "model_version": p.model_version,
            "engine": p.engine,
            "engine_version": p.engine_version,
            "quantization": p.quantization,
            "route": "primary",
        }
        config = {
            "gpu_memory_utilization": f"{p.mem_util:.2f}",
            "max_num_seqs": str(p.max_seqs),
            "max_num_batched_tokens": str(p.batched_tokens),
            "chunked_prefill": "true" if p.chunked else "false",
            "prefix_caching": "true",
        }
        self.builds: list[list[tuple[int, Labels]]] = [[(0, dict(build))] for _ in range(S)]
        self.configs: list[list[tuple[int, Labels]]] = [[(0, dict(config))] for _ in range(S)]
        self.restarts = np.zeros((S, T))
        self.oom = np.zeros((S, T))
        self.term = np.zeros((S, T))
        self.exitc = np.zeros((S, T))
        self.probe = np.zeros((S, T))
        G = p.gpus
        self.xid = np.zeros((S, G, T))
        self.ecc = np.zeros((S, G, T))
        self.gpu_gone = np.zeros((S, G, T), dtype=bool)
        self.crashes: list[tuple[int, int]] = []
        self.term_absent_before_first = False
        self.throttle = np.zeros((S, G, T))
        self.temp_add = np.zeros((S, G, T))
        self.power_scale = np.ones((S, G, T))
        self.desired = np.full(T, float(n))
        self.updated: np.ndarray | None = None
        self.sig: dict[str, np.ndarray] = {}
        self.rho = np.zeros((S, T))

    # ---- changes a case makes

    def relabel(self, s: int, t: int, build: Labels | None = None, config: Labels | None = None) -> None:
        if build:
            self.builds[s].append((t, {**self.builds[s][-1][1], **build}))
        if config:
            self.configs[s].append((t, {**self.configs[s][-1][1], **config}))

    def replace_pod(
        self,
        s: int,
        t_created: int,
        t_ready: int,
        t_old_gone: int | None = None,
        build: Labels | None = None,
        config: Labels | None = None,
        rs: str | None = None,
    ) -> None:
        """A new pod for slot s. With a surge the old one serves until the new one is ready;
        without, it is gone at `t_old_gone` and the slot is empty until `t_ready`."""
        old_gone = t_ready if t_old_gone is None else t_old_gone
        new = pod_name(self.sc.rng, self.p.prefix, rs) if rs else self.names[s][-1][1]
        switch = t_ready if old_gone >= t_ready else min(t_created, t_ready)
        if new != self.names[s][-1][1]:
            self.names[s].append((switch, new))
        self.up[s, old_gone:t_ready] = False
        self.ready[s, old_gone:t_ready] = False
        self.present[s, old_gone : min(t_created, t_ready)] = False
        if old_gone < t_ready:
            load = self._loading(t_created, t_ready)
            self.mem[s, old_gone:t_ready] = np.nan
            self.mem[s, t_created:t_ready] = load
        self.relabel(s, t_ready, build, config)

    def _loading(self, t0: int, t1: int) -> np.ndarray:
        """GPU memory while an engine loads: weights first, then the KV pool at once."""
        n = max(t1 - t0, 0)
        if n == 0:
            return np.zeros(0)
        x = np.linspace(0.0, 1.0, n)
        weights = 0.45 if self.p.gpus == 1 else 0.3
        return np.where(x < 0.8, 0.01 + weights * np.clip(x / 0.7, 0, 1), self.p.mem_util + 0.01)

    def crash(self, s: int, t: int, down_steps: int, reason: str, code: int) -> None:
        """The engine container on slot s dies at t and is restarted in place; back after `down_steps`."""
        T = self.T
        end = min(t + down_steps, T)
        self.up[s, t:end] = False
        self.ready[s, t:end] = False
        self.restarts[s] += window(T, t, self.sc.steps(WINDOW_S / 60))
        self.oom[s, t:] = 1.0 if reason == "OOMKilled" else 0.0
        self.term[s, t:] = 1.0 if reason == "Error" else 0.0
        self.exitc[s, t:] = float(code)
        self.mem[s, t:end] = self._loading(t, end)
        self.crashes.append((s, t))

    def first_crash(self, s: int) -> int | None:
        mine = [t for slot, t in self.crashes if slot == s]
        return min(mine) if mine else None

    # ---- the queueing model

    def derive(self) -> dict[str, np.ndarray]:
        p, S, T = self.p, self.S, self.T
        w = self.share * self.ready
        total = w.sum(axis=0)
        lam = np.where(total > 0, self.demand * w / np.where(total > 0, total, 1.0), 0.0)
        pm = self.P * self.mean_frac
        om = self.O * 0.40
        unc = pm * (1 - 0.9 * self.h)
        a = lam * om * p.d0 * self.f_dec
        free = np.where(a < 0.97 * p.b0, a / np.maximum(1 - a / p.b0, 0.03), 1e9)
        running = np.minimum(free, self.max_seqs)
        step = p.d0 * self.f_dec * (1 + running / p.b0)
        cap_dec = self.max_seqs / (om * p.d0 * self.f_dec * (1 + self.max_seqs / p.b0))
        cap_pre = p.pf / (unc * self.f_pre)
        mu = 1.0 / (1.0 / cap_dec + 1.0 / cap_pre)
        rho = np.clip(lam / mu, 0.0, 5.0)
        backlog = np.zeros((S, T))
        for t in range(1, T):
            grow = (lam[:, t] - 0.97 * mu[:, t]) * self.sc.dt
            backlog[:, t] = np.where(self.up[:, t], np.maximum(backlog[:, t - 1] + grow, 0.0), 0.0)
        rc = np.minimum(rho, 0.97)
        q0 = rc**2 / (1 - rc) * 0.6
        qt = 0.015 + 0.08 * rc**3 / (1 - rc) + 1.8 * backlog / mu
        pre_share = np.clip(lam * unc * self.f_pre / p.pf, 0, 1)
        chunk = np.minimum(0.8 * self.P * (1 - 0.9 * self.h), p.batched_tokens) / p.pf * self.f_pre
        prefill = 0.015 + 1.35 * self.P * (1 - 0.9 * self.h) / p.pf * self.f_pre * (1 + 0.5 * rc)
        ttft99 = qt + prefill + 0.03
        ttft50 = 0.02 + 0.3 * prefill + 0.2 * qt + 0.5 * backlog / mu
        tpot50 = step
        tpot99 = step * 1.3 + chunk * np.clip(pre_share * 4, 0.2, 1.0)
        e2e = ttft99 + self.O * step * 1.08
        kv = np.clip(running * (pm + om * 0.5) / p.kv_tokens, 0, 1)
        util = np.clip(0.22 + 0.75 * rc, 0, 0.99)
        self.rho = rho
        self.sig = {
            "request_rate": lam,
            "requests_running": running,
            "queue_waiting": backlog + q0,
            "queue_time_p99_seconds": qt,
            "prefill_time_p99_seconds": prefill,
            "ttft_p99_seconds": ttft99,
            "ttft_p50_seconds": ttft50,
            "tpot_p99_seconds": tpot99,
            "tpot_p50_seconds": tpot50,
            "e2e_p99_seconds": e2e,
            "kv_usage_ratio": kv,
            "preemption_rate": np.where(kv > 0.95, (kv - 0.95) * 60, 0.0),
            "prompt_tokens_p95": self.P.copy(),
            "output_tokens_p95": self.O.copy(),
            "prompt_tokens_rate": lam * pm,
            "generation_tokens_rate": lam * om,
            "prefix_hit_ratio": self.h.copy(),
            "long_prompt_ratio": self.longr.copy(),
            "prompt_tokens_max_bucket": self.maxb.copy(),
            "error_ratio": self.err.copy(),
            "timeout_ratio": self.tmo + 0.02 * np.clip((ttft99 - 8) / 30, 0, 1),
            "gpu_util_ratio": util,
        }
        return self.sig

    def recompose(self) -> None:
        """TTFT and end-to-end latency again from their parts, after a case edited the parts."""
        g = self.sig
        qt, pre = g["queue_time_p99_seconds"], g["prefill_time_p99_seconds"]
        g["ttft_p99_seconds"] = qt + pre + 0.03
        g["ttft_p50_seconds"] = 0.02 + 0.3 * pre + 0.2 * qt
        g["e2e_p99_seconds"] = g["ttft_p99_seconds"] + self.O * (
            g["tpot_p50_seconds"] * 1.05 + 0.02 * g["tpot_p99_seconds"]
        )

    def fleet_errors(self) -> np.ndarray:
        """The gateway's error ratio over its 5m window: engine errors, the streams in flight
        on an engine that died, and everything while no replica is ready."""
        lam = self.sig["request_rate"]
        running = self.sig["requests_running"]
        bad = (lam * self.err * self.up).sum(axis=0)
        for s, t in self.crashes:
            bad[t] += running[s, max(t - 1, 0)] / self.sc.dt
        none_ready = self.ready.sum(axis=0) == 0
        bad = np.where(none_ready, self.demand, bad)
        n = self.sc.steps(WINDOW_S / 60)
        kernel = np.ones(n)
        num = np.convolve(bad, kernel)[: self.T]
        den = np.convolve(self.demand, kernel)[: self.T]
        return np.clip(num / np.maximum(den, 1e-9), 0, 1)

    # ---- writing

    def _name_at(self, s: int) -> list[str]:
        out = [""] * self.T
        for (t0, name), nxt in zip(self.names[s], [*self.names[s][1:], (self.T, "")], strict=True):
            for t in range(t0, nxt[0]):
                out[t] = name
        return out

    def _labels_at(self, changes: list[tuple[int, Labels]]) -> list[int]:
        idx = [0] * self.T
        for i, ((t0, _), nxt) in enumerate(zip(changes, [*changes[1:], (self.T, {})], strict=True)):
            for t in range(t0, nxt[0]):
                idx[t] = i
        return idx

    def emit(self, skip: set[str] | frozenset[str] = NO_BUCKET, groups: set[str] | None = None) -> None:
        """Write the fleet's series; `groups` picks exporters, `skip` drops single signals."""
        sc = self.sc
        groups = {"engine", "dcgm", "kube", "info"} if groups is None else groups
        sig = dict(self.sig)
        engine_names = [
            "ttft_p99_seconds", "ttft_p50_seconds", "tpot_p99_seconds", "tpot_p50_seconds",
            "e2e_p99_seconds", "request_rate", "error_ratio", "timeout_ratio", "prompt_tokens_p95",
            "output_tokens_p95", "long_prompt_ratio", "queue_waiting", "requests_running",
            "queue_time_p99_seconds", "prefill_time_p99_seconds", "prefix_hit_ratio",
            "prompt_tokens_rate", "generation_tokens_rate", "kv_usage_ratio", "preemption_rate",
            "prompt_tokens_max_bucket",
        ]  # fmt: skip
        for s in range(self.S):
            names = self._name_at(s)
            bidx = self._labels_at(self.builds[s])
            cidx = self._labels_at(self.configs[s])
            for name in dict.fromkeys(names):
                if not name:
                    continue
                own = np.array([n == name for n in names])
                live = own & self.up[s]
                inst = {"instance": name}
                if "engine" in groups:
                    for key in engine_names:
                        if key in skip:
                            continue
                        noise = key not in ("prompt_tokens_max_bucket",)
                        sc.put(key, inst, sig[key][s], live, noise=noise)
                if "info" in groups:
                    for i, (_, labels) in enumerate(self.builds[s]):
                        m = live & (np.array(bidx) == i)
                        if "build_info" not in skip:
                            sc.put("build_info", {**labels, **inst}, 1.0, m, noise=False, drop=0)
                    for i, (_, labels) in enumerate(self.configs[s]):
                        m = live & (np.array(cidx) == i)
                        if "config_info" not in skip:
                            sc.put("config_info", {**labels, **inst}, 1.0, m, noise=False, drop=0)
                if "kube" in groups:
                    there = own & self.present[s]
                    sc.put("restarts", inst, self.restarts[s], there, noise=False)
                    if "oom_killed" not in skip:
                        sc.put("oom_killed", inst, self.oom[s], there, noise=False)
                if "term" in groups:
                    there = own & self.present[s]
                    first = self.first_crash(s)
                    if self.term_absent_before_first:
                        there = there & (np.arange(self.T) >= (self.T if first is None else first))
                    sc.put("terminated_error", inst, self.term[s], there, noise=False)
                    sc.put("exit_code", inst, self.exitc[s], there, noise=False)
                if "probe" in groups:
                    sc.put("probe_failures", inst, self.probe[s], own & self.present[s], noise=False)
                if "dcgm" in groups:
                    self._emit_gpus(s, own & self.present[s], inst, skip)

    def _emit_gpus(self, s: int, there: np.ndarray, inst: Labels, skip: set[str] | frozenset[str]) -> None:
        p = self.p
        sc = self.sc
        util = np.where(self.up[s], self.sig["gpu_util_ratio"][s], 0.0)
        for g in range(p.gpus):
            lab = {**inst, "gpu": str(g)}
            on = there & ~self.gpu_gone[s, g]
            power = (p.idle_w + (p.tdp - p.idle_w) * (0.15 + 0.75 * util)) * self.power_scale[s, g]
            temp = 29 + 42 * power / p.tdp + self.temp_add[s, g]
            mem = np.nan_to_num(self.mem[s], nan=0.0)
            sc.put("gpu_memory_used_ratio", lab, mem, on & ~np.isnan(self.mem[s]))
            sc.put("gpu_util_ratio", lab, util, on)
            sc.put("gpu_temp_celsius", lab, temp, on)
            sc.put("gpu_power_watts", lab, power, on)
            sc.put("gpu_throttle", lab, self.throttle[s, g], on, noise=False)
            if "gpu_xid" not in skip:
                sc.put("gpu_xid", lab, self.xid[s, g], on, noise=False)
            if "gpu_ecc_errors" not in skip:
                sc.put("gpu_ecc_errors", lab, self.ecc[s, g], on, noise=False)

    def emit_fleet(self, extra: set[str] | frozenset[str] = frozenset()) -> None:
        """kube-state-metrics' and the gateway's fleet-level view."""
        sc = self.sc
        sc.put("replicas_desired", None, self.desired, noise=False)
        sc.put("replicas_ready", None, self.ready.sum(axis=0).astype(float), noise=False)
        if self.updated is not None:
            sc.put("replicas_updated", None, self.updated, noise=False)
        sc.put("rejected_ratio", None, 0.0, noise=False)
        sc.put("truncated_ratio", None, 0.004)
        if "fallback" not in extra:
            sc.put("fallback_ratio", None, 0.0, noise=False)
        if "gateway_errors" in extra:
            sc.put("error_ratio", None, self.fleet_errors())


# ---------------------------------------------------------------- hosted-provider bills


@dataclass
class Bill:
    """A gateway in front of a hosted model: tokens in and out, cached input, and what they cost."""

    sc: Scene
    prompt: np.ndarray  # input tokens/s
    gen: np.ndarray  # output tokens/s (reasoning included)
    hit: np.ndarray  # cached share of input tokens
    p_in: np.ndarray  # list price per 1k input tokens
    cached_discount: float  # cached input billed at this fraction
    out_mult: float  # output price over input price

    def spend_per_s(self) -> np.ndarray:
        p_in = self.p_in / 1000
        uncached = self.prompt * (1 - self.hit) * p_in
        cached = self.prompt * self.hit * p_in * self.cached_discount
        return uncached + cached + self.gen * p_in * self.out_mult

    def put_cost(self) -> None:
        per_s = self.spend_per_s()
        self.sc.put("spend_rate", None, per_s * 3600)
        self.sc.put("cost_per_1k_tokens", None, per_s / (self.prompt + self.gen) * 1000)


def hosted_build(model: str, version: str, route: str = "default") -> Labels:
    return {
        "model": model,
        "model_version": version,
        "engine": "hosted-api",
        "engine_version": "v1",
        "quantization": "unknown",
        "route": route,
    }


def put_info(sc: Scene, labels_from: list[tuple[int, Labels]]) -> None:
    for (t0, labels), nxt in zip(labels_from, [*labels_from[1:], (sc.T, {})], strict=True):
        mask = np.zeros(sc.T, dtype=bool)
        mask[t0 : nxt[0]] = True
        sc.put("build_info", labels, 1.0, mask, noise=False, drop=0)


# ---------------------------------------------------------------- the cases

CASES: list[Callable[[], tuple[Scene, Case]]] = []


def case(fn: Callable[[], tuple[Scene, Case]]) -> Callable[[], tuple[Scene, Case]]:
    CASES.append(fn)
    return fn


def slow_wave(sc: Scene, amp: float, turns: float = 0.35, phase: float = 0.0) -> np.ndarray:
    """A slow daily swing under the incident (a fraction of a day over the fixture)."""
    return 1 + amp * np.sin(phase + np.linspace(0.0, 2 * np.pi * turns, sc.T))


# ---- 1. cost: the blended price is not the list price


@case
def cost_cache_collapse_after_prompt_edit() -> tuple[Scene, Case]:
    sc = Scene(
        "field-cost-hosted-cache-hits-collapse-after-prompt-edit", 60, 240, "2026-03-03T05:00:00Z", 0.01
    )
    T, t0 = sc.T, sc.step(150)
    vol = slow_wave(sc, 0.16, 0.3, -0.4)
    prompt, gen = 86000 * vol, 3900 * vol
    hit = ramp(T, t0, t0 + 4, 0.71, 0.16)
    bill = Bill(sc, prompt, gen, hit, np.full(T, 0.003), 0.1, 5.0)
    sc.put("request_rate", None, 21 * vol)
    sc.put("prompt_tokens_rate", None, prompt)
    sc.put("generation_tokens_rate", None, gen)
    sc.put("prefix_hit_ratio", None, hit)
    bill.put_cost()
    sc.put("list_price_per_1k_tokens", None, 0.003, noise=False)
    put_info(sc, [(0, hosted_build("frontier-large", "2025-08-07"))])
    sc.put("gateway_latency_p99_seconds", None, ramp(T, t0, t0 + 4, 2.1, 3.3))
    sc.put("error_ratio", None, 0.002)
    return sc, Case(
        sc.name,
        "1 cost: blended price (cache)",
        "A hosted model behind an internal gateway; no engine metrics, only the gateway's token "
        "counts and the provider's usage export (cached input tokens, spend). An edit to the "
        "assistant's system prompt put the request timestamp on its first line; the provider's "
        "prompt cache matches exact prefixes, so the cached share of input fell from ~71% to "
        "~16%. Cached input is billed at a tenth of list: the price paid per 1k tokens rose ~1.8x "
        "at an unchanged list price, model and token volume.",
        225,
        "cost_up",
        {"cause": "prefix_cache_miss"},
    )


@case
def cost_cache_collapse_one_tenant_sdk() -> tuple[Scene, Case]:
    sc = Scene("field-cost-hosted-one-tenant-tool-order-breaks-cache", 60, 300, "2026-05-19T11:00:00Z", 0.015)
    T, t0 = sc.T, sc.step(170)
    vol = slow_wave(sc, 0.08, 0.2)
    support = 52000 * vol
    search = 30000 * vol
    hit_support = ramp(T, t0, t0 + 12, 0.78, 0.06)  # the SDK rolled out to its pods over ~12 minutes
    hit_search = np.full(T, 0.35)
    prompt = support + search
    hit = (support * hit_support + search * hit_search) / prompt
    gen = (1700 + 1500) * vol
    bill = Bill(sc, prompt, gen, hit, np.full(T, 0.0025), 0.25, 4.0)
    sc.put("prompt_tokens_rate", {"tenant": "support-bot"}, support)
    sc.put("prompt_tokens_rate", {"tenant": "search"}, search)
    sc.put("generation_tokens_rate", {"tenant": "support-bot"}, 1700 * vol)
    sc.put("generation_tokens_rate", {"tenant": "search"}, 1500 * vol)
    # The usage export lands every other minute.
    sc.put("prefix_hit_ratio", None, hit, every=2)
    sc.put("request_rate", None, 26 * vol)
    bill.put_cost()
    put_info(sc, [(0, hosted_build("frontier-medium", "2025-04-14"))])
    return sc, Case(
        sc.name,
        "1 cost: blended price (cache)",
        "Two tenants share a hosted model through one gateway. The support bot upgraded its agent "
        "SDK, which now serialises the tool definitions in a different order on every call: the "
        "long shared prefix no longer matches and that tenant's cached input fell from ~78% to ~6% "
        "(fleet-wide from ~63% to ~18%). Cached input is billed at a quarter of list. The price "
        "per 1k tokens rose ~1.5x; token volume and model are unchanged. Cache data arrives "
        "every other minute.",
        270,
        "cost_up",
        {"cause": "prefix_cache_miss"},
    )


@case
def cost_output_share_step_by_step() -> tuple[Scene, Case]:
    sc = Scene("field-cost-hosted-explain-step-by-step-output-share", 30, 180, "2026-02-10T13:00:00Z")
    T, t0 = sc.T, sc.step(100)
    flag = ramp(T, t0, t0 + sc.steps(10), 0.0, 1.0)  # a feature flag from 10% to 100%
    prompt = np.full(T, 40000.0)
    gen = 2600 * (1 + 2.2 * flag)
    bill = Bill(sc, prompt, gen, np.full(T, 0.42), np.full(T, 0.003), 0.5, 4.0)
    sc.put("request_rate", None, 18.0)
    sc.put("prompt_tokens_rate", None, prompt)
    sc.put("generation_tokens_rate", None, gen)
    sc.put("prompt_tokens_p95", None, 5200.0)
    sc.put("output_tokens_p95", None, 420 * (1 + 2.2 * flag))
    sc.put("prefix_hit_ratio", None, 0.42)
    bill.put_cost()
    sc.put("list_price_per_1k_tokens", None, 0.003, noise=False)
    put_info(sc, [(0, hosted_build("frontier-large", "2025-08-07"))])
    sc.put("gateway_latency_p99_seconds", None, 1.6)
    return sc, Case(
        sc.name,
        "1 cost: blended price (output share)",
        "A product team changed the answer template to 'explain your reasoning step by step' "
        "behind a feature flag rolled from 10% to 100% in ten minutes. P95 output length went "
        "from ~420 to ~1350 tokens at the same request rate and prompts; output is billed at 4x "
        "input, so the blended price per 1k tokens rose ~1.3x with no list price or model change.",
        160,
        "cost_up",
        {"cause": "long_output_shift"},
    )


@case
def cost_reasoning_effort_default() -> tuple[Scene, Case]:
    sc = Scene("field-cost-hosted-reasoning-effort-default-high", 60, 240, "2026-06-02T07:00:00Z", 0.02)
    T, t0 = sc.T, sc.step(140)
    vol = slow_wave(sc, 0.12, 0.25, -0.2)
    prompt = 60000 * vol
    gen = 5000 * vol * ramp(T, t0, t0 + 6, 1.0, 3.8)
    bill = Bill(sc, prompt, gen, np.full(T, 0.55), np.full(T, 0.00125), 0.1, 8.0)
    sc.put("request_rate", None, 24 * vol)
    sc.put("prompt_tokens_rate", None, prompt)
    sc.put("generation_tokens_rate", None, gen, every=2)
    sc.put("prefix_hit_ratio", None, 0.55, every=2)
    bill.put_cost()
    put_info(sc, [(0, hosted_build("reasoning-mini", "2025-10-01"))])
    # Reasoning happens before the first visible byte.
    sc.put("gateway_latency_p99_seconds", None, ramp(T, t0, t0 + 6, 3.0, 19.0))
    sc.put("error_ratio", None, 0.003)
    return sc, Case(
        sc.name,
        "1 cost: blended price (output share)",
        "A client library release changed its default reasoning effort from low to high. The "
        "model and its price table are unchanged, but each request now spends ~4x the output "
        "tokens thinking (billed as output, at 8x the input price), and the first visible byte "
        "comes much later. Only billing exports: token totals per minute (output every other "
        "minute), no per-request lengths.",
        215,
        "cost_up",
        {"cause": "long_output_shift"},
        [
            "No output_tokens_p95: a billing export has totals only; length per request is the",
            "ratio of generation_tokens_rate to request_rate.",
        ],
    )


@case
def cost_model_alias_moved() -> tuple[Scene, Case]:
    sc = Scene("field-cost-hosted-model-alias-moved-to-new-snapshot", 60, 200, "2026-01-21T16:00:00Z", 0.01)
    T, t0 = sc.T, sc.step(120)
    vol = slow_wave(sc, 0.1, 0.25, 1.0)
    prompt = 70000 * vol * ramp(T, t0, t0, 1.0, 1.03)  # the new tokenizer splits a little finer
    gen = 4200 * vol * ramp(T, t0, t0, 1.0, 1.08)
    p_in = ramp(T, t0, t0, 0.0025, 0.004)
    bill = Bill(sc, prompt, gen, np.full(T, 0.5), p_in, 0.1, 4.0)
    sc.put("request_rate", None, 22 * vol)
    sc.put("prompt_tokens_rate", None, prompt)
    sc.put("generation_tokens_rate", None, gen)
    sc.put("prefix_hit_ratio", None, 0.5)
    bill.put_cost()
    put_info(
        sc,
        [
            (0, hosted_build("frontier-large", "2025-08-07", "latest")),
            (t0, hosted_build("frontier-large", "2025-11-13", "latest")),
        ],
    )
    return sc, Case(
        sc.name,
        "1 cost: confounder (real price change)",
        "The application calls the provider's 'latest' alias. The provider moved the alias to a "
        "new snapshot priced 1.6x higher per token; the gateway's build_info shows the model "
        "version changing at the onset. Token volume barely moved (+3% input from a finer "
        "tokenizer, +8% output) and the cache hit ratio is steady.",
        170,
        "cost_up",
        {"cause": "price_change"},
    )


@case
def cost_list_price_rise() -> tuple[Scene, Case]:
    sc = Scene("field-cost-hosted-list-price-rise-at-midnight", 60, 240, "2026-07-31T22:00:00Z", 0.01)
    T, t0 = sc.T, sc.step(120)
    vol = slow_wave(sc, 0.2, 0.2, 1.4)
    prompt, gen = 48000 * vol, 3100 * vol
    hit = ramp(T, t0, t0 + 20, 0.62, 0.58)  # the overnight tenant mix
    p_in = ramp(T, t0, t0, 0.0025, 0.003)
    bill = Bill(sc, prompt, gen, hit, p_in, 0.1, 4.0)
    sc.put("request_rate", None, 15 * vol)
    sc.put("prompt_tokens_rate", None, prompt)
    sc.put("generation_tokens_rate", None, gen)
    sc.put("prefix_hit_ratio", None, hit)
    sc.put("list_price_per_1k_tokens", None, p_in, noise=False)
    bill.put_cost()
    put_info(sc, [(0, hosted_build("frontier-medium", "2025-04-14"))])
    return sc, Case(
        sc.name,
        "1 cost: confounder (real price change)",
        "The provider's new price table took effect at midnight UTC: input list price 0.0025 -> "
        "0.003 per 1k (output kept at 4x). The gateway exports the list price. Same model, same "
        "volume; the overnight tenant mix lowers the cache hit ratio a little (0.62 -> 0.58), "
        "which alone would move the blended price by ~2%.",
        200,
        "cost_up",
        {"cause": "price_change"},
    )


@case
def cost_new_tenant_volume() -> tuple[Scene, Case]:
    sc = Scene("field-cost-hosted-new-tenant-doubles-volume", 60, 240, "2026-09-08T08:00:00Z", 0.01)
    T, t0 = sc.T, sc.step(130)
    vol = slow_wave(sc, 0.1, 0.25)
    on = np.arange(T) >= t0
    ingest_in = 41000 * vol * ramp(T, t0, t0 + 15, 0.2, 1.0)
    app_in, app_out = 45000 * vol, 2800 * vol
    ingest_out = 2500 * vol * ramp(T, t0, t0 + 15, 0.2, 1.0)
    prompt = app_in + np.where(on, ingest_in, 0)
    gen = app_out + np.where(on, ingest_out, 0)
    bill = Bill(sc, prompt, gen, np.full(T, 0.5), np.full(T, 0.003), 0.1, 4.0)
    sc.put("prompt_tokens_rate", {"tenant": "assistant"}, app_in)
    sc.put("generation_tokens_rate", {"tenant": "assistant"}, app_out)
    sc.put("prompt_tokens_rate", {"tenant": "doc-ingest"}, ingest_in, on)
    sc.put("generation_tokens_rate", {"tenant": "doc-ingest"}, ingest_out, on)
    sc.put("request_rate", None, 14 * vol * (1 + 0.9 * np.where(on, ramp(T, t0, t0 + 15, 0.2, 1.0), 0)))
    sc.put("prefix_hit_ratio", None, 0.5)
    bill.put_cost()
    put_info(sc, [(0, hosted_build("frontier-large", "2025-08-07"))])
    return sc, Case(
        sc.name,
        "1 cost: confounder (volume, not price)",
        "A document-ingest tenant was onboarded onto the shared hosted model; its series appear "
        "at the onset. Spend nearly doubled, but the price per 1k tokens is flat: the same model, "
        "list price and cache hit ratio, just more tokens.",
        200,
        "cost_up",
        {"cause": "token_volume_growth"},
    )


# ---- 2. a release that regresses speed or correctness


def surge_rollout(
    f: Fleet,
    t0: int,
    stagger_min: float,
    load_min: float,
    build: Labels | None = None,
    config: Labels | None = None,
    slots: list[int] | None = None,
) -> list[int]:
    """A Deployment rollout with a surge: each new pod loads beside the old one, then takes over.
    Returns the step each slot's new pod became ready."""
    sc = f.sc
    rs = rs_hash(sc.rng)
    f.updated = np.zeros(f.T) if f.updated is None else f.updated
    ready = []
    for i, s in enumerate(range(f.S) if slots is None else slots):
        tc = t0 + i * sc.steps(stagger_min)
        tr = tc + sc.steps(load_min)
        f.replace_pod(s, tc, tr, build=build, config=config, rs=rs)
        f.updated += (np.arange(f.T) >= tc).astype(float)
        ready.append(tr)
    return ready


@case
def release_decode_tail_after_engine_upgrade() -> tuple[Scene, Case]:
    sc = Scene("field-release-engine-upgrade-decode-tail-5x", 15, 150, "2026-04-14T08:00:00Z")
    f = Fleet(sc, L70_H100, 8)
    ready = surge_rollout(f, sc.step(70), 1.5, 4.0, build={"engine_version": "0.10.2"})
    for s, tr in enumerate(ready):
        f.f_dec[s, tr:] *= 1.1
    g = f.derive()
    for s, tr in enumerate(ready):
        g["tpot_p99_seconds"][s, tr:] *= 5.0
    f.recompose()
    f.emit(skip=NO_BUCKET | {"queue_time_p99_seconds"})
    f.emit_fleet()
    return sc, Case(
        sc.name,
        "2 release regresses speed",
        "An engine upgrade (vLLM 0.10.1.1 -> 0.10.2) rolled through eight 70B replicas with a "
        "surge, no errors and no restarts. The new image's attention backend does not support the "
        "nodes' driver and falls back to a path without CUDA graphs for large batches: TPOT P99 is "
        "5x, the median ~1.1x. Arrivals, prompt lengths and the running batch are as before.",
        115,
        "tpot_slow",
        {"cause": "version_change", "forbidden": ["scale_out"]},
    )


@case
def release_fp8_checkpoint_on_ampere() -> tuple[Scene, Case]:
    sc = Scene("field-release-fp8-checkpoint-on-a100-prefill-slow", 15, 180, "2026-08-25T09:30:00Z")
    p = replace(Q32_A100, engine="vllm", engine_version="0.10.1.1")
    f = Fleet(sc, p, 6, statefulset=True)
    f.updated = np.zeros(sc.T)
    t = sc.step(80)
    # A StatefulSet rolling update: one pod at a time, deleted (drained) and recreated under its name.
    for s in reversed(range(6)):
        tc, tr = t + sc.steps(0.5), t + sc.steps(5)
        f.replace_pod(s, tc, tr, t_old_gone=t, build={"quantization": "fp8", "model_version": "2025-01"})
        f.updated += (np.arange(sc.T) >= tc).astype(float)
        f.f_pre[s, tr:] *= 2.6
        f.f_dec[s, tr:] *= 1.3
        t = tr + sc.steps(0.5)
    f.derive()
    f.emit()
    f.emit_fleet()
    return sc, Case(
        sc.name,
        "2 release regresses speed",
        "To save memory the team swapped the 32B bf16 checkpoint for an fp8 one on A100s. A100s "
        "have no fp8 tensor cores, so the engine runs weight-only fp8 kernels: prefill is ~2.6x "
        "slower, decode ~1.3x. The StatefulSet rolled one pod at a time with a drain (ready 5 of "
        "6 for five minutes each, no errors); TTFT stayed up after the rollout finished. "
        "Arrivals and prompt lengths are unchanged.",
        150,
        "ttft_slow",
        {"cause": "version_change", "forbidden": ["scale_out"]},
    )


@case
def release_tool_parser_errors() -> tuple[Scene, Case]:
    sc = Scene("field-release-sglang-tool-parser-500s", 30, 150, "2026-10-06T14:00:00Z")
    f = Fleet(sc, Q32_A100, 4)
    ready = surge_rollout(f, sc.step(85), 3.0, 4.0, build={"engine_version": "0.4.10.post1"})
    for s, tr in enumerate(ready):
        f.err[s, tr:] = 0.055
    f.derive()
    f.emit(skip=NO_BUCKET | {"prefix_hit_ratio"}, groups={"engine", "kube", "info"})
    f.emit_fleet({"gateway_errors"})
    return sc, Case(
        sc.name,
        "2 release regresses correctness",
        "An SGLang upgrade (0.4.9.post2 -> 0.4.10.post1) rolled with a surge onto four replicas. "
        "Its new tool-call parser raises on nested JSON arguments the model emits in ~5% of "
        "answers, and the server returns 500. Latency, batch, prompts and arrivals are unchanged; "
        "no restarts. No GPU metrics on this cluster.",
        125,
        "errors",
        {"cause": "version_change"},
    )


@case
def confounder_batch_grew_after_max_num_seqs() -> tuple[Scene, Case]:
    sc = Scene("field-confounder-max-num-seqs-raised-batch-grew", 15, 150, "2026-04-28T10:00:00Z")
    f = Fleet(sc, M7_L40S, 6)
    ready = surge_rollout(f, sc.step(80), 1.0, 2.5, config={"max_num_seqs": "384"})
    g = f.derive()
    # A closed-loop evaluation job (a fixed number of client workers) shares the fleet with chat
    # traffic: before, the batch sits at its cap with work waiting; after, the cap admits it all.
    for s, tr in enumerate(ready):
        k = np.arange(sc.T) >= tr
        ramp_in = np.clip((np.arange(sc.T) - tr) / sc.steps(3), 0, 1)
        # The job would fill 296 slots; preemption holds the batch to what KV can keep.
        fits = 0.985 * M7_L40S.kv_tokens / (630 + 76)
        running = 124 + (min(296, fits) - 124) * ramp_in
        step = M7_L40S.d0 * (1 + running / M7_L40S.b0)
        g["requests_running"][s] = running
        g["queue_waiting"][s] = np.where(k, 30 * (1 - ramp_in) + 1.5, 30.0)
        g["queue_time_p99_seconds"][s] = np.where(k, 1.7 * (1 - ramp_in) + 0.15, 1.7)
        g["tpot_p50_seconds"][s] = step
        g["tpot_p99_seconds"][s] = step * 1.9
        kv = np.clip(running * (630 + 76) / M7_L40S.kv_tokens, 0, 0.995)
        g["kv_usage_ratio"][s] = kv
        g["preemption_rate"][s] = np.where(kv > 0.95, (kv - 0.95) * 40, 0.0)
        served = running / (152 * step + 0.5)
        g["request_rate"][s] = served
        g["prompt_tokens_rate"][s] = served * 630
        g["generation_tokens_rate"][s] = served * 152
        g["gpu_util_ratio"][s] = np.full(sc.T, 0.97)
    f.recompose()
    f.emit()
    f.emit_fleet()
    return sc, Case(
        sc.name,
        "2 confounder: batch grew after a config change, no release",
        "To get more throughput for a nightly evaluation job sharing the fleet, max_num_seqs was "
        "raised from 128 to 384 (a config-only rollout with a surge; same image and model). The "
        "job's workers had been waiting behind the cap; now they all run: the running batch grew "
        "~2x, every decode step got slower on every replica (TPOT ~2x), KV filled to "
        "preemption, while completed requests rose only ~20%.",
        120,
        "tpot_slow",
        {"cause": "batch_oversized", "forbidden": ["scale_out", "raise_max_num_seqs"]},
    )


# ---- 3. decode starved by prefill-first scheduling, without long prompts


def hold_baseline(g: dict[str, np.ndarray], names: list[str], t0: int) -> None:
    """Keep signals at their pre-onset level (the scheduler drains the queue first)."""
    for name in names:
        base = np.median(g[name][:, max(t0 - 40, 0) : t0], axis=1, keepdims=True)
        g[name][:, t0:] = base


@case
def starve_v0_summaries() -> tuple[Scene, Case]:
    sc = Scene("field-starvation-v0-prefill-first-summaries", 15, 160, "2026-03-17T12:00:00Z")
    p = replace(L70_H100, engine_version="0.6.6.post1", chunked=False, batched_tokens=32768)
    f = Fleet(sc, p, 16)
    T, t0 = sc.T, sc.step(95)
    on = ramp(T, t0, t0 + sc.steps(8), 0.0, 1.0)
    f.demand = f.demand * (1 + 0.15 * on)
    f.P = f.P * (1 + 0.58 * on)  # P95 ~3.1k -> ~4.9k
    f.mean_frac = 0.42 + 0.13 * on * np.ones((f.S, 1))
    f.f_dec = f.f_dec * (1 + 0.5 * on)
    g = f.derive()
    hold_baseline(g, ["queue_waiting", "queue_time_p99_seconds"], t0)
    g["tpot_p99_seconds"] *= 1 + 4.5 * on
    g["prefill_time_p99_seconds"] *= 1 + 1.2 * on
    f.recompose()
    f.emit(skip=NO_BUCKET | {"e2e_p99_seconds"})
    f.emit_fleet()
    return sc, Case(
        sc.name,
        "3 decode starvation without long prompts",
        "A 70B fleet still on the V0 engine with chunked prefill off (prefill-first: whenever "
        "requests wait, a prefill-only step of up to 32k tokens runs and every decode pauses). A "
        "summarisation tenant added ~15% more requests with 4-6k-token prompts (P95 3.1k -> 4.9k, "
        "nothing near the long-context threshold). Prompt tokens per second roughly doubled; the "
        "waiting queue stays short because prefill always goes first, while TPOT P99 rose ~5x. "
        "KV has room and nothing is preempted.",
        135,
        "tpot_slow",
        {"cause": "prefill_interference", "forbidden": ["scale_out"]},
    )


@case
def starve_sglang_rag_mix() -> tuple[Scene, Case]:
    sc = Scene("field-starvation-sglang-rag-mix-flat-p95", 30, 150, "2026-11-03T15:00:00Z")
    p = replace(Q32_A100, chunked=False)
    f = Fleet(sc, p, 6)
    T, t0 = sc.T, sc.step(80)
    on = ramp(T, t0, t0 + sc.steps(15), 0.0, 1.0)
    f.demand = f.demand * (1 + 0.2 * on)
    f.P = f.P * (1 + 0.08 * on)
    f.mean_frac = 0.42 + 0.16 * on * np.ones((f.S, 1))
    f.h = f.h - 0.05 * on
    f.f_dec = f.f_dec * (1 + 0.4 * on)
    f.maxb[:] = 8192.0
    g = f.derive()
    hold_baseline(g, ["queue_waiting", "queue_time_p99_seconds"], t0)
    g["tpot_p99_seconds"] *= 1 + 3.0 * on
    g["prefill_time_p99_seconds"] *= 1 + 0.8 * on
    f.recompose()
    f.emit(skip=frozenset())
    f.emit_fleet()
    return sc, Case(
        sc.name,
        "3 decode starvation without long prompts",
        "An SGLang fleet (32B on A100 pairs) runs with chunked prefill disabled to squeeze out "
        "throughput; its scheduler runs waiting prefills before decode. A retrieval tenant grew "
        "to ~20% more requests whose prompts sit near the usual P95 (~4k tokens): P95 barely "
        "moved, the highest prompt bucket stayed at 8192, but prompt tokens per second rose ~1.6x. "
        "TPOT P99 rose ~6x with KV low, no preemptions and a queue that does not grow.",
        125,
        "tpot_slow",
        {"cause": "prefill_interference", "forbidden": ["scale_out"]},
    )


@case
def confounder_traffic_burst_retry_storm() -> tuple[Scene, Case]:
    sc = Scene("field-confounder-retry-storm-burst", 15, 120, "2026-06-23T18:00:00Z")
    f = Fleet(sc, L8_H100, 12)
    T, t0 = sc.T, sc.step(90)
    f.demand = f.demand * ramp(T, t0, t0 + sc.steps(2), 1.0, 2.4)
    f.derive()
    f.emit()
    f.emit_fleet()
    return sc, Case(
        sc.name,
        "3 confounder: traffic burst",
        "A partner's client hit a bug and retried every request up to five times without backoff: "
        "arrivals jumped 2.4x within two minutes. Queues grew on every replica at once; TTFT and "
        "then TPOT rose as the batch filled, and prompt tokens per second and prefill time rose "
        "with the arrivals. KV and GPUs were healthy before it; prompts are their usual length.",
        97,
        "tpot_slow",
        {"cause": "traffic_burst", "forbidden": ["scale_out"]},
    )


# ---- 4. the tail of prompt lengths


def bucket_series(
    sc: Scene,
    S: int,
    base: float,
    before_alt: float,
    after: float,
    after_alt: float,
    t0: int,
    p_alt_before: float,
    p_alt_after: float,
) -> np.ndarray:
    """The highest occupied bucket per 5m window: it holds for the window, then is re-drawn."""
    w = sc.steps(5)
    out = np.empty((S, sc.T))
    for s in range(S):
        for start in range(0, sc.T, w):
            late = start >= t0
            alt = sc.rng.random() < (p_alt_after if late else p_alt_before)
            val = (after_alt if alt else after) if late else (before_alt if alt else base)
            out[s, start : start + w] = val
    return out


@case
def tail_agent_repo_context() -> tuple[Scene, Case]:
    sc = Scene("field-tail-agent-sends-whole-repo-100k", 15, 140, "2026-05-05T10:00:00Z")
    f = Fleet(sc, L70_H100, 8)
    T, t0 = sc.T, sc.step(85)
    on = ramp(T, t0, t0 + sc.steps(5), 0.0, 1.0)
    f.longr = f.longr + 0.0045 * on
    f.maxb = bucket_series(sc, 8, 8192, 16384, 131072, 65536, t0, 0.15, 0.2)
    f.mean_frac = f.mean_frac * (1 + 0.44 * on)  # 0.5% of requests at ~115k tokens
    g = f.derive()
    g["prompt_tokens_p95"] = f.P.copy()  # the P95 does not see half a percent
    g["prefill_time_p99_seconds"] *= 1 + 7 * on
    g["queue_time_p99_seconds"] += 2.8 * on
    g["tpot_p99_seconds"] *= 1 + 1.6 * on
    g["tpot_p50_seconds"] *= 1 + 0.15 * on
    g["kv_usage_ratio"] = np.clip(g["kv_usage_ratio"] + 0.13 * on, 0, 1)
    g["gpu_util_ratio"] = np.clip(g["gpu_util_ratio"] + 0.2 * on, 0, 0.99)
    f.recompose()
    f.emit(skip=frozenset())
    f.emit_fleet()
    return sc, Case(
        sc.name,
        "4 prompt-length tail",
        "A coding agent started attaching the whole repository to some calls: about one request "
        "in two hundred now carries 100-130k tokens (long-context share 0.0005 -> 0.005, highest "
        "prompt bucket 8192 -> 131072), while the P95 prompt length does not move. Each such "
        "prefill holds a 70B replica for ~14 s of chunks: everyone's prefill and queue time "
        "stretch, TTFT P99 rose ~8x; TPOT P99 rose too. Request rate unchanged.",
        120,
        "ttft_slow",
        {"cause": "long_prompt_surge", "forbidden": ["scale_out"]},
    )


@case
def tail_pdf_upload_large_fleet() -> tuple[Scene, Case]:
    sc = Scene("field-tail-pdf-uploads-128k-sparse", 60, 200, "2026-09-29T06:00:00Z", 0.01)
    f = Fleet(sc, L8_H100, 32)
    T, t0 = sc.T, sc.step(120)
    on = ramp(T, t0, t0 + 3, 0.0, 1.0)
    f.demand = f.demand * slow_wave(sc, 0.12, 0.3, -0.5)
    f.longr = np.full((f.S, T), 0.0004) + 0.0036 * on
    f.maxb = bucket_series(sc, 32, 16384, 32768, 131072, 65536, t0, 0.1, 0.25)
    f.mean_frac = f.mean_frac * (1 + 0.4 * on)
    g = f.derive()
    g["prompt_tokens_p95"] = f.P.copy()
    g["prefill_time_p99_seconds"] *= 1 + 5 * on
    g["queue_time_p99_seconds"] += 1.6 * on
    g["tpot_p99_seconds"] *= 1 + 1.0 * on
    g["kv_usage_ratio"] = np.clip(g["kv_usage_ratio"] + 0.08 * on, 0, 1)
    f.recompose()
    # The long-context share is a recording rule evaluated every other minute.
    f.emit(skip={"long_prompt_ratio", "e2e_p99_seconds"}, groups={"engine", "kube", "info"})
    for s in range(f.S):
        sc.put("long_prompt_ratio", {"instance": f.names[s][0][1]}, f.longr[s], every=2)
    f.emit_fleet()
    return sc, Case(
        sc.name,
        "4 prompt-length tail",
        "A chat product enabled PDF upload with a 128k context; fewer than 0.5% of requests carry "
        "a whole document, but each holds an 8B replica for seconds of prefill. 32 replicas, "
        "60 s scrapes, no GPU metrics; the long-context share comes from a recording rule "
        "evaluated every other minute. Highest prompt bucket 16384 -> 131072, P95 flat, TTFT "
        "P99 up ~6x under the daily swing.",
        170,
        "ttft_slow",
        {"cause": "long_prompt_surge", "forbidden": ["scale_out"]},
    )


# ---- 5. a CUDA out-of-memory crash ends with reason Error, exit code 1


def creep_before(f: Fleet, s: int, t: int, minutes: float, top: float) -> None:
    """GPU memory climbing past the KV pool (activations, sampler buffers) before a crash at t."""
    n = f.sc.steps(minutes)
    lo = float(np.nanmedian(f.mem[s, max(t - 3 * n, 0) : t]))
    f.mem[s, t - n : t] = np.linspace(lo, top, n)


@case
def cuda_oom_sampler_n8() -> tuple[Scene, Case]:
    sc = Scene("field-cuda-oom-exit-1-sampler-spike", 15, 120, "2026-02-24T09:00:00Z")
    p = replace(Q32_A100, engine="vllm", engine_version="0.10.1.1", mem_util=0.95)
    f = Fleet(sc, p, 4, statefulset=True)
    for s, minute in [(1, 58), (3, 66), (1, 83), (0, 95)]:
        t = sc.step(minute)
        creep_before(f, s, t, 2.0, 0.988 + 0.003 * sc.rng.random())
        f.crash(s, t, sc.steps(4.5), "Error", 1)
    f.derive()
    f.emit(groups={"engine", "dcgm", "kube", "info", "term"})
    f.emit_fleet({"gateway_errors"})
    return sc, Case(
        sc.name,
        "5 CUDA OOM, reason Error",
        "A client started sending n=8 with top-20 logprobs on 16k-token prompts. With "
        "gpu_memory_utilization 0.95 the KV pool leaves ~4 GB per GPU; the sampler's buffers "
        "push the framebuffer past 98% and PyTorch raises 'CUDA out of memory'. The engine "
        "process exits with code 1 and the container's last termination reason is Error, not "
        "OOMKilled. Four crashes on three of four replicas in forty minutes; each reload takes "
        "~4.5 minutes and fails the streams in flight.",
        100,
        "errors",
        {"cause": "engine_oom", "forbidden": ["raise_gpu_memory_utilization", "scale_out"]},
    )


@case
def cuda_oom_l4_crash_loop() -> tuple[Scene, Case]:
    sc = Scene("field-cuda-oom-l4-retry-crash-loop", 30, 150, "2026-07-07T20:00:00Z")
    f = Fleet(sc, M7_L4, 2, statefulset=True)
    f.term_absent_before_first = True
    for s, minute, down in [(0, 70, 3.5), (0, 79, 4.0), (1, 88, 3.5), (0, 93, 5.0)]:
        t = sc.step(minute)
        creep_before(f, s, t, 1.5, 0.982 + 0.006 * sc.rng.random())
        f.crash(s, t, sc.steps(down), "Error", 1)
    f.derive()
    f.emit(
        skip=NO_BUCKET | {"prefix_hit_ratio", "queue_time_p99_seconds"},
        groups={"engine", "dcgm", "kube", "info", "term"},
    )
    f.emit_fleet({"gateway_errors"})
    return sc, Case(
        sc.name,
        "5 CUDA OOM, reason Error",
        "Two replicas of a 7B AWQ model on 24 GB L4s, gpu_memory_utilization 0.94. A client "
        "retries one 28k-token request with n=4 after every failure; its prefill activations do "
        "not fit beside the KV pool, the engine dies with a CUDA OOM (exit code 1, reason Error) "
        "and the retry lands on the next ready replica. The termination series exist only once a "
        "container has terminated.",
        100,
        "errors",
        {"cause": "engine_oom", "forbidden": ["raise_gpu_memory_utilization", "scale_out"]},
    )


@case
def confounder_crash_loop_bad_config() -> tuple[Scene, Case]:
    sc = Scene("field-confounder-exit-1-crash-loop-bad-config", 15, 120, "2026-10-20T10:00:00Z")
    n, extra = 8, 4
    f = Fleet(sc, L8_H100, n + extra)
    T, t0 = sc.T, sc.step(95)
    f.desired[:] = n
    f.demand = np.full(T, L8_H100.rate * n)
    f.updated = np.zeros(T)
    old_gone = [0, 1]
    for s in range(n, n + extra):  # not yet created
        f.present[s, :] = False
        f.up[s, :] = False
        f.ready[s, :] = False
    for s in old_gone:  # maxUnavailable 25%: terminated at once, streams cut
        f.up[s, t0:] = False
        f.ready[s, t0:] = False
        f.present[s, t0:] = False
        f.crashes.append((s, t0))
    rs = rs_hash(sc.rng)
    backoff = [10, 20, 40, 80, 160, 300]
    for i, s in enumerate(range(n, n + extra)):
        f.names[s] = [(0, pod_name(sc.rng, L8_H100.prefix, rs))]
        tc = t0 + i % 2
        f.present[s, tc:] = True
        f.mem[s, :] = 0.004
        f.updated += (np.arange(T) >= tc).astype(float)
        # Start, read the model config, fail argument validation ~25 s in; back off and retry.
        t_sec = 25.0
        for b in backoff:
            t = tc + int(t_sec // sc.dt)
            if t >= T:
                break
            f.restarts[s] += window(T, t, sc.steps(5))
            f.term[s, t:] = 1.0
            f.exitc[s, t:] = 1.0
            f.mem[s, max(t - 1, 0) : t + 1] = 0.021  # a CUDA context, briefly
            t_sec += b + 25.0
    f.derive()
    f.emit(groups={"engine", "dcgm", "kube", "info", "term"})
    f.emit_fleet({"gateway_errors"})
    return sc, Case(
        sc.name,
        "5 confounder: exit-code-1 crash loop that is not memory",
        "A config change turned chunked prefill off and set max_num_batched_tokens to 4096 with a "
        "32k max_model_len; vLLM refuses that at start-up (ValueError) and exits with code 1. "
        "The rollout (maxSurge and maxUnavailable 25%) cut two old pods' streams, and the four "
        "new pods crash-loop with reason Error before allocating any GPU memory. Ready 8 -> 6; "
        "the survivors take the load. gpu_memory_utilization is the usual 0.90.",
        99,
        "errors",
        {"cause": "rollout_disruption"},
        [
            "Expected rollout_disruption: VOCABULARY's 'restarts across replicas in a rolling wave,",
            "errors during it' is what the evidence shows (restarts only on the new template's pods,",
            "replicas_updated 0 -> 4, streams cut as old pods went). Not engine_oom: no OOM kill, memory",
            "near empty, gpu_memory_utilization 0.90. replica_down is the mechanism, not the cause.",
        ],
    )


@case
def confounder_exit_1_after_xid() -> tuple[Scene, Case]:
    sc = Scene("field-confounder-exit-1-after-xid-79", 30, 120, "2026-12-01T03:00:00Z")
    f = Fleet(sc, L70_H100, 6, statefulset=True)
    T, s, t = sc.T, 4, sc.step(71)
    f.xid[s, 2, t:] = 79.0
    f.gpu_gone[s, 2, t + 1 :] = True  # fell off the bus: DCGM loses it
    f.crash(s, t, T - t, "Error", 1)  # 'CUDA error: unspecified launch failure'
    f.mem[s, t:] = 0.0
    # The kubelet restarts it; CUDA init fails on the lost device every time.
    for minute in (72.5, 74, 77, 82, 91, 101, 111):
        k = sc.step(minute)
        if k < T:
            f.restarts[s] += window(T, k, sc.steps(5))
    f.derive()
    f.emit(groups={"engine", "dcgm", "kube", "info", "term"})
    f.emit_fleet({"gateway_errors"})
    return sc, Case(
        sc.name,
        "5 confounder: exit-code-1 crash loop that is a GPU fault",
        "One GPU of a 70B replica (tensor parallel 4) fell off the bus (XID 79). The engine died "
        "with 'CUDA error: unspecified launch failure', exit code 1, reason Error, and every "
        "restart fails CUDA initialisation on the lost device. Memory was at its usual 93%.",
        85,
        "errors",
        {"cause": "gpu_fault"},
    )


# ---- 6. a rollout that removes the only replica


def edge_series(sc: Scene, f: Fleet, base_latency: float, queue: np.ndarray | None = None) -> None:
    """The gateway in front of the fleet: its latency, upstream errors and routed backends."""
    ready = f.ready.sum(axis=0).astype(float)
    ttft = np.where(f.up, f.sig["ttft_p99_seconds"], 0.0).max(axis=0)
    none = ready == 0
    sc.put("gateway_latency_p99_seconds", None, np.where(none, 30.0, base_latency + ttft))
    sc.put("upstream_error_ratio", None, np.where(none, 1.0, 0.001))
    sc.put("backends_routed", None, ready, noise=False)
    if queue is not None:
        sc.put("gateway_queue", None, queue)


@case
def single_replica_max_unavailable() -> tuple[Scene, Case]:
    sc = Scene("field-rollout-single-replica-max-unavailable-1", 15, 90, "2026-03-31T16:00:00Z")
    f = Fleet(sc, L8_H100, 1)
    T, t0 = sc.T, sc.step(60)
    f.demand[:] = 6.0
    f.updated = (np.arange(T) >= t0 + sc.steps(0.5)).astype(float)
    f.replace_pod(
        0,
        t0 + sc.steps(0.5),
        t0 + sc.steps(5.5),
        t_old_gone=t0,
        build={"engine_version": "0.10.2"},
        rs=rs_hash(sc.rng),
    )
    f.crashes.append((0, t0))
    f.derive()
    f.emit()
    f.emit_fleet({"gateway_errors"})
    edge_series(sc, f, 0.02)
    return sc, Case(
        sc.name,
        "6 rollout removes the only replica",
        "A one-replica internal fleet, Deployment strategy maxSurge 0 / maxUnavailable 1 (no spare "
        "GPU for a surge). An engine upgrade deleted the only pod before its successor existed; "
        "the new pod pulled its image and loaded for five minutes. Ready 1 -> 0, the gateway "
        "answered 503 for every request; no container restarted.",
        67,
        "errors",
        {"cause": "rollout_disruption"},
    )


@case
def single_replica_surge_pending() -> tuple[Scene, Case]:
    sc = Scene(
        "field-rollout-single-replica-surge-pending-then-deleted", 60, 150, "2026-08-11T07:00:00Z", 0.01
    )
    f = Fleet(sc, L70_H100, 1)
    T = sc.T
    t_surge, t_del = sc.step(70), sc.step(95)
    f.demand[:] = 3.0
    f.updated = (np.arange(T) >= t_surge).astype(float)  # the Pending surge pod is already 'updated'
    f.replace_pod(
        0,
        t_del + 1,
        t_del + sc.steps(9),
        t_old_gone=t_del,
        build={"model_version": "2025-02"},
        rs=rs_hash(sc.rng),
    )
    f.crashes.append((0, t_del))
    f.derive()
    f.emit(skip=NO_BUCKET | {"prefix_hit_ratio"})
    f.emit_fleet({"gateway_errors"})
    none = f.ready.sum(axis=0) == 0
    sc.put("timeout_ratio", None, np.where(none, 0.85, 0.0005))
    edge_series(sc, f, 0.05, np.where(none, 240.0, 0.4))
    return sc, Case(
        sc.name,
        "6 rollout removes the only replica",
        "A fine-tuned checkpoint was rolled to a one-replica 70B fleet with maxSurge 1. The surge "
        "pod stayed Pending for want of four free GPUs; after 25 minutes an operator deleted the "
        "old pod to make room. The new pod then loaded for nine minutes with nothing serving: "
        "the gateway queued requests and timed most of them out. 60 s scrapes.",
        106,
        "errors",
        {"cause": "rollout_disruption"},
    )


# ---- 7. one replica's throttled GPU under a modest fleet-wide rise


@case
def throttle_fan_failure_morning_ramp() -> tuple[Scene, Case]:
    sc = Scene("field-throttle-fan-failure-during-morning-ramp", 30, 180, "2026-01-13T06:30:00Z")
    f = Fleet(sc, L70_H100, 8, statefulset=True)
    T = sc.T
    f.demand = f.demand * ramp(T, sc.step(70), sc.step(130), 1.0, 1.22)
    s, gpu, t = 5, 1, sc.step(110)
    heat = ramp(T, t, t + sc.steps(10), 0.0, 1.0)
    f.temp_add[s, gpu] = 24 * heat
    hot = np.arange(T) >= t + sc.steps(6)
    f.throttle[s, gpu] = hot.astype(float)
    f.power_scale[s, gpu] = np.where(hot, 0.72, 1.0)
    f.f_dec[s] *= 1 + 1.3 * heat  # tensor parallel: the slowest GPU paces all four
    f.f_pre[s] *= 1 + 1.1 * heat
    f.derive()
    f.emit()
    f.emit_fleet()
    return sc, Case(
        sc.name,
        "7 one throttled GPU beats a modest rise",
        "A chassis fan failed on one node during the morning ramp (arrivals up ~22% over an "
        "hour). One GPU of replica 5's tensor-parallel group climbed ~24 C into thermal slowdown; "
        "the whole replica decodes at its pace (TPOT ~2.3x), the seven others are only a little "
        "busier than at dawn.",
        150,
        "tpot_slow",
        {"cause": "gpu_throttling", "forbidden": ["scale_out"]},
    )


@case
def throttle_power_brake_marketing_push() -> tuple[Scene, Case]:
    sc = Scene("field-throttle-power-brake-64-replicas-email-push", 30, 120, "2026-04-02T13:00:00Z")
    f = Fleet(sc, L8_H100, 64)
    T = sc.T
    f.demand = f.demand * ramp(T, sc.step(70), sc.step(73), 1.0, 1.25)
    s, t = 37, sc.step(72)
    on = np.arange(T) >= t
    f.throttle[s, 0] = on.astype(float)
    f.temp_add[s, 0] = np.where(on, 7.0, 0.0)
    f.power_scale[s, 0] = np.where(on, 0.45, 1.0)
    f.f_dec[s, t:] *= 3.2
    f.f_pre[s, t:] *= 3.0
    f.derive()
    f.emit(skip=NO_BUCKET | {"request_rate"})
    sc.put("request_rate", None, f.demand)
    f.emit_fleet()
    return sc, Case(
        sc.name,
        "7 one throttled GPU beats a modest rise",
        "A marketing email went out and arrivals rose ~25% within three minutes across a "
        "64-replica 8B fleet. Two minutes later one node's PSU fault asserted the GPU's hardware "
        "power brake: clocks pinned low, that replica's TPOT ~3.5x. Arrivals are only known at "
        "the gateway (no per-replica request rate). No symptom given.",
        95,
        None,
        {"cause": "gpu_throttling", "forbidden": ["scale_out"]},
    )


# ---- 8. chains


@case
def chain_contract_review_v0() -> tuple[Scene, Case]:
    sc = Scene("field-chain-contract-review-interference", 15, 150, "2026-05-26T09:00:00Z")
    p = replace(M7_L40S, engine_version="0.6.6.post1", chunked=False, batched_tokens=32768, rate=3.5)
    f = Fleet(sc, p, 12)
    T, t0 = sc.T, sc.step(90)
    on = ramp(T, t0, t0 + sc.steps(6), 0.0, 1.0)
    f.demand = f.demand * (1 + 0.05 * on)
    f.longr = 0.01 + 0.05 * on * np.ones((f.S, 1))
    f.P = f.P * (1 + 13 * on)  # 6% of requests at ~20k: the P95 lands among them
    f.mean_frac = 0.42 / (1 + 13 * on) * (1 + 1.85 * on)  # mean 630 -> ~1790 tokens
    f.h = f.h - 0.05 * on
    f.maxb = np.where(on > 0.5, 32768.0, 8192.0) * np.ones((f.S, 1))
    f.f_dec = f.f_dec * (1 + 0.6 * on)
    f.derive()
    f.emit(skip=frozenset())
    f.emit_fleet()
    return sc, Case(
        sc.name,
        "8 chain: interference fed by a long-prompt surge",
        "A legal tenant launched contract review: 6% of requests now carry ~20k-token contracts "
        "(long-context share 0.01 -> 0.06, P95 prompt 1.5k -> ~21k, highest bucket 8192 -> "
        "32768). The V0 engine runs with chunked prefill off, so each contract's prefill is one "
        "step of over a second and every stream on that replica stalls behind it: TPOT P99 up "
        "more than tenfold with KV far from full and no preemptions.",
        125,
        "tpot_slow",
        {"cause": "prefill_interference", "also": ["long_prompt_surge"], "forbidden": ["scale_out"]},
        [
            "Top: prefill_interference. The symptom is TPOT, and long prompts alone do not stall",
            "decode: chunked prefill off is what turns each long prefill into a decode stall (the",
            "engine-layer mechanism that explains the TPOT tail). The surge is the feeder, named in",
            "`also`.",
        ],
    )


@case
def chain_rag_sglang_64() -> tuple[Scene, Case]:
    sc = Scene("field-chain-rag-16k-sglang-64-replicas", 60, 180, "2026-10-13T10:00:00Z", 0.01)
    p = replace(Q32_A100, chunked=False)
    f = Fleet(sc, p, 64)
    T, t0 = sc.T, sc.step(110)
    on = ramp(T, t0, t0 + 5, 0.0, 1.0)
    f.longr = 0.002 + 0.058 * on * np.ones((f.S, 1))
    f.P = f.P * (1 + 2.7 * on)  # P95 3.8k -> ~14k
    f.mean_frac = 0.42 / (1 + 2.7 * on) * (1 + 0.6 * on)
    f.maxb = np.where(on > 0.5, 16384.0, 8192.0) * np.ones((f.S, 1))
    f.f_dec = f.f_dec * (1 + 0.5 * on)
    f.derive()
    f.emit(skip={"prefill_time_p99_seconds", "e2e_p99_seconds", "queue_time_p99_seconds"})
    f.emit_fleet()
    return sc, Case(
        sc.name,
        "8 chain: interference fed by a long-prompt surge",
        "A 64-replica SGLang fleet (chunked prefill disabled) took on a retrieval feature that "
        "stuffs 12-16k tokens of passages into 6% of prompts. TPOT P99 rose many-fold while KV "
        "stayed low; this SGLang version exports no prefill or queue time histograms. 60 s "
        "scrapes.",
        160,
        "tpot_slow",
        {"cause": "prefill_interference", "also": ["long_prompt_surge"], "forbidden": ["scale_out"]},
        [
            "Top: prefill_interference, as in the contract-review case: the TPOT tail is the",
            "scheduler's doing; the long prompts are the feeder.",
        ],
    )


def lose_replicas(f: Fleet, slots: list[int], t: int) -> None:
    """Pods gone with their node (spot reclaim, a drain): every series of theirs ends."""
    for s in slots:
        f.up[s, t:] = False
        f.ready[s, t:] = False
        f.present[s, t:] = False
        f.crashes.append((s, t))


@case
def chain_spot_reclaim_fallback() -> tuple[Scene, Case]:
    sc = Scene("field-chain-spot-reclaim-fallback-serves", 15, 120, "2026-02-03T14:00:00Z")
    f = Fleet(sc, L70_H100, 8, statefulset=True)
    T, t0 = sc.T, sc.step(75)
    lose_replicas(f, [2, 3, 6, 7], t0)
    fb = ramp(T, t0 + sc.steps(1), t0 + sc.steps(4), 0.0, 0.35)
    f.demand = f.demand * (1 - fb)  # the gateway spills overflow to the fallback route
    f.derive()
    f.emit()
    f.emit_fleet({"fallback", "gateway_errors"})
    sc.put("fallback_ratio", None, np.maximum(fb, 0.0005))
    return sc, Case(
        sc.name,
        "8 chain: fallback serving for lost replicas",
        "The cloud reclaimed two spot nodes carrying four of eight 70B replicas; no GPUs are left "
        "to reschedule them. The gateway's overflow policy sends what the survivors cannot take "
        "to the 8B fallback route: ~35% of answers now come from the small model, returned as "
        "normal ones. Users report worse answers.",
        100,
        "quality_down",
        {"cause": "replica_down", "also": ["fallback_active"]},
        [
            "Top: replica_down. Fallback explains the worse answers, but it is the gateway doing what",
            "it was told once primary capacity went; the lost replicas explain the fallback, the",
            "survivors' queues and TTFT (DESIGN: the deepest cause wins). fallback_active is named too.",
        ],
    )


@case
def chain_drain_fallback_small_fleet() -> tuple[Scene, Case]:
    sc = Scene("field-chain-node-drain-fallback-three-replicas", 30, 120, "2026-09-15T11:00:00Z")
    f = Fleet(sc, Q32_A100, 3, statefulset=True)
    T, t0 = sc.T, sc.step(70)
    lose_replicas(f, [2], t0)
    fb = ramp(T, t0 + 2, t0 + sc.steps(5), 0.0, 0.12)
    f.demand = f.demand * (1 - fb)
    f.derive()
    f.emit(skip=NO_BUCKET | {"prefix_hit_ratio"})
    f.emit_fleet({"fallback", "gateway_errors"})
    sc.put("fallback_ratio", None, np.maximum(fb, 0.0005))
    return sc, Case(
        sc.name,
        "8 chain: fallback serving for lost replicas",
        "A node drain for a kernel upgrade evicted one of three 32B replicas (no disruption "
        "budget); its replacement is Pending, no node has two free A100s. The two survivors queue "
        "up and the gateway sends ~12% of requests to the fallback model once queues pass its "
        "threshold. Support tickets say answers got worse.",
        100,
        "quality_down",
        {"cause": "replica_down", "also": ["fallback_active"]},
        ["Top: replica_down, also fallback_active: the lost replica is why the fallback serves."],
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--out", required=True, help="folder to write the fixtures into")
    args = parser.parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    names: set[str] = set()
    for make in CASES:
        sc, c = make()
        assert c.name not in names, c.name
        names.add(c.name)
        sc.write(out, c)
    print(f"wrote {len(CASES)} fixtures to {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
