"""The client-side `histogram_quantile`: each rule of Prometheus's on hand-computed buckets.

The numbers here are worked out from `promql/quantile.go` by hand; a transliteration of
that Go, one time at a time, checks the vectorised search over many random cases; and
tests/signals/test_quantile_prometheus.py holds both to a real Prometheus.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from signals.quantile import bucket_quantile, has_result, parse_le

INF = math.inf
NAN = math.nan


def one(q: float, uppers: Sequence[float], counts: Sequence[float], nan_is_sample: bool = False) -> float:
    """The quantile of one histogram at one time."""
    column = np.asarray(counts, dtype=float)[:, np.newaxis]
    present = np.ones(column.shape, dtype=bool) if nan_is_sample else None
    return float(bucket_quantile(q, np.asarray(uppers, dtype=float), column, present=present)[0])


def same(a: float, b: float) -> bool:
    return (math.isnan(a) and math.isnan(b)) or a == b or math.isclose(a, b, rel_tol=1e-12)


# ----------------------------------------------------------------- parse_le


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("0.5", 0.5),
        ("1", 1.0),
        ("1.0", 1.0),
        ("1e-3", 0.001),
        ("2.5E+2", 250.0),
        ("+1", 1.0),
        ("-2", -2.0),
        (".5", 0.5),
        ("5.", 5.0),
        ("+Inf", INF),
        ("Inf", INF),
        ("inf", INF),
        ("-Inf", -INF),
        ("+infinity", INF),
        ("INFINITY", INF),
        ("1_000", 1000.0),
        ("1_0.2_5e1_0", 10.25e10),
        ("0x1p-2", 0.25),
        ("0X1.8P1", 3.0),
        ("0x_1p0", 1.0),
        ("1e-400", 0.0),
    ],
)
def test_le_values_prometheus_reads(text: str, value: float) -> None:
    assert parse_le(text) == value


def test_le_nan_parses_as_a_bound() -> None:
    parsed = parse_le("NaN")
    assert parsed is not None and math.isnan(parsed)
    parsed = parse_le("nan")
    assert parsed is not None and math.isnan(parsed)


@pytest.mark.parametrize(
    "text",
    [
        "",  # no `le` label at all reads as the empty string
        " 1",
        "1 ",
        "+NaN",
        "infin",
        "1e400",  # a range error in Go, so the series is skipped
        "-1e400",
        "0x1p2000",
        "0x1",  # a hexadecimal float needs its p exponent
        "0x",
        "1e",
        "1e+",
        ".",
        "_1",
        "1_",
        "1__0",
        "1_.5",
        "1e_1",
        "1,5",
        "abc",
        "ınf",  # dotless i: Go compares ASCII only
        "١",  # an Arabic-Indic digit
    ],
)
def test_le_values_prometheus_skips(text: str) -> None:
    assert parse_le(text) is None


# ----------------------------------------------------------------- the rules of bucketQuantile


def test_q_out_of_range_and_nan_win_over_everything() -> None:
    no_inf = ([1.0, 2.0], [1.0, 2.0])
    assert one(-0.1, *no_inf) == -INF
    assert one(1.1, *no_inf) == INF
    assert one(-INF, [INF], [0.0]) == -INF
    assert math.isnan(one(NAN, [1.0, INF], [1.0, 2.0]))


def test_buckets_are_sorted_by_bound_first() -> None:
    assert one(0.75, [INF, 8.0, 4.0], [8.0, 8.0, 4.0]) == 6.0


def test_linear_interpolation_from_zero_in_the_lowest_bucket() -> None:
    assert one(0.25, [4.0, 8.0, INF], [4.0, 8.0, 8.0]) == 2.0
    assert one(0.75, [4.0, 8.0, INF], [4.0, 8.0, 8.0]) == 6.0


def test_a_rank_on_a_boundary_gives_that_bound() -> None:
    assert one(0.5, [1.0, 2.0, INF], [2.0, 4.0, 4.0]) == 1.0
    assert one(1.0, [1.0, 2.0, INF], [2.0, 10.0, 10.0]) == 2.0


def test_equal_bounds_are_merged_by_summing() -> None:
    # 2 and 2 merge into one bucket of 3: rank 1.5 is half way into it.
    assert one(0.25, [2.0, 2.0, INF], [1.0, 2.0, 6.0]) == 1.0
    # Two +Inf buckets merge into one: fewer than two buckets left.
    assert math.isnan(one(0.5, [INF, INF], [1.0, 2.0]))


def test_fewer_than_two_buckets_is_nan() -> None:
    assert math.isnan(one(0.5, [INF], [5.0]))
    assert math.isnan(one(0.5, [1.0], [5.0]))


def test_no_inf_bucket_is_nan() -> None:
    assert math.isnan(one(0.5, [1.0, 2.0], [1.0, 2.0]))
    assert math.isnan(one(0.5, [-INF, 2.0], [1.0, 2.0]))


def test_zero_observations_is_nan() -> None:
    assert math.isnan(one(0.5, [1.0, INF], [0.0, 0.0]))


def test_a_rank_in_the_inf_bucket_gives_the_second_highest_bound() -> None:
    assert one(0.5, [1.0, 2.0, INF], [1.0, 2.0, 10.0]) == 2.0


def test_a_lowest_bucket_at_or_below_zero_gives_its_bound() -> None:
    assert one(0.3, [-2.0, 1.0, INF], [5.0, 6.0, 10.0]) == -2.0
    assert one(0.3, [0.0, 1.0, INF], [5.0, 6.0, 10.0]) == 0.0
    assert one(0.1, [-INF, 1.0, INF], [1.0, 2.0, 4.0]) == -INF
    # The bound itself, not an interpolation (which would be 0 * 0/0 = NaN here).
    assert one(0.0, [0.0, 1.0, INF], [0.0, 5.0, 10.0]) == 0.0


def test_interpolation_between_negative_bounds() -> None:
    assert one(0.75, [-4.0, -2.0, INF], [2.0, 4.0, 4.0]) == -3.0


def test_counts_are_made_monotonic() -> None:
    # 2 is raised to 4: rank 4.8 lands in (2, 4] holding 6 - 4 = 2.
    assert one(0.6, [1.0, 2.0, 4.0, INF], [4.0, 2.0, 6.0, 8.0]) == pytest.approx(2.8, rel=1e-15)


def test_an_empty_bucket_under_the_rank_is_zero_over_zero() -> None:
    assert math.isnan(one(0.0, [1.0, 2.0, INF], [0.0, 5.0, 10.0]))
    assert one(0.0, [1.0, 2.0, INF], [2.0, 5.0, 10.0]) == 0.0


def test_an_infinite_lower_bound_makes_interpolation_nan() -> None:
    assert math.isnan(one(0.4, [-INF, 1.0, INF], [1.0, 2.0, 4.0]))


def test_negative_counts_go_through_the_same_rules() -> None:
    # Raised to -1, -1, -1: rank -0.5 is above every count, so the +Inf bucket.
    assert one(0.5, [1.0, 2.0, INF], [-1.0, -2.0, -4.0]) == 2.0
    assert one(0.5, [1.0, 2.0, INF], [-2.0, -1.0, 2.0]) == 2.0


def test_nan_sample_values_poison_what_they_touch() -> None:
    # A NaN count is never >= the rank, so the search steps over it.
    assert one(0.5, [5.0, INF], [NAN, 4.0], nan_is_sample=True) == 5.0
    # NaN observations: a NaN rank, nothing reaches it: the +Inf bucket.
    assert one(0.5, [1.0, 2.0, INF], [1.0, 2.0, NAN], nan_is_sample=True) == 2.0
    # Interpolating against a NaN count.
    assert math.isnan(one(0.2, [1.0, 2.0, INF], [NAN, 5.0, 10.0], nan_is_sample=True))


def test_a_nan_first_count_turns_monotonicity_off() -> None:
    uppers = [1.0, 2.0, 3.0, 4.0, 5.0, INF]
    # Search lands in (4, 5]; the count below it is 2 as written, not raised to 5.
    assert one(0.6, uppers, [NAN, 1.0, 5.0, 2.0, 8.0, 10.0], nan_is_sample=True) == pytest.approx(4 + 4 / 6)
    assert one(0.6, uppers, [0.5, 1.0, 5.0, 2.0, 8.0, 10.0]) == pytest.approx(4 + 1 / 3)


def test_the_search_is_go_bisection_even_when_nan_breaks_the_order() -> None:
    # Bisection probes index 2 (reached), then 1 (NaN: not reached): bucket (2, 3],
    # interpolated against the NaN below it. A first-match scan would stop at index 0.
    uppers = [1.0, 2.0, 3.0, 4.0, INF]
    assert math.isnan(one(0.1, uppers, [5.0, NAN, 6.0, 7.0, 10.0], nan_is_sample=True))
    # Unraised (NaN first), 5 at index 1 reaches rank 5 but bisection probes index 2
    # (0.5: not reached), then 3: bucket (3, 4], not (1, 2].
    assert one(0.5, uppers, [NAN, 5.0, 0.5, 7.0, 10.0], nan_is_sample=True) == 3 + 4.5 / 6.5


def test_a_nan_bound_gives_nan_where_it_has_a_sample() -> None:
    result = bucket_quantile(0.5, [NAN, 1.0, INF], [[1.0, NAN], [1.0, 1.0], [2.0, 2.0]])
    assert math.isnan(result[0]) and result[1] == 1.0


# ----------------------------------------------------------------- over time: NaN versus no result


def test_buckets_missing_at_some_times() -> None:
    uppers = [1.0, 2.0, INF]
    counts = [
        [1.0, NAN, 1.0, NAN],
        [2.0, 2.0, NAN, NAN],
        [4.0, 4.0, 4.0, NAN],
    ]
    got = bucket_quantile(0.5, uppers, counts)
    assert got[0] == 2.0  # rank 2 lands on the 2 bucket's count
    assert got[1] == 2.0  # without the 1 bucket: rank 2 is the top of (0, 2]
    assert got[2] == 1.0  # rank 2 is in the +Inf bucket: the second-highest bound
    assert math.isnan(got[3])
    assert has_result(counts).tolist() == [True, True, True, False]


def test_no_inf_bucket_at_a_time_is_nan_but_a_result() -> None:
    counts = [[1.0, 1.0], [4.0, NAN]]
    got = bucket_quantile(0.5, [1.0, INF], counts)
    assert got[0] == 1.0 and math.isnan(got[1])
    assert has_result(counts).tolist() == [True, True]


def test_out_of_range_q_only_where_there_is_a_result() -> None:
    counts = [[1.0, NAN], [4.0, NAN]]
    assert bucket_quantile(2.0, [1.0, INF], counts)[0] == INF
    assert math.isnan(bucket_quantile(2.0, [1.0, INF], counts)[1])


def test_no_buckets_at_all() -> None:
    empty = np.empty((0, 3))
    assert np.isnan(bucket_quantile(0.5, np.empty(0), empty)).all()
    assert not has_result(empty).any()


def test_present_tells_a_nan_sample_from_a_missing_one() -> None:
    counts = [[NAN, NAN], [4.0, 4.0]]
    present = [[True, False], [True, True]]
    got = bucket_quantile(0.5, [5.0, INF], counts, present=present)
    assert got[0] == 5.0  # a NaN sample in the 5 bucket
    assert math.isnan(got[1])  # the 5 bucket missing: one bucket left
    assert has_result(counts, present).tolist() == [True, True]
    # A value where present says "missing" is not used.
    assert math.isnan(bucket_quantile(0.5, [5.0, INF], [[1.0], [4.0]], present=[[False], [True]])[0])


@pytest.mark.parametrize(
    ("uppers", "counts", "present", "message"),
    [
        ([1.0], [1.0, 2.0], None, "2-D"),
        ([1.0], [[1.0], [2.0]], None, "1 upper bounds for 2"),
        ([1.0, INF], [[1.0], [2.0]], [[True]], "present has shape"),
    ],
)
def test_shapes_are_checked(
    uppers: list[float],
    counts: list[float] | list[list[float]],
    present: list[list[bool]] | None,
    message: str,
) -> None:
    with pytest.raises(ValueError, match=message):
        bucket_quantile(0.5, uppers, counts, present=present)


# ----------------------------------------------------------------- vectorised = Go, one time at a time


def go_bucket_quantile(q: float, buckets: list[tuple[float, float]]) -> float:
    """promql/quantile.go's bucketQuantile, line for line, on (bound, count) pairs without NaN bounds."""
    with np.errstate(all="ignore"):
        return _go_bucket_quantile(q, buckets)


