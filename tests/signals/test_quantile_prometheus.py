"""The client-side `histogram_quantile` gives what a real Prometheus gives, case for case.

Several hundred bucket sets, random and hostile (out of order, non-monotonic, without
+Inf, one bucket, all zero, all in +Inf, negative and zero bounds, one bound spelt two
ways, tiny and huge counts, NaN and infinite sample values, buckets missing at some
times, `le` values Go parses oddly or not at all), are written as gauges
`h_bucket{case="<n>", le="..."}` at a few timestamps and backfilled into one temporary
Prometheus. For each q one range query `histogram_quantile(q, h_bucket)` answers every
case at once, and each point is compared with `bucket_quantile`: equal within 1e-9
relative (1e-12 absolute), both NaN, or both without a point.

The lookback is shorter than the step, so a sample left out is missing at that time
instead of being filled from the one before.
"""

from __future__ import annotations

import json
import math
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt
import pytest
from promserver import require_prometheus_binaries

from signals.quantile import bucket_quantile, has_result, parse_le
from signals.tempprom import OpenMetricsSeries, TemporaryPrometheus, to_openmetrics

START = 1_760_000_000.0
STEP = 60.0
TIMES = 6
STAMPS = [START + STEP * i for i in range(TIMES)]
QS = ["0", "0.01", "0.25", "0.5", "0.9", "0.99", "1", "-0.5", "1.5", "NaN"]
SEED = 20_260_601
RANDOM_CASES = 560
# to_openmetrics reads NaN as "no sample"; a NaN sample *value* is written as this and
# swapped for `NaN` in the text.
NAN_SAMPLE = 7.77e77
ODD_LE = [
    "1",
    "1.0",
    "+1",
    "1e0",
    "0.5",
    ".5",
    "5.",
    "1e-3",
    "2.5E+0",
    "1_0",
    "1__0",
    "_1",
    "0x1p-2",
    "0X1.8P1",
    "0x1",
    "1e400",
    "1e-400",
    "-1e400",
    " 1",
    "1 ",
    "",
    "abc",
    "+NaN",
    "Inf",
    "inf",
    "+Infinity",
    "-inf",
    "INF",
    "infin",
    "0",
    "-0",
    "-1.5",
]
_NO_PROXY = urllib.request.build_opener(urllib.request.ProxyHandler({}))
FloatArray = npt.NDArray[np.float64]


@dataclass
class Bucket:
    """One `h_bucket` series: its `le` text (None: no `le` label) and its samples over the times."""

    le: str | None
    values: FloatArray  # NaN: no sample
    nan_at: npt.NDArray[np.bool_] = field(default_factory=lambda: np.zeros(TIMES, dtype=bool))


Case = list[Bucket]


# ----------------------------------------------------------------- the cases


def spell(rng: np.random.Generator, bound: float) -> str:
    """One of the ways an exporter could write this bound."""
    if bound == math.inf:
        return str(rng.choice(["+Inf", "+Inf", "Inf", "inf", "+Infinity"]))
    if bound == -math.inf:
        return str(rng.choice(["-Inf", "-inf"]))
    forms = [repr(bound), f"{bound:g}", f"{bound:.17g}", f"{bound:e}", bound.hex(), "+" + repr(bound)]
    return forms[int(rng.integers(len(forms)))]


def positive_bounds(rng: np.random.Generator, n: int) -> list[float]:
    style = int(rng.integers(3))
    if style == 0:  # vLLM-like: doubling from a small start
        start = float(rng.choice([0.001, 0.005, 0.01, 0.1, 1.0]))
        return [start * 2.0**i for i in range(n)]
    if style == 1:  # rounded random
        values = np.unique(np.round(rng.uniform(0.001, 100.0, n), 3))
        return [float(v) for v in values if v > 0]
    return [float(i) for i in range(1, n + 1)]


def cumulative(rng: np.random.Generator, n: int, scale: float, integer: bool) -> FloatArray:
    """(n, TIMES) monotonic counts, each time drawn anew; zero increments make empty buckets."""
    if integer:
        steps = rng.integers(0, 4, size=(n, TIMES)).astype(float)
    else:
        steps = rng.exponential(1.0, size=(n, TIMES)) * (rng.random((n, TIMES)) > 0.15)
    return np.cumsum(steps, axis=0) * scale


