"""Prometheus's expanding series notation, read exactly as `promtool test rules` reads it.

A fixture's `values` string is a space-separated list of items:

- `a` one sample; `axn` the value a, n+1 times (shorthand for `a+0xn`);
- `a+bxn` / `a-bxn` n+1 samples a, a±b, ..., a±n*b;
- `_` one missing sample; `_xn` n missing samples (a gap cannot increment: n, not n+1);
- `stale` a staleness marker (the series ends there); `stalexn` n+1 of them.

Numbers are decimal, optionally signed, with scientific notation; hexadecimal is not
accepted (promtool disallows it in series descriptions because `0x5` is ambiguous).
`NaN` and `Inf` are valid to promtool but are refused here: a fixture records an
incident, and a NaN sample says nothing a gap (`_`) would not say more honestly.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Final

import numpy as np
import numpy.typing as npt

_NUMBER = r"[+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?"
_ITEM = re.compile(
    rf"^(?:(?P<blank>_)(?:x(?P<blank_n>\d+))?"
    rf"|(?P<stale>stale)(?:x(?P<stale_n>\d+))?"
    rf"|(?P<a>{_NUMBER})(?:(?P<b>[+-](?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?)?x(?P<n>\d+))?)$"
)
_PLAIN_NUMBERS = re.compile(r"^[0-9.eE+\-\s]*$")
_NON_FINITE = re.compile(r"^[+-]?(?:inf(?:inity)?|nan)(?:x\d+)?$", re.IGNORECASE)

MAX_REPEAT: Final = 10_000_000


class NotationError(ValueError):
    """A values string that promtool's notation does not allow; `item` is 1-based."""

    def __init__(self, item: int, token: str, message: str) -> None:
        super().__init__(f"item {item} '{token}': {message}")
        self.item = item
        self.token = token
        self.message = message


@dataclass(frozen=True)
class Missing:
    """`_`: no sample at this step."""


@dataclass(frozen=True)
class Stale:
    """`stale`: a staleness marker; the series has ended here."""


MISSING: Final = Missing()
STALE: Final = Stale()
Sample = float | Missing | Stale


def _count(item: int, token: str, digits: str) -> int:
    n = int(digits)
    if n > MAX_REPEAT:
        raise NotationError(item, token, f"repeat count {n} is larger than {MAX_REPEAT:,}")
    return n


def _expand(text: str, missing: Sample, stale: Sample) -> list[Sample]:
    """Expand a values string, `missing` and `stale` standing for `_` and `stale`."""
    out: list[Sample] = []
    append, finite = out.append, math.isfinite  # bound once: the loop runs once per sample
    for index, token in enumerate(text.split(), start=1):
        if "x" not in token and "_" not in token:
            # One plain number, by far the commonest item: what float() reads here is what the
            # notation's number is (no underscores, no hexadecimal); NaN, Inf, overflow and
            # anything else go on to be told apart below.
            try:
                value = float(token)
            except ValueError:
                pass
            else:
                if finite(value):
                    append(value)
                    continue
        match = _ITEM.match(token)
        if match is None:
            if _NON_FINITE.match(token):
                raise NotationError(index, token, "NaN and Inf are not allowed; use _ for a missing sample")
            if "{{" in token or "}}" in token:
                raise NotationError(index, token, "native histogram samples are not supported")
            raise NotationError(index, token, "not a number, a+bxn, axn, _, _xn or stale")
        if match["blank"]:
            n = _count(index, token, match["blank_n"]) if match["blank_n"] else 1
            out.extend([missing] * n)
        elif match["stale"]:
            n = _count(index, token, match["stale_n"]) + 1 if match["stale_n"] else 1
            out.extend([stale] * n)
        else:
            a = float(match["a"])
            if match["n"] is None:
                n, b = 0, 0.0
            else:
                n = _count(index, token, match["n"])
                b = float(match["b"]) if match["b"] else 0.0
            # a + i*b is monotonic in i, so the ends bound every step.
            if not (math.isfinite(a) and math.isfinite(a + n * b)):
                raise NotationError(index, token, "value overflows to infinity")
            out.extend([a + i * b for i in range(n + 1)])
    return out


def expand(text: str) -> list[Sample]:
    """Expand a values string into one entry per step: a float, MISSING or STALE."""
    return _expand(text, MISSING, STALE)


def parse_values(text: str) -> npt.NDArray[np.float64]:
    """Expand a values string into float64 samples, NaN where a step holds no sample.

    Missing (`_`) and stale steps both become NaN: neither carries a value, and the
    diagnosis treats no-value as unknown, never as zero. Plain number lists (what a
    capture writes, and by far the bulk of a large fixture) take a vectorised path.
    """
    if _PLAIN_NUMBERS.match(text):
        try:
            array = np.array(text.split(), dtype=np.float64)
        except ValueError:
            array = None
        if array is not None:
            if not np.isfinite(array).all():
                bad = int(np.flatnonzero(~np.isfinite(array))[0])
                raise NotationError(bad + 1, text.split()[bad], "value overflows to infinity")
            return array
    return np.array(_expand(text, math.nan, math.nan), dtype=np.float64)


def compress(values: npt.ArrayLike, precision: int = 6) -> str:
    """Write samples back in the notation, runs of equal values as `axn`, NaN as `_`.

    The inverse of `parse_values` up to the rounding to `precision` significant digits.
    """
    array = np.asarray(values, dtype=np.float64)
    items: list[str] = []
    i = 0
    while i < len(array):
        v = array[i]
        j = i + 1
        if math.isnan(v):
            while j < len(array) and math.isnan(array[j]):
                j += 1
            run = j - i
            items.append("_" if run == 1 else f"_x{run}")
        else:
            text = f"{v:.{precision}g}"
            while j < len(array) and not math.isnan(array[j]) and f"{array[j]:.{precision}g}" == text:
                j += 1
            run = j - i
            items.append(text if run == 1 else f"{text}x{run - 1}")
        i = j
    return " ".join(items)