def _go_bucket_quantile(q: float, buckets: list[tuple[float, float]]) -> float:
    if math.isnan(q):
        return NAN
    if q < 0:
        return -INF
    if q > 1:
        return INF
    buckets = sorted(buckets, key=lambda b: b[0])
    if buckets[-1][0] != INF:
        return NAN
    merged = [list(buckets[0])]
    for bound, count in buckets[1:]:
        if bound == merged[-1][0]:
            merged[-1][1] += count
        else:
            merged.append([bound, count])
    highest = merged[0][1]
    for pair in merged[1:]:
        if pair[1] > highest:
            highest = pair[1]
        elif pair[1] < highest:
            pair[1] = highest
    if len(merged) < 2:
        return NAN
    observations = merged[-1][1]
    if observations == 0:
        return NAN
    rank = q * observations
    low, high = 0, len(merged) - 1
    while low < high:
        middle = (low + high) // 2
        if not merged[middle][1] >= rank:
            low = middle + 1
        else:
            high = middle
    b = low
    if b == len(merged) - 1:
        return merged[-2][0]
    if b == 0 and merged[0][0] <= 0:
        return merged[0][0]
    start, end, count = 0.0, merged[b][0], merged[b][1]
    if b > 0:
        start = merged[b - 1][0]
        count -= merged[b - 1][1]
        rank -= merged[b - 1][1]
    return float(np.float64(start) + (np.float64(end) - start) * (np.float64(rank) / np.float64(count)))


