"""Fleet views that aggregate their own replica view, answered from the replica view's series.

A catalog source often writes its fleet view as an aggregation of its per-replica view:
`avg(max by ($replica) (kv))` beside `max by ($replica) (kv)`, or `max(X)` beside
`max by (instance, gpu) (X)`. Prometheus decodes every sample of the window for each of
the two queries, so the fleet's one series costs it what the replicas' hundreds cost
(docs/benchmarks.md, "Where that CPU goes"). Computed here at each step over the replica
view's answer, the round already holds, the fleet view costs nothing more, and it is the
same aggregation over the same series. Two forms are recognised, on the parsed PromQL:

- `op(R)`, R being the replica view's query whole, for `sum`, `max`, `min` and `avg`;
- `op(E)` beside `op by (...) (E)` (or `without`), for `sum`, `max` and `min`, whose
  partial aggregations aggregate again to the whole.

Anything else (`avg(E)` beside `max by (...) (E)`, a `topk`, a binary operation around the
aggregation) is sent as written. The values follow PromQL's: `sum` and `avg` are NaN where
a series' value is NaN; `max` and `min` pass over NaN values unless every value is NaN; a
step where no series has a sample has none. `avg` and `sum` may differ from Prometheus's in
the last bits (it adds in its own order); `tests/signals/test_plan.py` holds each to
Prometheus's own answer.
"""

from __future__ import annotations

import functools

import numpy as np
import numpy.typing as npt
import promql_parser

Array = npt.NDArray[np.float64]
Mask = npt.NDArray[np.bool_]

WHOLE = frozenset({"sum", "max", "min", "avg"})
"""Aggregations computed over the replica view's series as they are."""
AGAIN = frozenset({"sum", "max", "min"})
"""Aggregations whose partial results (`op by (...) (E)`) aggregate to `op(E)`."""


@functools.lru_cache(maxsize=1024)
def _parsed(query: str) -> object | None:
    try:
        return promql_parser.parse(query)
    except ValueError:
        return None


def aggregation_of(fleet: str, replica: str) -> str | None:
    """The aggregation that makes the fleet query's answer from the replica query's, or None."""
    outer, inner = _parsed(fleet), _parsed(replica)
    if not isinstance(outer, promql_parser.AggregateExpr) or inner is None:
        return None
    op = str(outer.op)
    if outer.modifier is not None or outer.param is not None:
        return None
    if op in WHOLE and str(outer.expr) == str(inner):
        return op
    if (
        op in AGAIN
        and isinstance(inner, promql_parser.AggregateExpr)
        and str(inner.op) == op
        and inner.param is None
        and str(inner.expr) == str(outer.expr)
    ):
        return op
    return None


def aggregate(op: str, values: Array, present: Mask) -> tuple[Array, Mask]:
    """`op` across the rows (series) of `values` at each step, where `present` says a series has
    a sample; the result's values and the steps that have one."""
    some: Mask = np.asarray(present.any(axis=0), dtype=np.bool_)
    if op in ("sum", "avg"):
        total: Array = np.where(present, values, 0.0).sum(axis=0)
        if op == "avg":
            with np.errstate(divide="ignore", invalid="ignore"):
                total = total / present.sum(axis=0)
        return total, some
    assert op in ("max", "min"), op
    usable = present & ~np.isnan(values)
    picked = np.where(usable, values, -np.inf if op == "max" else np.inf)
    out: Array = picked.max(axis=0) if op == "max" else picked.min(axis=0)
    out[~usable.any(axis=0)] = np.nan
    return out, some
