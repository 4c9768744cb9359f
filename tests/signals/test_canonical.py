"""A series in Prometheus's own form is read without JSON's objects (`signals.prometheus.canonical`).

Whatever the bytes, `canonical_series` either declines (None) or reads exactly what the
series parsed as JSON reads (`ReplyArrays.series`): the same labels, and times and values
equal to the last bit, NaN where NaN and the sign of zero kept. It declines everything the
JSON parse refuses, and reads Prometheus's own replies, which are most of what a round reads.
"""

from __future__ import annotations

import math
import struct
from typing import Any

import numpy as np
import orjson
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from signals.prometheus.canonical import canonical_series
from signals.prometheus.replies import ReplyArrays, _Failure, _Parsed

START = 1_760_000_000


def go_float(x: float) -> str:
    """A value as Prometheus writes it (`strconv.FormatFloat(v, 'f', -1, 64)`)."""
    if math.isnan(x):
        return "NaN"
    if math.isinf(x):
        return "+Inf" if x > 0 else "-Inf"
    return np.format_float_positional(x, unique=True, trim="-")


def piece(labels: dict[str, str], pairs: list[list[Any]]) -> bytes:
    return orjson.dumps({"metric": labels, "values": pairs})


def as_json(data: bytes) -> _Parsed | str | object:
    """What the series reads as parsed whole as JSON: `_Parsed`, "refused", or the object as it is."""
    try:
        return ReplyArrays().series(orjson.loads(data))
    except (orjson.JSONDecodeError, _Failure):
        return "refused"


def bits(values: np.ndarray) -> bytes:
    return np.asarray(values, dtype=np.float64).tobytes()


def assert_same_or_declined(data: bytes) -> _Parsed | None:
    ours = canonical_series(data, ReplyArrays())
    if ours is None:
        return None
    theirs = as_json(data)
    assert isinstance(theirs, _Parsed), f"read {data[:120]!r}, which JSON reads as {theirs!r}"
    assert ours.labels == theirs.labels and ours.key == theirs.key == "values"
    assert bits(ours.samples.times) == bits(theirs.samples.times)
    assert bits(ours.samples.values) == bits(theirs.samples.values)  # NaN payload and -0.0 too
    return ours


finite = st.floats(allow_nan=False, allow_infinity=False)
value_text = st.one_of(
    finite.map(go_float),
    finite.map(repr),  # exponents, as other servers may write them
    st.integers(min_value=-(10**30), max_value=10**30).map(str),
    st.sampled_from(["NaN", "+Inf", "-Inf", "-0", "0", "-0.0", "-0e0", "1e400", "1e-400", "+1", ".5", "5."]),
    st.text(alphabet="0123456789.-+eENaIf", min_size=1, max_size=8),
    st.binary(min_size=8, max_size=8).map(lambda b: go_float(struct.unpack("d", b)[0])),  # any double
)
labels = st.dictionaries(
    st.text(min_size=1, max_size=6),
    st.one_of(st.text(max_size=12), st.sampled_from(['},"values":[[', '"]]}', "[,]", "\\"])),
    max_size=4,
)


@settings(max_examples=500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    labels=labels, values=st.lists(value_text, min_size=1, max_size=12), step=st.sampled_from([15, 30, 0.5])
)
@example(labels={"pod": "a"}, values=["-0"], step=30)
@example(labels={"pod": "a"}, values=["NaN", "1", "+Inf"], step=30)
def test_any_series_reads_as_json_reads_it_or_is_declined(
    labels: dict[str, str], values: list[str], step: float
) -> None:
    pairs = [[START + step * k, text] for k, text in enumerate(values)]
    assert_same_or_declined(piece(labels, pairs))


@settings(max_examples=500, deadline=None)
@given(
    values=st.lists(finite.map(go_float), min_size=1, max_size=6),
    at=st.integers(min_value=0, max_value=10_000),
    edit=st.sampled_from(["insert", "delete", "replace"]),
    byte=st.sampled_from(list(b'[],"{}:\\-.0123456789eNaIn ')),
)
def test_a_series_broken_anywhere_is_declined_or_read_as_json_reads_it(
    values: list[str], at: int, edit: str, byte: int
) -> None:
    data = bytearray(piece({"pod": "p-1"}, [[START + 30 * k, v] for k, v in enumerate(values)]))
    at %= len(data)
    if edit == "insert":
        data.insert(at, byte)
    elif edit == "delete":
        del data[at]
    else:
        data[at] = byte
    assert_same_or_declined(bytes(data))


@pytest.mark.parametrize(
    "pairs",
    [
        [[START, "1"], [START + 30]],  # a sample without its value
        [[START, "1", "2"]],  # three parts
        [[START, 1]],  # an unquoted value
        [[str(START), "1"]],  # a quoted time
        [[START, "1,2"]],  # a comma inside a value
        [[None, "1"]],  # no time
        [[START, "true"]],
        [[START, "1e400"]],  # beyond a double: float reads inf, JSON refuses
        [[START, "+Inf"]],
        [[START, "-0"]],
        [[START, [1]]],
    ],
)
def test_what_is_not_exactly_prometheus_s_form_is_declined(pairs: list[list[Any]]) -> None:
    data = piece({"pod": "p-1"}, pairs)
    assert canonical_series(data, ReplyArrays()) is None


def test_other_key_orders_and_spacing_are_declined() -> None:
    pairs = [[START, "1"]]
    assert canonical_series(orjson.dumps({"values": pairs, "metric": {"a": "b"}}), ReplyArrays()) is None
    spaced = b'{"metric": {"a": "b"}, "values": [[1760000000, "1"]]}'
    assert canonical_series(spaced, ReplyArrays()) is None
    assert isinstance(as_json(spaced), _Parsed)


def test_prometheus_s_own_series_are_read_here_nan_included() -> None:
    values = ["0.25", "NaN", "12", "0.000001", "123456789012345678901234", "-3.5", "1e-05"]
    data = piece(
        {"__name__": "x", "pod": "p-1", "le": "+Inf"}, [[START + 15 * k, v] for k, v in enumerate(values)]
    )
    ours = assert_same_or_declined(data)
    assert ours is not None, "Prometheus's own form must be read here"
    assert ours.labels == {"__name__": "x", "pod": "p-1", "le": "+Inf"}
    assert np.isnan(ours.samples.values[1]) and ours.samples.values[3] == 1e-6
    assert not ours.samples.times.flags.writeable and ours.samples.values.flags.writeable


def test_series_sampled_alike_share_one_times_array() -> None:
    reply = ReplyArrays()
    first = canonical_series(piece({"pod": "a"}, [[START, "1"], [START + 30, "2"]]), reply)
    second = canonical_series(piece({"pod": "b"}, [[START, "3"], [START + 30, "4"]]), reply)
    assert first is not None and second is not None
    assert first.samples.times is second.samples.times