BOUNDS = st.sampled_from([-INF, -2.0, -0.5, 0.0, 0.25, 1.0, 1.0, 2.5, 10.0, 1e9, INF, INF])
COUNTS = st.one_of(
    st.sampled_from([0.0, 1.0, 2.0, 3.0, 5.0, 8.0, NAN, INF, -1.0]),
    st.floats(min_value=-10.0, max_value=1e6, allow_nan=False, allow_infinity=False),
)
QS = st.sampled_from([0.0, 0.01, 0.25, 0.5, 0.9, 0.99, 1.0, -0.5, 1.5, NAN])


@settings(max_examples=400, deadline=None)
@given(
    q=QS,
    uppers=st.lists(BOUNDS, min_size=0, max_size=8),
    data=st.data(),
    nan_is_sample=st.booleans(),
)
def test_vectorised_equals_go_at_every_time(
    q: float, uppers: list[float], data: st.DataObject, nan_is_sample: bool
) -> None:
    times = 5
    counts = np.array(
        data.draw(
            st.lists(
                st.lists(COUNTS, min_size=times, max_size=times), min_size=len(uppers), max_size=len(uppers)
            )
        ),
        dtype=float,
    ).reshape(len(uppers), times)
    present = (
        np.array(
            data.draw(st.lists(st.booleans(), min_size=counts.size, max_size=counts.size)), dtype=bool
        ).reshape(counts.shape)
        if nan_is_sample
        else ~np.isnan(counts)
    )
    got = bucket_quantile(q, uppers, counts, present=present if nan_is_sample else None)
    assert has_result(counts, present if nan_is_sample else None).tolist() == present.any(axis=0).tolist()
    for t in range(times):
        buckets = [(u, counts[i, t]) for i, u in enumerate(uppers) if present[i, t]]
        want = go_bucket_quantile(q, buckets) if buckets else NAN
        assert same(got[t], want), (t, buckets, got[t], want)
