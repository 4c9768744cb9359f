"""A third generality corpus, from a generator that shares nothing with tools/synth.py.

AR(1)-correlated noise (which inflates change-point statistics the way real series do),
a 70B-model fleet and a small-model SGLang-like fleet with their own baselines, values to
three significant digits. `python -m tools.generality_indep [--out DIR]` writes sixteen
incidents (default bench/indep/), four of them at the edge (gateway, router, probes).
"""

import os
import sys

import numpy as np
import yaml

OUT = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "bench", "indep")
PHI = 0.8

FLEETS = {
    # per-replica baselines
    "70b": dict(
        model="llama-3.1-70b",
        engine="vllm",
        engine_version="0.10.2",
        quant="bf16",
        ttft=0.8,
        ttft50=0.3,
        tpot=0.045,
        tpot50=0.032,
        kv=0.75,
        rate=1.6,
        qwait=0.6,
        running=24,
        qtime=0.25,
        prefill=0.35,
        hit=0.62,
        ptok=3200,
        otok=700,
        longr=0.04,
        gpu_util=0.78,
        gpu_mem=0.92,
        temp=64,
        gpus=4,
        price=0.0009,
    ),
    "sgl": dict(
        model="qwen2.5-3b",
        engine="sglang",
        engine_version="0.4.9",
        quant="fp8",
        ttft=0.15,
        ttft50=0.05,
        tpot=0.012,
        tpot50=0.008,
        kv=0.42,
        rate=18.0,
        qwait=0.3,
        running=40,
        qtime=0.03,
        prefill=0.05,
        hit=0.55,
        ptok=1200,
        otok=350,
        longr=0.02,
        gpu_util=0.55,
        gpu_mem=0.88,
        temp=58,
        gpus=1,
        price=0.00012,
    ),
}


