"""promtool's expanding notation, against its documented semantics."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from signals.notation import MISSING, STALE, NotationError, compress, expand, parse_values


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("-2+4x3", [-2, 2, 6, 10]),  # promtool's own examples
        ("1-2x4", [1, -1, -3, -5, -7]),
        ("1x4", [1, 1, 1, 1, 1]),
        ("1 2 3", [1, 2, 3]),
        ("1e3 2.5E-1 .5 +3", [1000, 0.25, 0.5, 3]),
        ("1e-3+1e-3x2", [0.001, 0.002, 0.003]),
        ("0x2", [0, 0, 0]),  # not hexadecimal in a series description
    ],
)
def test_expands_like_promtool(text: str, expected: list[float]) -> None:
    assert expand(text) == pytest.approx(expected)


def test_gaps_and_stale() -> None:
    assert expand("1 _x3 stale") == [1.0, MISSING, MISSING, MISSING, STALE]
    assert expand("_ 2") == [MISSING, 2.0]
    assert expand("stalex2") == [STALE, STALE, STALE]
    values = parse_values("1 _ 3 stale")
    assert values[0] == 1 and math.isnan(values[1]) and values[2] == 3 and math.isnan(values[3])


@pytest.mark.parametrize(
    ("text", "item", "fragment"),
    [
        ("1 NaN", 2, "NaN and Inf"),
        ("Inf", 1, "NaN and Inf"),
        ("-inf", 1, "NaN and Inf"),
        ("1 2 abc", 3, "not a number"),
        ("1+2", 1, "not a number"),
        ("1x", 1, "not a number"),
        ("1e999", 1, "infinity"),
        ("{{schema:1}}", 1, "native histogram"),
        ("1x99999999999", 1, "repeat count"),
    ],
)
def test_rejects_with_the_item(text: str, item: int, fragment: str) -> None:
    with pytest.raises(NotationError) as err:
        parse_values(text)
    assert err.value.item == item
    assert fragment in str(err.value)


@given(a=st.integers(-(10**6), 10**6), b=st.integers(-1000, 1000), n=st.integers(0, 200))
def test_a_plus_b_x_n_is_n_plus_one_values(a: int, b: int, n: int) -> None:
    sign = "+" if b >= 0 else "-"
    values = expand(f"{a}{sign}{abs(b)}x{n}")
    assert len(values) == n + 1
    assert values == [a + i * b for i in range(n + 1)]


@given(n=st.integers(1, 500))
def test_blank_x_n_is_n_gaps(n: int) -> None:
    assert expand(f"_x{n}") == [MISSING] * n


@given(
    st.lists(
        st.one_of(st.none(), st.floats(-1e9, 1e9, allow_nan=False).map(lambda v: float(f"{v:.6g}"))),
        min_size=1,
        max_size=300,
    )
)
def test_compress_round_trips(values: list[float | None]) -> None:
    array = np.array([math.nan if v is None else v for v in values])
    back = parse_values(compress(array))
    assert back.shape == array.shape
    assert np.array_equal(np.isnan(back), np.isnan(array))
    assert np.allclose(back[~np.isnan(back)], array[~np.isnan(array)], rtol=1e-5)


@given(st.lists(st.floats(-1e6, 1e6, allow_nan=False), min_size=1, max_size=50))
def test_plain_fast_path_agrees_with_item_parser(values: list[float]) -> None:
    text = " ".join(f"{v:.6g}" for v in values)
    fast = parse_values(text)
    slow = np.array([float(v) for v in expand(text)])  # type: ignore[arg-type]
    assert np.array_equal(fast, slow)
