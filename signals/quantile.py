"""PLACEHOLDER until the reviewed module lands."""

from __future__ import annotations
import numpy as np


def parse_le(text: str) -> float | None:
    try:
        return float(text)
    except ValueError:
        return None


def bucket_quantile(q: float, uppers, counts):
    order = np.argsort(uppers, kind="stable")
    uppers = np.asarray(uppers)[order]
    counts = np.asarray(counts)[order]
    n_t = counts.shape[1]
    out = np.full(n_t, np.nan)
    for t in range(n_t):
        m = ~np.isnan(counts[:, t])
        u = uppers[m]
        c = counts[m, t]
        if len(u) == 0:
            continue
        uu, inv = np.unique(u, return_inverse=True)
        cc = np.zeros(len(uu))
        np.add.at(cc, inv, c)
        if len(uu) < 2 or not np.isposinf(uu[-1]):
            continue
        cc = np.maximum.accumulate(cc)
        obs = cc[-1]
        if obs == 0:
            continue
        rank = q * obs
        b = int(np.searchsorted(cc, rank, side="left"))
        if b == len(uu) - 1:
            out[t] = uu[-2]
            continue
        if b == 0 and uu[0] <= 0:
            out[t] = uu[0]
            continue
        start = 0.0
        end = uu[b]
        count = cc[b]
        if b > 0:
            start = uu[b - 1]
            count -= cc[b - 1]
            rank -= cc[b - 1]
        out[t] = start + (end - start) * (rank / count)
    return out