class Gen:
    def __init__(self, seed, fleet, n_rep, minutes, step_s):
        self.rng = np.random.default_rng(seed)
        self.f = FLEETS[fleet]
        self.fname = fleet
        self.n = n_rep
        self.step = step_s
        self.T = int(minutes * 60 / step_s) + 1
        self.t = np.arange(self.T) * step_s / 60.0  # minutes
        self.inst = [f"{'vllm' if self.f['engine'] == 'vllm' else 'sglang'}-{i}" for i in range(n_rep)]

    def ar(self, sigma):
        e = self.rng.normal(size=self.T)
        x = np.zeros(self.T)
        x[0] = e[0] * sigma
        s = sigma * np.sqrt(1 - PHI**2)
        for i in range(1, self.T):
            x[i] = PHI * x[i - 1] + s * e[i]
        return x

    def noisy(self, base, cv=0.05, off=0.03):
        """base: scalar or array; multiplicative AR(1) noise plus per-replica offset."""
        b = np.broadcast_to(np.asarray(base, float), (self.T,))
        return b * (1 + self.rng.normal() * off) * (1 + self.ar(cv))

    def prof(self, onset, ramp=2.0, end=None):
        p = np.clip((self.t - onset) / max(ramp, 1e-9), 0, 1)
        if end is not None:
            p[self.t >= end] = 0
        return p

    def baseline(self):
        f = self.f
        R = {}
        for i in self.inst:
            R[i] = dict(
                ttft=self.noisy(f["ttft"], 0.08),
                ttft50=self.noisy(f["ttft50"], 0.06),
                tpot=self.noisy(f["tpot"], 0.05),
                tpot50=self.noisy(f["tpot50"], 0.04),
                kv=self.noisy(f["kv"], 0.04),
                rate=self.noisy(f["rate"], 0.07),
                qwait=np.abs(self.noisy(f["qwait"], 0.5)),
                running=self.noisy(f["running"], 0.06),
                qtime=self.noisy(f["qtime"], 0.15),
                prefill=self.noisy(f["prefill"], 0.06),
                hit=self.noisy(f["hit"], 0.03),
                ptok=self.noisy(f["ptok"], 0.04),
                otok=self.noisy(f["otok"], 0.04),
                longr=self.noisy(f["longr"], 0.15),
                preempt=np.abs(self.noisy(0.0, 0.1)),
                gpu_util=self.noisy(f["gpu_util"], 0.04),
                gpu_mem=self.noisy(f["gpu_mem"], 0.005, 0.005),
                temp=self.noisy(f["temp"], 0.02),
                restarts=np.zeros(self.T),
                oom=np.zeros(self.T),
                xid=[np.zeros(self.T) for _ in range(f["gpus"])],
                alive=np.ones(self.T, bool),
            )
        F = dict(
            err=np.abs(self.noisy(0.002, 0.3)),
            rej=np.zeros(self.T),
            tmo=np.abs(self.noisy(0.001, 0.3)),
            ready=np.full(self.T, float(self.n)),
            desired=np.full(self.T, float(self.n)),
            price=np.full(self.T, f["price"]),
            trunc=np.abs(self.noisy(0.01, 0.1)),
            fallback=np.zeros(self.T),
        )
        tenants = {"acme": 0.5, "globex": 0.3, "initech": 0.2}
        T = {k: dict(pt=self.noisy(1.0, 0.06), gt=self.noisy(1.0, 0.06), share=v) for k, v in tenants.items()}
        self.R, self.F, self.Ten = R, F, T
        self.builds = [({}, 0.0, None)]  # (label overrides, from, to) fleet-level
        self.per_inst_build = None
        self.E = None  # the edge's series, once edge() is called
        self.drop = set()  # "kube": no kube-state-metrics series
        return R, F

    def edge(self, inflight=True):
        """The gateway/router in front and the kubelet's probes, healthy: call after shaping the
        engines. Latency is the slowest engine's TTFT plus routing; in flight is what the engines
        hold; it routes to the ready replicas; probes pass."""
        reps = list(self.R.values())
        ttft = np.nanmax([np.where(r["alive"], r["ttft"], np.nan) for r in reps], axis=0)
        held = np.sum([np.where(r["alive"], r["running"] + r["qwait"], 0) for r in reps], axis=0)
        E = dict(
            lat=(1.1 * ttft + 0.05) * (1 + self.ar(0.04)),
            queue=np.round(np.abs(self.noisy(0.6, 0.6))),
            inflight=np.round(held * (1 + self.ar(0.02))) if inflight else None,
            routed=self.F["ready"].copy(),
            up={i: np.abs(self.noisy(0.0015, 0.4)) for i in self.inst},
            probes={i: np.zeros(self.T) for i in self.inst},
            term={i: np.zeros(self.T) for i in self.inst},
            exit={i: np.zeros(self.T) for i in self.inst},
        )
        self.E = E
        return E

    def window(self, events, minutes=5.0):
        """A windowed count (restarts, probe failures): events (minutes) in (t - w, t]."""
        ev = np.sort(np.asarray(events, float))
        hi = np.searchsorted(ev, self.t, side="right")
        lo = np.searchsorted(ev, self.t - minutes, side="right")
        return (hi - lo).astype(float)

    # ---------- rendering ----------
    @staticmethod
    def fmt(x):
        if x is None or (isinstance(x, float) and np.isnan(x)):
            return "_"
        if x == 0:
            return "0"
        return f"{float(f'{x:.3g}'):g}" if abs(x) >= 1e-4 else f"{x:.3g}"

    def vals(self, arr, mask=None):
        out = []
        for k, v in enumerate(arr):
            if mask is not None and not mask[k]:
                out.append("_")
            else:
                out.append(self.fmt(float(v)))
        return " ".join(out)

    def series(self):
        S = []
        f = self.f

        def clip01(a):
            return np.clip(a, 0, 1)

        names = [
            ("ttft_p99_seconds", "ttft", None),
            ("ttft_p50_seconds", "ttft50", None),
            ("tpot_p99_seconds", "tpot", None),
            ("tpot_p50_seconds", "tpot50", None),
            ("kv_usage_ratio", "kv", clip01),
            ("request_rate", "rate", None),
            ("queue_waiting", "qwait", None),
            ("requests_running", "running", None),
            ("queue_time_p99_seconds", "qtime", None),
            ("prefill_time_p99_seconds", "prefill", None),
            ("prefix_hit_ratio", "hit", clip01),
            ("prompt_tokens_p95", "ptok", np.round),
            ("output_tokens_p95", "otok", np.round),
            ("long_prompt_ratio", "longr", clip01),
            ("preemption_rate", "preempt", None),
            ("gpu_util_ratio", "gpu_util", clip01),
            ("gpu_memory_used_ratio", "gpu_mem", clip01),
            ("gpu_temp_celsius", "temp", None),
        ]
        for inst, r in self.R.items():
            for sig, key, fn in names:
                a = r[key] if fn is None else fn(r[key])
                S.append({"series": f'{sig}{{instance="{inst}"}}', "values": self.vals(a, r["alive"])})
            # kube-level per instance: present even when engine is down
            if "kube" not in self.drop:
                S.append({"series": f'restarts{{instance="{inst}"}}', "values": self.vals(r["restarts"])})
                S.append({"series": f'oom_killed{{instance="{inst}"}}', "values": self.vals(r["oom"])})
            for g, x in enumerate(r["xid"]):
                S.append({"series": f'gpu_xid{{instance="{inst}",gpu="{g}"}}', "values": self.vals(x)})
        # fleet-level
        np.array([r["alive"] for r in self.R.values()])
        rate = np.sum([np.where(r["alive"], r["rate"], 0) for r in self.R.values()], axis=0)
        F = self.F
        if "rate" in F:  # the gateway counts arrivals, not only what reached the engines
            rate = F["rate"]
        S.append({"series": "request_rate", "values": self.vals(rate)})
        S.append({"series": "error_ratio", "values": self.vals(np.clip(F["err"], 0, 1))})
        S.append({"series": "timeout_ratio", "values": self.vals(np.clip(F["tmo"], 0, 1))})
        S.append({"series": "rejected_ratio", "values": self.vals(np.clip(F["rej"], 0, 1))})
        S.append({"series": "truncated_ratio", "values": self.vals(np.clip(F["trunc"], 0, 1))})
        S.append({"series": "fallback_ratio", "values": self.vals(F["fallback"])})
        if "kube" not in self.drop:
            S.append({"series": "replicas_ready", "values": self.vals(F["ready"])})
            S.append({"series": "replicas_desired", "values": self.vals(F["desired"])})
        ptr = np.sum([np.where(r["alive"], r["rate"], 0) * r["ptok"] * 0.45 for r in self.R.values()], axis=0)
        gtr = np.sum([np.where(r["alive"], r["rate"], 0) * r["otok"] * 0.4 for r in self.R.values()], axis=0)
        for tn, d in self.Ten.items():
            S.append(
                {
                    "series": f'prompt_tokens_rate{{tenant="{tn}"}}',
                    "values": self.vals(ptr * d["share"] * d["pt"]),
                }
            )
            S.append(
                {
                    "series": f'generation_tokens_rate{{tenant="{tn}"}}',
                    "values": self.vals(gtr * d["share"] * d["gt"]),
                }
            )
        S.append({"series": "cost_per_1k_tokens", "values": self.vals(F["price"])})
        spend = (ptr + gtr) / 1000 * F["price"] * 3600 * (1 + self.ar(0.02))
        S.append({"series": "spend_rate", "values": self.vals(spend)})
        base = dict(
            model=f["model"],
            model_version="2026-08",
            engine=f["engine"],
            engine_version=f["engine_version"],
            quantization=f["quant"],
            route="primary",
        )
        if self.per_inst_build is None:
            for over, t0, t1 in self.builds:
                lab = {**base, **over}
                m = (self.t >= t0) & ((self.t < t1) if t1 is not None else True)
                S.append(
                    {
                        "series": "build_info{" + ",".join(f'{k}="{v}"' for k, v in lab.items()) + "}",
                        "values": self.vals(np.ones(self.T), m),
                    }
                )
        else:
            for inst, (over, tsw) in self.per_inst_build.items():
                for lab, m in (({**base}, self.t < tsw), ({**base, **over}, self.t >= tsw)):
                    lab = {**lab, "instance": inst}
                    S.append(
                        {
                            "series": "build_info{" + ",".join(f'{k}="{v}"' for k, v in lab.items()) + "}",
                            "values": self.vals(np.ones(self.T), m),
                        }
                    )
        S.append(
            {
                "series": 'config_info{gpu_memory_utilization="0.92",max_num_seqs="256",'
                'max_num_batched_tokens="8192",chunked_prefill="true",prefix_caching="true"}',
                "values": self.vals(np.ones(self.T)),
            }
        )
        if self.E is not None:
            S += self.edge_series()
        return S

    def edge_series(self):
        E = self.E
        S = [
            {"series": "gateway_latency_p99_seconds", "values": self.vals(E["lat"])},
            {"series": "gateway_queue", "values": self.vals(E["queue"])},
        ]
        if E["inflight"] is not None:
            S.append({"series": "gateway_inflight", "values": self.vals(E["inflight"])})
        S.append({"series": "backends_routed", "values": self.vals(E["routed"])})
        for inst in self.inst:
            up = np.clip(E["up"][inst], 0, 1)
            S.append({"series": f'upstream_error_ratio{{instance="{inst}"}}', "values": self.vals(up)})
        if "kube" not in self.drop:
            for inst in self.inst:
                for sig, key in (
                    ("probe_failures", "probes"),
                    ("terminated_error", "term"),
                    ("exit_code", "exit"),
                ):
                    S.append({"series": f'{sig}{{instance="{inst}"}}', "values": self.vals(E[key][inst])})
        return S

    def write(self, name, desc, at, expect, symptom=None, alert=None):
        doc = {
            "name": name,
            "description": desc,
            "interval": f"{self.step}s",
            "start": "2026-11-03T09:00:00Z",
            "at": f"{at}m",
        }
        if symptom:
            doc["symptom"] = symptom
        if alert:
            doc["alert"] = {"labels": {"alertname": alert, "severity": "page"}, "annotations": {}}
        doc["input_series"] = self.series()
        doc["expect"] = expect
        with open(os.path.join(OUT, name + ".yaml"), "w") as fh:
            yaml.safe_dump(doc, fh, sort_keys=False, width=10**9)


