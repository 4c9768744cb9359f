"""Which fleet views are their replica view aggregated, and the aggregation's PromQL semantics.

Prometheus itself holds every derived view of the bundled catalog to its own answer in
`tests/signals/test_plan.py`; here, the forms recognised beside the look-alikes that must be
sent as written, and what NaN values and missing samples do.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from signals.across import aggregate, aggregation_of
from signals.catalog import QueryOptions, load_catalog, resolve
from signals.plan import plan_round, unshared
from signals.prometheus import QueryResult
from signals.prometheus.replies import capped_warning
from signals.views import render_views

R = 'max by (instance) (vllm:kv_cache_usage_perc{namespace="llm"})'
E = "(rate(DCGM_FI_DEV_THERMAL_VIOLATION{}[5m]) > 0)"


@pytest.mark.parametrize(
    ("fleet", "replica", "op"),
    [
        (f"avg({R})", R, "avg"),
        (f"sum({R})", R, "sum"),
        (f"max( {R} )", R, "max"),  # spacing is not meaning
        (f"max({E})", f"max by (instance, gpu) ({E})", "max"),
        (f"min({E})", f"min without (UUID) ({E})", "min"),
        (f"sum({E})", f"sum by (instance) ({E})", "sum"),
    ],
)
def test_an_aggregation_of_the_replica_view_is_recognised(fleet: str, replica: str, op: str) -> None:
    assert aggregation_of(fleet, replica) == op


@pytest.mark.parametrize(
    ("fleet", "replica"),
    [
        (f"avg({E})", f"max by (instance, gpu) ({E})"),  # an average of maxima is not the average
        (f"max({E})", f"sum by (instance) ({E})"),  # another aggregation inside
        (f"avg({E}) / 100", f"max by (instance) ({E}) / 100"),  # a binary operation around it
        (f"max by (namespace) ({R})", R),  # the fleet view keeps labels
        (f"topk(1, {R})", R),  # a parameter
        (f"count({R})", R),  # not among those computed
        ('avg(max by (instance) (vllm:kv_cache_usage_perc{namespace="other"}))', R),  # other series
        ("sum(rate(x[5m]))", "sum by (instance) (rate(x[1m]))"),  # another window
        ("sum(", R),  # not PromQL
    ],
)
def test_anything_else_is_sent_as_written(fleet: str, replica: str) -> None:
    assert aggregation_of(fleet, replica) is None


def _run(op: str, rows: list[list[float | None]]) -> list[float | None]:
    """`op` over rows of samples, None a missing sample; None where the result has none."""
    values = np.array([[math.nan if v is None else v for v in row] for row in rows], dtype=np.float64)
    present = np.array([[v is not None for v in row] for row in rows])
    out, some = aggregate(op, values, present)
    return [float(v) if s else None for v, s in zip(out, some, strict=True)]


def test_values_follow_promql() -> None:
    nan = math.nan
    rows: list[list[float | None]] = [[1.0, None, nan, nan, 2.0], [3.0, None, 5.0, nan, None]]
    summed, averaged = _run("sum", rows), _run("avg", rows)
    assert summed[:2] == [4.0, None] and summed[4] == 2.0
    assert math.isnan(summed[2]) and math.isnan(summed[3])  # a NaN sample makes the sum NaN
    assert averaged[0] == 2.0 and averaged[1] is None and averaged[4] == 2.0  # over present samples only
    assert math.isnan(averaged[2])
    assert _run("max", rows)[:3] == [3.0, None, 5.0]  # max passes over NaN samples...
    maxed = _run("max", rows)[3]
    assert maxed is not None and math.isnan(maxed)  # ...unless every sample is NaN
    assert _run("min", rows)[:3] == [1.0, None, 5.0]
    assert _run("max", [[-math.inf, 1.0]]) == [-math.inf, 1.0]


def test_a_fleet_view_asks_its_own_query_when_its_replica_answer_failed_or_was_capped() -> None:
    """Aggregated from the first 2,000 replicas of 10,000, the fleet view would read as the whole;
    where the replicas' query failed, the fleet's one series may still be read."""
    plan = plan_round(render_views(resolve(load_catalog(), {"vllm:kv_cache_usage_perc"}), QueryOptions()))
    fleet, replica = plan.views["kv_usage_ratio/fleet"], plan.views["kv_usage_ratio/replica"]
    assert fleet.across == "avg" and fleet.reads == (replica.query,)
    whole = {replica.query: QueryResult(replica.query, warnings=["some other warning"])}
    assert unshared(plan, whole).views["kv_usage_ratio/fleet"] == fleet
    cut = {replica.query: QueryResult(replica.query, warnings=[capped_warning(2000, 10_000)])}
    own = unshared(plan, cut).views["kv_usage_ratio/fleet"]
    assert own.reads == (fleet.query,) and not own.across
    assert unshared(plan, cut).views["kv_usage_ratio/replica"] == replica
