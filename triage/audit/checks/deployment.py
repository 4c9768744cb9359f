"""Deployment (部署): replicas against the peak with redundancy, and the gateway.

The replica count is judged as the capacity chapter sizes it: ceil(peak / one replica's
rate at SLO) plus redundancy. The gateway's quota and metering, and whether overload is
refused at the gateway or reaches the engines, are read from what the edge exports
(`triage.audit.checks.gateway`). Probes, Service balancing and rollouts live in pod specs,
not in metrics.
"""

from __future__ import annotations

import math

import numpy as np
import numpy.typing as npt

from signals.frame import SignalFrame
from signals.timeparse import format_instant
from triage.audit.checks.base import Registry
from triage.audit.checks.facts import Facts, FloatArray, finite_values
from triage.audit.checks.formatting import num, ratio_text
from triage.audit.checks.gateway import gateway_functions, overload_kept_off
from triage.audit.model import ChecklistItem, Finding, verdict

CHECKS = Registry("deployment")
CHECKS.check("deployment.gateway_functions")(gateway_functions)
CHECKS.check("deployment.quota_at_gateway")(overload_kept_off)
CHECKS.not_visible(
    "deployment.startup_probe",
    "deployment.liveness_probe",
    "deployment.service_balancing",
    "deployment.rolling_update",
)


def _within_slo(x: Facts, frame: SignalFrame) -> tuple[dict[str, npt.NDArray[np.bool_]], bool]:
    """Per replica, the steps it served traffic with TTFT P99 and TPOT P99 within SLO; whether any breached.

    A replica's own P99 is used when it has one, else the fleet's. A step with an unknown
    latency is not within SLO ("unknown is not healthy").
    """

    def rows(signal: str) -> tuple[dict[str, FloatArray], FloatArray | None]:
        if not frame.has(signal):
            return {}, None
        view = frame.replicas(signal)
        return dict(zip(view.replicas, view.values, strict=True)), frame.fleet(signal)

    latencies = [(rows("ttft_p99_seconds"), x.s.ttft_p99_slo), (rows("tpot_p99_seconds"), x.s.tpot_p99_slo)]
    out: dict[str, npt.NDArray[np.bool_]] = {}
    breached = False
    view = frame.replicas("request_rate")
    for name, rate in zip(view.replicas, view.values, strict=True):
        serving = np.isfinite(rate) & (rate > 0)
        within, known = serving.copy(), serving.copy()
        for (per_replica, fleet), slo in latencies:
            if fleet is None:
                continue
            series = per_replica.get(name, fleet)
            ok = np.isfinite(series)
            known &= ok
            within &= ok & (np.where(ok, series, np.inf) <= slo)
        breached = breached or bool((known & ~within).any())
        out[name] = within
    return out, breached


@CHECKS.check("deployment.readiness_probe")
def _readiness(x: Facts, item: ChecklistItem) -> Finding:
    """A replica seen stalled (requests running all window, no token generated) while every
    replica counted Ready fails the item: its readiness probe tests a port, not progress.

    Otherwise the probe lives in the pod spec, not in metrics: unknown, naming what settles
    it. A stall seen without kube-state-metrics readiness is named but cannot fail the item:
    the replica may have been taken out of rotation.
    """
    unseen = f"not visible in metrics; settles it: {item.settle}"
    frame = x.frame
    if frame is None or not frame.has("replicas_stalled"):
        return verdict("unknown", unseen)
    view = frame.replicas("replicas_stalled")
    rows = (
        list(zip(view.replicas, view.values, strict=True))
        if view.replicas
        else [("a replica", frame.fleet("replicas_stalled"))]
    )
    ready: npt.NDArray[np.bool_] | None = None
    if frame.has("replicas_ready") and frame.has("replicas_desired"):
        have, want = frame.fleet("replicas_ready"), frame.fleet("replicas_desired")
        ready = np.isfinite(have) & np.isfinite(want) & (have >= want)
    seen: list[str] = []
    while_ready: list[str] = []
    for name, values in rows:
        stalled = np.isfinite(values) & (values >= 1)
        if not stalled.any():
            continue
        first = format_instant(float(frame.times[int(np.argmax(stalled))]))
        minutes = float(stalled.sum()) * frame.step / 60
        seen.append(f"{name} ran requests with no token generated for {minutes:.0f}m from {first}")
        if ready is not None and (stalled & ready).any():
            while_ready.append(name)
    if while_ready:
        return verdict(
            "fail",
            "; ".join(seen[:3]),
            f"{', '.join(while_ready[:3])} stayed Ready meanwhile (ready replicas at desired): the "
            "readiness probe tests a port, not progress",
        )
    if seen:
        return verdict(
            "unknown",
            "; ".join(seen[:3]),
            "whether it stayed Ready is not known (no kube-state-metrics readiness); " + unseen,
        )
    return verdict("unknown", f"no replica was seen stalled in the window; {unseen}")