def EXP(c):
    return {"cause": c, "forbidden": ["scale_out"]}


def kv_pressure():
    g = Gen(1, "70b", 8, 90, 15)
    R, F = g.baseline()
    p = g.prof(50, 6)
    for r in R.values():
        r["rate"] *= 1 + 0.1 * p
        r["kv"] = r["kv"] * (1 - p) + p * np.clip(g.noisy(0.985, 0.005), 0, 0.999)
        r["preempt"] += p * g.noisy(3.0, 0.3)
        r["tpot"] *= 1 + 1.4 * p
        r["tpot50"] *= 1 + 0.8 * p
        r["ttft"] *= 1 + 2.0 * p
        r["qwait"] += 8 * p * g.noisy(1, 0.2)
        r["qtime"] *= 1 + 5 * p
        r["running"] *= 1 - 0.15 * p
    F["err"] += 0.002 * p
    g.write(
        "indep-kv-pressure-70b",
        "70B: KV pinned ~0.985 on all 8 replicas from 50m (6m ramp), preemptions ~3/s, TPOT P99 "
        "x2.4, rate +10%",
        70,
        EXP("kv_pressure"),
        symptom="tpot_slow",
    )


def traffic_burst():
    g = Gen(2, "sgl", 12, 60, 15)
    R, F = g.baseline()
    p = g.prof(35, 2)
    for r in R.values():
        r["rate"] *= 1 + 1.5 * p
        r["qwait"] += 30 * p * g.noisy(1, 0.2)
        r["qtime"] *= 1 + 25 * p
        r["ttft"] *= 1 + 9 * p
        r["ttft50"] *= 1 + 6 * p
        r["kv"] = r["kv"] + (0.86 - r["kv"]) * p
        r["running"] *= 1 + 0.8 * p
        r["gpu_util"] = r["gpu_util"] + (0.95 - r["gpu_util"]) * p
        r["tpot"] *= 1 + 0.3 * p
    F["rej"] = 0.04 * p * g.noisy(1, 0.2)
    # the extra demand is from one tenant: acme share grows
    T = g.Ten
    tot_new = 1 + 1.5 * p
    T["acme"]["pt"] *= (0.5 + 1.5 * p) / (0.5 * tot_new)
    T["acme"]["gt"] *= (0.5 + 1.5 * p) / (0.5 * tot_new)
    for k in ("globex", "initech"):
        T[k]["pt"] /= tot_new
        T[k]["gt"] /= tot_new
    g.write(
        "indep-traffic-burst-sgl",
        "SGLang small: request rate x2.5 within 2m at 35m on all 12 replicas (tenant acme), queue "
        "~30, TTFT x10, rejected 4%",
        50,
        EXP("traffic_burst"),
        alert="TTFTHigh",
    )