def random_case(rng: np.random.Generator) -> Case:
    kind = str(
        rng.choice(
            [
                "monotonic",
                "monotonic",
                "non_monotonic",
                "no_inf",
                "single",
                "all_zero",
                "all_in_inf",
                "signed",
                "duplicates",
                "holes",
                "holes",
                "nan_and_inf_values",
                "negative_counts",
            ]
        )
    )
    n = int(rng.integers(1, 14))
    bounds = positive_bounds(rng, n)
    if kind == "signed":
        bounds = sorted({float(b) for b in rng.choice([-5.0, -1.0, -0.25, 0.0, 0.5, 2.0, 10.0], size=n)})
        if rng.random() < 0.3:
            bounds = [-math.inf, *bounds]
    scale = float(rng.choice([1.0, 1.0, 1e-3, 0.1, 1e6, 1e-300, 1e290, 5e-324]))
    integer = bool(rng.random() < 0.4)
    with_inf = kind != "no_inf"
    all_bounds = [*bounds, math.inf] if with_inf else bounds
    if kind == "single":
        all_bounds = [math.inf] if rng.random() < 0.5 else bounds[:1]
    counts = cumulative(rng, len(all_bounds), scale, integer)
    if kind == "all_zero":
        counts[:] = 0.0
    elif kind == "all_in_inf":
        counts[:-1] = 0.0
    elif kind == "non_monotonic":
        counts = counts + rng.normal(0.0, 1.5, counts.shape) * scale
    elif kind == "negative_counts":
        counts = counts - rng.uniform(0.0, 3.0) * counts[-1:]
    case = [Bucket(spell(rng, b), counts[i].copy()) for i, b in enumerate(all_bounds)]
    if kind == "duplicates":
        for bucket in list(case):
            bound = parse_le(bucket.le or "")
            if bound is not None and rng.random() < 0.6:
                other = spell(rng, bound)
                if other != bucket.le:
                    share = rng.uniform(0.0, 1.0)
                    case.append(Bucket(other, bucket.values * share))
                    bucket.values = bucket.values * (1 - share)
        case = [case[i] for i in rng.permutation(len(case))]
    if kind == "holes":
        for bucket in case:
            bucket.values[rng.random(TIMES) < 0.25] = np.nan
        if rng.random() < 0.5:  # a time at which the whole group is missing: no point at all
            gone = int(rng.integers(TIMES))
            for bucket in case:
                bucket.values[gone] = np.nan
    if kind == "nan_and_inf_values":
        for bucket in case:
            roll = rng.random(TIMES)
            bucket.nan_at = roll < 0.15
            bucket.values[(roll >= 0.15) & (roll < 0.25)] = math.inf
            bucket.values[(roll >= 0.25) & (roll < 0.28)] = -math.inf
    return case


def odd_le_cases() -> list[Case]:
    """Each odd `le` beside a +Inf bucket, and beside +Inf and 7: together they tell its value apart."""
    ones = np.ones(TIMES)
    cases: list[Case] = []
    for text in ODD_LE:
        cases.append([Bucket(text, ones * 1.0), Bucket("+Inf", ones * 2.0)])
        cases.append([Bucket(text, ones * 1.0), Bucket("7", ones * 1.5), Bucket("+Inf", ones * 2.0)])
    cases.append([Bucket(None, ones * 5.0), Bucket("1", ones * 1.0), Bucket("+Inf", ones * 2.0)])
    cases.append([Bucket(None, ones * 5.0)])
    cases.append([Bucket("abc", ones * 1.0), Bucket("1 ", ones * 2.0)])
    cases.append(
        [Bucket("1", ones * 1.0), Bucket("1.0", ones * 1.0), Bucket("1e0", ones), Bucket("+Inf", ones * 4)]
    )
    return cases


def all_cases() -> list[Case]:
    rng = np.random.default_rng(SEED)
    return odd_le_cases() + [random_case(rng) for _ in range(RANDOM_CASES)]


