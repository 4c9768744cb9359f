"""Benchmark of the client-side `histogram_quantile` (signals/quantile.py); prints a table.

One quantile for 1,000 groups (replicas) of 20 buckets (19 doubling bounds and +Inf)
over 241 times, the shape of a live diagnosis's bucket rates, in three variants of the
data: every bucket present and monotonic; 1 % of the samples missing, so most times
need the per-time compaction; and monotonicity broken by noise, as rates of
independently scraped buckets can be. The best of several passes, wall and CPU time,
since the figure is meant to be the code's and not the machine's neighbours'.

Target: < 0.3 s for the 1,000 groups.
Run: python -m bench.quantile [--passes 7]
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import numpy.typing as npt

from signals.quantile import bucket_quantile

GROUPS = 1_000
BUCKETS = 20
TIMES = 241
BOUNDS = np.concatenate((0.001 * 2.0 ** np.arange(BUCKETS - 1), [np.inf]))


def groups(variant: str, rng: np.random.Generator) -> list[npt.NDArray[np.float64]]:
    out = []
    for _ in range(GROUPS):
        counts = np.cumsum(rng.exponential(1.0, (BUCKETS, TIMES)), axis=0)
        if variant == "non-monotonic":
            counts += rng.normal(0.0, 0.5, counts.shape)
        elif variant == "1% missing":
            counts[rng.random(counts.shape) < 0.01] = np.nan
        out.append(counts)
    return out


def measure(data: list[npt.NDArray[np.float64]], q: float, passes: int) -> tuple[float, float]:
    best_wall = best_cpu = float("inf")
    for _ in range(passes):
        wall, cpu = time.perf_counter(), time.process_time()
        for counts in data:
            bucket_quantile(q, BOUNDS, counts)
        best_wall = min(best_wall, time.perf_counter() - wall)
        best_cpu = min(best_cpu, time.process_time() - cpu)
    return best_wall, best_cpu


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--passes", type=int, default=7)
    args = parser.parse_args()
    rng = np.random.default_rng(7)
    print(f"{GROUPS} groups x {BUCKETS} buckets x {TIMES} times, best of {args.passes} passes")
    print(f"{'data':<16} {'q':>5} {'wall':>8} {'cpu':>8}")
    for variant in ("complete", "1% missing", "non-monotonic"):
        data = groups(variant, rng)
        for q in (0.5, 0.99):
            wall, cpu = measure(data, q, args.passes)
            print(f"{variant:<16} {q:>5} {wall:>7.3f}s {cpu:>7.3f}s")


if __name__ == "__main__":
    main()