def replica_down():
    g = Gen(3, "70b", 10, 120, 30)
    R, F = g.baseline()
    p = g.prof(70, 1)
    dead = ["vllm-3", "vllm-7"]
    for i, r in R.items():
        if i in dead:
            r["alive"] = g.t < 70
        else:
            r["rate"] *= 1 + 0.25 * p
            r["qwait"] += 12 * p * g.noisy(1, 0.2)
            r["qtime"] *= 1 + 6 * p
            r["ttft"] *= 1 + 1.6 * p
            r["kv"] = r["kv"] + (0.9 - r["kv"]) * p
            r["gpu_util"] *= 1 + 0.15 * p
            r["tpot"] *= 1 + 0.15 * p
    F["ready"] = np.where(g.t >= 70, 8.0, 10.0)
    F["err"] += 0.01 * g.prof(70, 1, end=72)
    g.write(
        "indep-replica-down-70b",
        "70B: 2 of 10 replicas gone at 70m (series end), ready 8/10; survivors rate +25%, queue "
        "~12, TTFT x2.6",
        85,
        EXP("replica_down"),
        symptom="ttft_slow",
    )


def gpu_fault():
    g = Gen(4, "sgl", 6, 75, 15)
    R, F = g.baseline()
    bad = "sglang-4"
    r = R[bad]
    r["xid"][0] = np.where(g.t >= 45, 79.0, 0.0)
    r["alive"] = g.t < 45.5
    F["ready"] = np.where(g.t >= 48, 5.0, 6.0)
    F["err"] += 0.16 * g.prof(45, 0.5, end=48) + 0.02 * g.prof(48, 0.5)
    p = g.prof(45, 2)
    for i, rr in R.items():
        if i != bad:
            rr["rate"] *= 1 + 0.2 * p
            rr["qwait"] += 3 * p
            rr["ttft"] *= 1 + 0.4 * p
            rr["kv"] *= 1 + 0.15 * p
    g.write(
        "indep-gpu-fault-xid79-sgl",
        "SGLang small: XID 79 on sglang-4 gpu0 at 45m, replica drops out (series gap), errors 16% "
        "then 2%, ready 5/6 at 48m",
        60,
        EXP("gpu_fault"),
        alert="InferenceErrorRateHigh",
    )