def openmetrics(cases: Sequence[Case]) -> str:
    series: list[OpenMetricsSeries] = []
    nan_samples = 0
    for index, case in enumerate(cases):
        for bucket in case:
            assert not (bucket.values == NAN_SAMPLE).any()
            values = np.where(bucket.nan_at, NAN_SAMPLE, bucket.values)
            nan_samples += int(bucket.nan_at.sum())
            labels = {"case": str(index)} if bucket.le is None else {"case": str(index), "le": bucket.le}
            series.append(("h_bucket", labels, values, START, STEP))
    text = to_openmetrics(series)
    marker = f" {NAN_SAMPLE!r} "
    assert text.count(marker) == nan_samples
    return text.replace(marker, " NaN ")


def ours(q: float, case: Case) -> tuple[FloatArray, npt.NDArray[np.bool_]]:
    """bucket_quantile and has_result over the buckets Prometheus keeps (a parsable `le`)."""
    kept = [(parse_le(b.le), b) for b in case if b.le is not None]
    usable = [(bound, b) for bound, b in kept if bound is not None]
    uppers = np.array([bound for bound, _ in usable], dtype=float)
    counts = np.array([np.where(b.nan_at, np.nan, b.values) for _, b in usable], dtype=float).reshape(
        -1, TIMES
    )
    present = np.array([b.nan_at | ~np.isnan(b.values) for _, b in usable], dtype=bool).reshape(-1, TIMES)
    return bucket_quantile(q, uppers, counts, present=present), has_result(counts, present)


# ----------------------------------------------------------------- Prometheus


def query_range(url: str, promql: str) -> list[dict[str, object]]:
    params = urllib.parse.urlencode({"query": promql, "start": STAMPS[0], "end": STAMPS[-1], "step": STEP})
    with _NO_PROXY.open(f"{url}/api/v1/query_range?{params}", timeout=30) as response:
        body = json.loads(response.read())
    assert body["status"] == "success", body
    result: list[dict[str, object]] = body["data"]["result"]
    return result


Points = dict[float, float]


@dataclass(frozen=True)
class Answers:
    cases: list[Case]
    quantiles: dict[str, dict[int, Points]]  # q -> case -> time -> value
    raw: dict[int, dict[str | None, Points]]  # case -> le -> time -> value


def points(series: dict[str, object]) -> Points:
    values = series["values"]
    assert isinstance(values, list)
    return {float(t): float(v) for t, v in values}


@pytest.fixture(scope="module")
def answers() -> Iterator[Answers]:
    require_prometheus_binaries()
    cases = all_cases()
    with TemporaryPrometheus(openmetrics(cases), lookback_delta=STEP / 2) as prom:
        quantiles: dict[str, dict[int, Points]] = {}
        for q in QS:
            by_case: dict[int, Points] = {}
            for series in query_range(prom.url, f"histogram_quantile({q}, h_bucket)"):
                metric = series["metric"]
                assert isinstance(metric, dict) and set(metric) == {"case"}, metric
                by_case[int(metric["case"])] = points(series)
            quantiles[q] = by_case
        raw: dict[int, dict[str | None, Points]] = {}
        for series in query_range(prom.url, "h_bucket"):
            metric = series["metric"]
            assert isinstance(metric, dict)
            raw.setdefault(int(metric["case"]), {})[metric.get("le")] = points(series)
    yield Answers(cases, quantiles, raw)


# ----------------------------------------------------------------- comparing


def agree(mine: float, theirs: float) -> bool:
    if math.isnan(mine) or math.isnan(theirs):
        return math.isnan(mine) and math.isnan(theirs)
    if mine == theirs:
        return True
    if math.isinf(mine) or math.isinf(theirs):
        return False
    return abs(mine - theirs) <= max(1e-12, 1e-9 * max(abs(mine), abs(theirs)))


def disagreements(values: FloatArray, present: npt.NDArray[np.bool_], theirs: Points) -> list[str]:
    """Each time at which a computed series and Prometheus's points differ, said in words."""
    problems = []
    for t, stamp in enumerate(STAMPS):
        if not present[t]:
            if stamp in theirs:
                problems.append(f"t{t}: no result here, Prometheus {theirs[stamp]!r}")
        elif stamp not in theirs:
            problems.append(f"t{t}: {values[t]!r} here, no point from Prometheus")
        elif not agree(float(values[t]), theirs[stamp]):
            problems.append(f"t{t}: {values[t]!r} here, Prometheus {theirs[stamp]!r}")
    return problems


