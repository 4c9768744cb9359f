"""The per-replica rate at SLO, measured from a frame of live or recorded signals.

The one part of the method that reads signals (a SignalFrame from Prometheus or a
fixture) rather than specs, so it is kept apart from the arithmetic.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from signals.frame import SignalFrame


@dataclass(frozen=True)
class RateMeasurement:
    """The highest request rate one replica served with TTFT P99 and TPOT P99 both within SLO.

    `lower_bound` is True when no replica ever breached the SLO in the frame: the fleet
    was never pushed to its limit, so the true capacity is at least `rate`, maybe more.
    """

    rate: float
    replica: str
    at: float
    lower_bound: bool

    def describe(self) -> str:
        bound = "; a lower bound: no replica breached the SLO in the window" if self.lower_bound else ""
        return f"measured: highest rate within SLO, replica {self.replica}{bound}"


def measure_rate_at_slo(
    frame: SignalFrame, ttft_slo: float = 1.0, tpot_slo: float = 0.05
) -> RateMeasurement | None:
    """Find the step and replica with the highest request rate while both P99s met the SLO.

    A step counts only when all three signals are known for that replica: an unknown
    latency is not a latency within SLO. P99 is stricter than the chapter's P95, so the
    rate errs low, which is the safe side for capacity. None when no step qualifies.
    """
    rate_view = frame.replicas("request_rate")
    ttft_view = frame.replicas("ttft_p99_seconds")
    tpot_view = frame.replicas("tpot_p99_seconds")
    ttft_rows = dict(zip(ttft_view.replicas, ttft_view.values, strict=True))
    tpot_rows = dict(zip(tpot_view.replicas, tpot_view.values, strict=True))
    best: tuple[float, str, float] | None = None
    breached = False
    for name, rate in zip(rate_view.replicas, rate_view.values, strict=True):
        ttft = ttft_rows.get(name)
        tpot = tpot_rows.get(name)
        if ttft is None or tpot is None:
            continue
        known = np.isfinite(rate) & np.isfinite(ttft) & np.isfinite(tpot)
        within = known & (ttft <= ttft_slo) & (tpot <= tpot_slo)
        breached = breached or bool((known & ~within).any())
        if not within.any():
            continue
        candidates = np.where(within, rate, -np.inf)
        i = int(np.argmax(candidates))
        if best is None or float(candidates[i]) > best[0]:
            best = (float(candidates[i]), name, float(frame.times[i]))
    if best is None or best[0] <= 0:
        return None
    return RateMeasurement(best[0], best[1], best[2], lower_bound=not breached)


def measured_rate_at_slo(frame: SignalFrame, ttft_slo: float = 1.0, tpot_slo: float = 0.05) -> float | None:
    """The per-replica rate at SLO from a frame (see `measure_rate_at_slo` for where and how sure)."""
    found = measure_rate_at_slo(frame, ttft_slo, tpot_slo)
    return None if found is None else found.rate