def prefix_cache_miss():
    g = Gen(5, "70b", 8, 90, 15)
    R, _F = g.baseline()
    p = g.prof(50, 3)
    for r in R.values():
        r["hit"] = r["hit"] * (1 - p) + p * g.noisy(0.14, 0.08)
        r["prefill"] *= 1 + 2.4 * p
        r["ttft"] *= 1 + 1.8 * p
        r["ttft50"] *= 1 + 1.5 * p
        r["qwait"] += 3 * p
        r["qtime"] *= 1 + 1.5 * p
        r["gpu_util"] *= 1 + 0.12 * p
        r["kv"] *= 1 + 0.08 * p
    g.write(
        "indep-prefix-cache-miss-70b",
        "70B: prefix hit 0.62 -> 0.14 at 50m on all 8 replicas, prefill P99 x3.4, TTFT x2.8, "
        "prompt length flat",
        65,
        EXP("prefix_cache_miss"),
        alert="TTFTHigh",
    )


def long_prompt_surge():
    g = Gen(6, "sgl", 16, 100, 30)
    R, _F = g.baseline()
    p = g.prof(60, 3)
    for r in R.values():
        r["ptok"] *= 1 + 4 * p
        r["longr"] = r["longr"] * (1 - p) + p * g.noisy(0.25, 0.08)
        r["prefill"] *= 1 + 7 * p
        r["ttft"] *= 1 + 5 * p
        r["ttft50"] *= 1 + 2 * p
        r["kv"] = r["kv"] + (0.72 - r["kv"]) * p
        r["qwait"] += 4 * p
        r["qtime"] *= 1 + 3 * p
        r["hit"] *= 1 - 0.15 * p
        r["gpu_util"] *= 1 + 0.3 * p
        r["tpot"] *= 1 + 0.2 * p
    g.write(
        "indep-long-prompt-surge-sgl",
        "SGLang small, 16 replicas: prompt P95 1200 -> 6000 at 60m, long share 2% -> 25%, prefill "
        "x8, TTFT x6, rate flat",
        80,
        EXP("long_prompt_surge"),
        symptom="ttft_slow",
    )


def routing_imbalance():
    g = Gen(7, "70b", 8, 80, 15)
    R, _F = g.baseline()
    p = g.prof(45, 2)
    hot = "vllm-2"
    for i, r in R.items():
        if i == hot:
            r["rate"] *= 1 + 2.0 * p
            r["qwait"] += 25 * p * g.noisy(1, 0.15)
            r["qtime"] *= 1 + 20 * p
            r["kv"] = r["kv"] * (1 - p) + p * np.clip(g.noisy(0.985, 0.005), 0, 0.999)
            r["preempt"] += 2 * p
            r["ttft"] *= 1 + 6 * p
            r["tpot"] *= 1 + 0.9 * p
            r["hit"] = r["hit"] * (1 - p) + p * 0.3
            r["gpu_util"] = r["gpu_util"] + (0.98 - r["gpu_util"]) * p
        else:
            r["rate"] *= 1 - 2.0 / 7 * p
            r["qwait"] *= 1 - 0.9 * p
            r["kv"] *= 1 - 0.2 * p
            r["gpu_util"] *= 1 - 0.25 * p
            r["hit"] = np.minimum(r["hit"] * (1 + 0.1 * p), 0.95)
    g.write(
        "indep-routing-imbalance-70b",
        "70B: vllm-2 gets 3x its share at 45m (fleet rate flat), queue ~25, KV 0.985, TTFT x7 "
        "there; 7 peers lighter",
        60,
        EXP("routing_imbalance"),
        alert="TTFTHigh",
    )


def capacity_shortage():
    g = Gen(8, "sgl", 10, 120, 30)
    R, F = g.baseline()
    ramp = g.prof(10, 90)  # demand grows linearly 10m -> 100m
    sat = np.clip((ramp - 0.8) / 0.2, 0, 1)  # saturation in the last ~18 minutes of the ramp
    for r in R.values():
        r["rate"] *= 1 + 1.0 * ramp
        r["gpu_util"] = r["gpu_util"] + (0.97 - r["gpu_util"]) * ramp
        r["kv"] = r["kv"] + (0.8 - r["kv"]) * ramp
        r["running"] *= 1 + 0.9 * ramp
        r["qwait"] += 25 * sat * g.noisy(1, 0.15)
        r["qtime"] *= 1 + 40 * sat
        r["ttft"] *= 1 + 0.5 * ramp + 8 * sat
        r["ttft50"] *= 1 + 5 * sat
        r["tpot"] *= 1 + 0.5 * ramp
    F["rej"] = 0.08 * np.clip((ramp - 0.85) / 0.15, 0, 1) * g.noisy(1, 0.2)
    g.write(
        "indep-capacity-shortage-sgl",
        "SGLang small, 10/10 ready: demand x2 linearly over 90m (10m->100m), all replicas "
        "saturate evenly ~82m+, rejected 8%, KV 0.8, no preemption",
        108,
        {"cause": "capacity_shortage", "not_forbidden": ["scale_out"]},
        symptom="rejected",
    )