def compare(
    answers: Answers, q: str, method: Callable[[float, Case], tuple[FloatArray, npt.NDArray[np.bool_]]]
) -> list[str]:
    problems = []
    for index, case in enumerate(answers.cases):
        values, present = method(float(q), case)
        for problem in disagreements(values, present, answers.quantiles[q].get(index, {})):
            buckets = [(b.le, b.values.tolist(), b.nan_at.tolist()) for b in case]
            problems.append(f"case {index} {problem}; buckets {buckets}")
    return problems


# ----------------------------------------------------------------- the tests


def test_the_series_went_in_as_written(answers: Answers) -> None:
    """`le` spellings kept as written, gaps kept as gaps, NaN samples as NaN, values exact."""
    for index, case in enumerate(answers.cases):
        for bucket in case:
            want = {
                STAMPS[t]: math.nan if bucket.nan_at[t] else float(bucket.values[t])
                for t in range(TIMES)
                if bucket.nan_at[t] or not math.isnan(bucket.values[t])
            }
            # An empty label value is no label at all to Prometheus: `le=""` comes back without `le`.
            got = answers.raw.get(index, {}).get(bucket.le or None, {})
            assert got.keys() == want.keys(), (index, bucket.le)
            assert all(agree(got[t], want[t]) and (got[t] == want[t] or math.isnan(want[t])) for t in want)


@pytest.mark.parametrize("q", QS)
def test_bucket_quantile_equals_prometheus(answers: Answers, q: str) -> None:
    problems = compare(answers, q, ours)
    assert not problems, f"{len(problems)} disagreements, first ones:\n" + "\n".join(problems[:8])


def test_the_cases_reach_every_kind_of_answer(answers: Answers) -> None:
    """Prometheus itself answered finite, NaN, +-Inf, and no point, so each path was compared."""
    kinds = {"finite": 0, "nan": 0, "inf": 0, "no point": 0}
    for q in QS:
        for index in range(len(answers.cases)):
            got = answers.quantiles[q].get(index, {})
            kinds["no point"] += TIMES - len(got)
            for value in got.values():
                kinds["nan" if math.isnan(value) else "inf" if math.isinf(value) else "finite"] += 1
    assert all(count >= 50 for count in kinds.values()), kinds
    assert len(answers.cases) >= 600


def test_the_comparison_catches_a_wrong_answer(answers: Answers) -> None:
    """The tolerance is tight, and a textbook interpolation, wrong at the edges, is caught."""
    finite = [v for by_case in answers.quantiles.values() for p in by_case.values() for v in p.values()]
    finite = [v for v in finite if math.isfinite(v) and abs(v) >= 1e-6]
    assert len(finite) > 500
    assert all(agree(v, v) and not agree(v, v * (1 + 1e-6)) for v in finite)
    assert not agree(math.nan, 1.0) and not agree(1.0, math.nan)
    assert not agree(math.inf, -math.inf) and not agree(math.inf, 1e308) and not agree(-1e308, -math.inf)
    everywhere, nowhere = np.ones(TIMES, dtype=bool), np.zeros(TIMES, dtype=bool)
    assert len(disagreements(np.ones(TIMES), everywhere, {})) == TIMES
    assert len(disagreements(np.full(TIMES, math.nan), nowhere, {STAMPS[0]: math.nan})) == 1
    assert len(disagreements(np.full(TIMES, math.nan), everywhere, dict.fromkeys(STAMPS, math.nan))) == 0

    def textbook(q: float, case: Case) -> tuple[FloatArray, npt.NDArray[np.bool_]]:
        """np.interp over (count, bound): from the first bound rather than 0, and into +Inf."""
        values, present = ours(q, case)
        usable = [(parse_le(b.le), b.values) for b in case if b.le is not None and parse_le(b.le) is not None]
        if len(usable) < 2 or not 0 < q < 1:
            return values, present
        usable.sort(key=lambda pair: pair[0] or 0.0)
        bounds = np.array([bound for bound, _ in usable], dtype=float)
        for t in range(TIMES):
            column = np.array([v[t] for _, v in usable])
            if np.isfinite(column).all() and bounds[-1] == math.inf and column[-1] > 0:
                values[t] = np.interp(q * column[-1], column, np.where(np.isinf(bounds), 1e9, bounds))
        return values, present

    caught = compare(answers, "0.5", textbook) + compare(answers, "0.99", textbook)
    assert len(caught) >= 100