@CHECKS.check("deployment.scaling_min_replicas")
def _redundancy(x: Facts, item: ChecklistItem) -> Finding:
    """Ready replicas against ceil(peak / one replica's rate at SLO) + redundancy (the chapter's N+1).

    One replica's rate at SLO is the most a replica served with both P99s within SLO. When
    no replica was ever pushed past its SLO that is only a lower bound, so it is scaled by
    the KV headroom at that moment (a replica holding half its KV could hold about twice
    the concurrency) up to `kv_ceiling`, by at most `max_extrapolation`. A shortfall on an
    unscaled lower bound is `unknown`, not `fail`: the fleet may well do more.
    """
    frame = x.frame
    if frame is None:
        return verdict("unknown", x.why_no_frame())
    if not frame.has("request_rate"):
        return verdict("unknown", "no request-rate signal to find the peak")
    fleet_rate = finite_values(frame.fleet("request_rate"))
    if not len(fleet_rate) or float(fleet_rate.max()) <= 0:
        return verdict("unknown", "no traffic in the window: the peak's need cannot be measured")
    if not (frame.has("ttft_p99_seconds") or frame.has("tpot_p99_seconds")):
        return verdict("unknown", "no TTFT or TPOT P99 signal to tell when the SLO held")
    peak, s = float(fleet_rate.max()), x.s
    within, breached = _within_slo(x, frame)
    view = frame.replicas("request_rate")
    kv_view = frame.replicas("kv_usage_ratio")
    kv_rows = dict(zip(kv_view.replicas, kv_view.values, strict=True))
    best: tuple[float, float, str, float] | None = None  # capacity, observed, replica, KV use then
    for name, rate in zip(view.replicas, view.values, strict=True):
        kv = kv_rows.get(name)
        for i in np.flatnonzero(within.get(name, np.zeros(0, dtype=bool))):
            observed = float(rate[i])
            used = float(kv[i]) if kv is not None else math.nan
            scale = 1.0
            if not breached and math.isfinite(used) and used > 0:
                scale = min(max(s.kv_ceiling / used, 1.0), s.max_extrapolation)
            if best is None or observed * scale > best[0]:
                best = (observed * scale, observed, name, used)
    if best is None:
        return verdict(
            "unknown",
            "the SLO never held on any replica in the window: one replica's capacity at SLO is unknown",
        )
    capacity, observed, replica, used = best
    extrapolated = capacity > observed * (1 + 1e-9)
    serving = max(1, math.ceil(round(peak / capacity, 9)))
    needed = serving + s.redundancy
    ready_values = (
        finite_values(frame.fleet("replicas_ready")) if frame.has("replicas_ready") else np.array([])
    )
    if len(ready_values):
        ready, source = float(ready_values[-1]), "ready (kube-state-metrics)"
    else:
        names, present = frame.presence()
        ready = float(present[:, -1].sum()) if len(names) else 0.0
        source = "replicas reporting at the end of the window (no kube-state-metrics readiness)"
    how = (
        f"{num(observed)} req/s on {replica} at KV use {ratio_text(used)}, scaled to KV {s.kv_ceiling:g}"
        if extrapolated
        else f"the most {replica} served within SLO" + ("" if breached else ", a lower bound")
    )
    evidence = (
        f"peak {num(peak)} req/s; one replica serves about {num(capacity)} req/s within SLO (TTFT P99 <= "
        f"{s.ttft_p99_slo:g}s, TPOT P99 <= {s.tpot_p99_slo:g}s; {how}); the peak needs {serving} + "
        f"{s.redundancy} = {needed}; {num(ready)} {source}"
    )
    rest = "warm-up of new replicas and scale-down of long requests are not visible in metrics"
    if ready >= needed:
        return verdict("pass", evidence, rest)
    if not breached and not extrapolated:
        return verdict(
            "unknown",
            evidence,
            "no replica was pushed to its SLO, so its capacity is only a lower bound: a per-replica "
            "load test at "
            "SLO (or KV use) settles it",
        )
    return verdict("fail", evidence, rest)