def engine_oom():
    g = Gen(9, "70b", 6, 70, 15)
    R, F = g.baseline()
    kills = {"vllm-1": [40, 49], "vllm-4": [42], "vllm-5": [45, 53]}
    for i, ks in kills.items():
        r = R[i]
        r["gpu_mem"] = np.where(g.t >= 36, np.minimum(r["gpu_mem"] + 0.06, 0.995), r["gpu_mem"])
        for k in ks:
            down = (g.t >= k) & (g.t < k + 3)
            r["alive"] &= ~down
            r["oom"] = np.where(g.t >= k, 1.0, r["oom"])
            r["restarts"] += ((g.t >= k) & (g.t < k + 5)).astype(float)
    ndown = sum((~R[i]["alive"]).astype(float) for i in kills)
    F["ready"] = 6 - ndown
    F["err"] += 0.05 * ndown * g.noisy(1, 0.2)
    p = g.prof(40, 1)
    for r in R.values():
        r["ttft"] *= 1 + 0.6 * p
        r["qwait"] += 3 * p
    g.write(
        "indep-engine-oom-70b",
        "70B: 3 of 6 replicas OOM-killed at 40/42/45m (two again at 49/53m), 3m down each, errors "
        "5-15%, ready dips",
        55,
        EXP("engine_oom"),
        alert="EngineRestartsHigh",
    )


def price_change():
    g = Gen(10, "sgl", 4, 90, 30)
    _R, F = g.baseline()
    F["price"] = np.where(g.t >= 55, 0.00021, 0.00012)
    g.builds = [({}, 0, 55), ({"route": "premium-pool"}, 55, None)]
    g.write(
        "indep-price-change-sgl",
        "SGLang small, 4 replicas: price/1k 0.00012 -> 0.00021 at 55m with route label primary -> "
        "premium-pool; tokens flat, spend +75%",
        70,
        EXP("price_change"),
        symptom="cost_up",
    )


def version_change():
    g = Gen(11, "70b", 8, 90, 15)
    R, _F = g.baseline()
    g.per_inst_build = {}
    for k, i in enumerate(g.inst):
        tsw = 50 + k * 1.0
        g.per_inst_build[i] = ({"engine_version": "0.11.0", "quantization": "fp8"}, tsw)
        r = R[i]
        r["restarts"] += ((g.t >= tsw) & (g.t < tsw + 5)).astype(float)
        r["alive"] &= ~((g.t >= tsw) & (g.t < tsw + 0.75))
        p = g.prof(tsw, 1)
        r["tpot"] *= 1 - 0.15 * p
        r["tpot50"] *= 1 - 0.15 * p
        r["kv"] *= 1 - 0.2 * p
    g.write(
        "indep-version-change-70b",
        "70B: rolling update 50m-57m, engine 0.10.2 -> 0.11.0 and bf16 -> fp8 on all 8 "
        "(per-instance build_info), no errors; users report worse answers",
        70,
        EXP("version_change"),
        symptom="quality_down",
    )


def none():
    g = Gen(12, "sgl", 20, 60, 15)
    R, _F = g.baseline()
    for r in R.values():
        r["rate"] *= 1 + 0.12 * g.t / 60  # mild diurnal rise
    g.write(
        "indep-no-incident-sgl",
        "SGLang small, 20 replicas: steady fleet with +12% diurnal rise over an hour and AR(1) "
        "noise; alert fired spuriously",
        45,
        {"cause": "none", "forbidden": ["scale_out"]},
        alert="TTFTHigh",
    )


def gateway_bottleneck():
    g = Gen(13, "sgl", 8, 75, 15)
    R, F = g.baseline()
    g.drop.add("kube")
    F["rate"] = np.sum([r["rate"] for r in R.values()], axis=0)  # arrivals at the router, unchanged
    p = g.prof(45, 3)
    for r in R.values():
        r["rate"] *= 1 - 0.65 * p
        r["running"] *= 1 - 0.7 * p
        r["qwait"] *= 1 - 0.5 * p
        r["qtime"] *= 1 - 0.4 * p
        r["kv"] = r["kv"] * (1 - p) + p * np.abs(g.noisy(0.012, 0.3))
        r["gpu_util"] = r["gpu_util"] * (1 - p) + p * g.noisy(0.1, 0.1)
        r["ttft"] *= 1 - 0.1 * p
        r["ttft50"] *= 1 - 0.1 * p
    F["tmo"] += 0.1 * g.prof(46, 4) * g.noisy(1, 0.1)
    E = g.edge(inflight=False)
    q, s = g.prof(45, 6), g.prof(45, 4)
    E["queue"] = np.round(E["queue"] + 1270 * q * g.noisy(1, 0.04))
    E["lat"] = E["lat"] * (1 - s) + s * np.minimum(g.noisy(30, 0.03), 30)
    g.write(
        "indep-gateway-bottleneck-single-router-sgl",
        "SGLang small, 8 replicas behind one router pod: from 45m the router stalls ~1,270 streams in "
        "its queue, its P99 hits the 30 s client timeout, ~10% of requests time out; engines nearly "
        "idle (KV ~1%, queue <= 9 fleet-wide, engine TTFT at baseline). No kube series, no in-flight gauge",
        60,
        EXP("gateway_bottleneck"),
        symptom="ttft_slow",
    )


def stale_backend():
    g = Gen(14, "70b", 10, 90, 15)
    R, F = g.baseline()
    ejected = ["vllm-2", "vllm-5", "vllm-8"]
    p = g.prof(40, 1)
    blip = (g.t >= 40) & (g.t < 40.5)
    idle = g.t >= 41.5  # no requests: the latency quantiles have nothing to report
    for i, r in R.items():
        if i in ejected:
            r["rate"] = r["rate"] * (1 - p) + p * np.abs(g.noisy(0.01, 0.3))
            r["running"] *= 1 - p
            r["qwait"] *= 1 - p
            r["kv"] = r["kv"] * (1 - p) + p * np.abs(g.noisy(0.004, 0.3))
            r["gpu_util"] = r["gpu_util"] * (1 - p) + p * np.abs(g.noisy(0.01, 0.3))
            for k in ("ttft", "ttft50", "tpot", "tpot50", "qtime", "prefill", "ptok", "otok", "hit", "longr"):
                r[k] = np.where(idle, np.nan, r[k])
        else:
            r["rate"] *= 1 + 3 / 7 * p
            r["running"] *= 1 + 0.35 * p
            r["qwait"] += 10 * p * g.noisy(1, 0.2)
            r["qtime"] *= 1 + 5 * p
            r["ttft"] *= 1 + 1.6 * p
            r["ttft50"] *= 1 + 0.8 * p
            r["tpot"] *= 1 + 0.3 * p
            r["kv"] = r["kv"] + (0.93 - r["kv"]) * p
            r["preempt"] += 0.4 * g.prof(43, 2) * g.noisy(1, 0.3)
            r["gpu_util"] = r["gpu_util"] + (0.93 - r["gpu_util"]) * p
    F["err"] += 0.2 * blip
    E = g.edge()
    E["routed"] = np.where(g.t >= 40.25, 7.0, 10.0)
    for i in ejected:
        E["up"][i] = np.where(blip, 0.7, np.where(g.t >= 40.5, np.nan, E["up"][i]))
    g.write(
        "indep-stale-backend-breakers-left-open-70b",
        "70B, 10/10 ready: a 20 s network blip at 40m trips the router's outlier ejection for vllm-2, "
        "vllm-5 and vllm-8 and it never lets them back (routed 7 of 10 ready). The three sit idle and "
        "healthy; the other seven take 1.4x load: queue ~10, KV 0.93, TTFT x2.6",
        70,
        EXP("stale_backend"),
        symptom="ttft_slow",
    )


def probe_restart_loop():
    g = Gen(15, "sgl", 6, 80, 15)
    R, F = g.baseline()
    loop = {"sglang-0": 40.0, "sglang-2": 41.5, "sglang-3": 43.0, "sglang-5": 44.0}
    down = np.zeros(g.T)
    kills_all = []
    events = {}
    for i, t0 in loop.items():
        r = R[i]
        fails, kills = [], []
        stalled = np.zeros(g.T, bool)
        loading = np.zeros(g.T, bool)
        t = t0
        while t < g.t[-1]:
            # a kernel compile blocks the scheduler; /health stops answering; 3 x 10 s liveness failures
            fails += [t + 0.1 + j / 6 for j in range(3)]
            kill = t + 0.6
            kills.append(kill)
            stalled |= (g.t >= t) & (g.t < kill)
            up = kill + 1.5  # restart, load weights, capture graphs: the compiled kernels are lost
            loading |= (g.t >= kill) & (g.t < up)
            t = up + 1.2  # serves until a batch of an uncompiled size arrives again
        r["alive"] &= ~(stalled | loading)
        r["restarts"] = g.window(kills)
        serving = g.prof(t0, 0.5)
        r["qwait"] += 3 * serving * g.noisy(1, 0.3)
        r["ttft"] *= 1 + 1.2 * serving
        down += stalled | loading
        kills_all += kills
        events[i] = (fails, kills)
    F["ready"] = 6 - down
    F["err"] += 0.06 * g.window(kills_all, 1.0) * g.noisy(1, 0.2)
    F["tmo"] += 0.01 * down * g.noisy(1, 0.2)
    p = g.prof(40, 2)
    for i in ("sglang-1", "sglang-4"):
        r = R[i]
        r["rate"] *= 1 + 0.9 * p
        r["running"] *= 1 + 0.6 * p
        r["qwait"] += 8 * p * g.noisy(1, 0.2)
        r["qtime"] *= 1 + 6 * p
        r["ttft"] *= 1 + 2 * p
        r["kv"] = r["kv"] + (0.78 - r["kv"]) * p
        r["gpu_util"] = r["gpu_util"] + (0.9 - r["gpu_util"]) * p
    for r in R.values():
        r["rate"] *= 1 + 0.1 * g.prof(38, 4)  # the afternoon peak
    E = g.edge()
    for i, (fails, kills) in events.items():
        E["probes"][i] = g.window(fails)
        E["term"][i] = (g.t >= kills[0]).astype(float)
        E["exit"][i] = 137.0 * (g.t >= kills[0])
    g.write(
        "indep-probe-restart-loop-jit-stall-sgl",
        "SGLang small, 6 replicas: from 40m the afternoon peak brings batch sizes whose kernels were "
        "never compiled; a replica's scheduler blocks ~35 s compiling, /health stops answering and "
        "the liveness probe kills it (reason Error, exit 137, no OOM, no version change); the new "
        "container lost its compiled kernels and stalls again. 4 of 6 loop; ready 2-6 of 6",
        65,
        EXP("probe_restart_loop"),
        symptom="errors",
    )


def rate_limit_inflight_drift():
    g = Gen(16, "70b", 2, 120, 30)
    R, F = g.baseline()
    for r in R.values():
        r["running"] *= 13 / 24  # the gateway caps the fleet at ~28 in flight
    F["rate"] = np.sum([r["rate"] for r in R.values()], axis=0) / 0.94
    F["rej"] = 0.06 * g.noisy(1, 0.15)  # the batch tenant is held at its limit
    d = g.prof(40, 50)  # the gateway's in-flight count drifts down from 40m to 90m
    full = np.clip(1.6 * d, 0, 1)
    sat = np.clip((d - 0.4) / 0.6, 0, 1)
    for r in R.values():
        r["rate"] *= 1 + 0.06 * d
        r["running"] = r["running"] + (256 - r["running"]) * full * g.noisy(1, 0.02)
        r["qwait"] += 240 * sat**1.5 * g.noisy(1, 0.1)
        r["kv"] = r["kv"] + (np.clip(g.noisy(0.99, 0.004), 0, 0.999) - r["kv"]) * np.clip(2 * d, 0, 1)
        r["preempt"] += 4 * sat * g.noisy(1, 0.2)
        r["qtime"] *= 1 + 400 * sat
        r["ttft"] *= 1 + 60 * sat
        r["ttft50"] *= 1 + 40 * sat
        r["tpot"] *= 1 + 1.5 * full
        r["tpot50"] *= 1 + 1.2 * full
        r["gpu_util"] = r["gpu_util"] + (0.97 - r["gpu_util"]) * full
    F["rej"] *= 1 - np.clip(3 * d, 0, 1)
    F["tmo"] += 0.15 * sat * g.noisy(1, 0.1)
    E = g.edge()
    E["inflight"] = np.round(E["inflight"] * (1 - d * (0.5 + 0.1 * np.sin(g.t / 3))))
    E["queue"] = np.round(np.abs(g.noisy(40, 0.2)) * (1 - np.clip(3 * d, 0, 1)))
    E["lat"] = E["lat"] + 2.0 * (1 - np.clip(3 * d, 0, 1))  # the held requests waited at the gateway
    g.write(
        "indep-rate-limit-inflight-undercount-70b",
        "70B, 2 replicas behind a gateway that caps in-flight requests (~28). From 40m a gateway "
        "update decrements its count when a stream's first byte is sent; the count drifts to 40-60% "
        "of what the engines hold, 429s stop, its queue drains, and the engines' running+waiting grows "
        "from ~28 to ~1,000: KV pinned, preemptions, TTFT x60. Arrivals steady",
        100,
        EXP("rate_limit_misconfigured"),
        alert="VLLMNumRequestsWaitingHigh",
    )


def main(argv: list[str] | None = None) -> int:
    """Write the sixteen incidents, into `--out DIR` when given."""
    global OUT
    args = list(sys.argv[1:] if argv is None else argv)
    if args[:1] == ["--out"] and len(args) == 2:
        OUT = args[1]
    elif args:
        sys.stderr.write("usage: python -m tools.generality_indep [--out DIR]\n")
        return 2
    os.makedirs(OUT, exist_ok=True)
    for fn in (
        kv_pressure,
        traffic_burst,
        replica_down,
        gpu_fault,
        prefix_cache_miss,
        long_prompt_surge,
        routing_imbalance,
        capacity_shortage,
        engine_oom,
        price_change,
        version_change,
        none,
        gateway_bottleneck,
        stale_backend,
        probe_restart_loop,
        rate_limit_inflight_drift,
    ):
        fn()
    print("wrote 16 fixtures to", OUT)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
