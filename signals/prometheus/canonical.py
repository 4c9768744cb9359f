"""A range series in Prometheus's own form, made arrays without a Python object per sample.

A series of a query reply is `{"metric":{...},"values":[[t,"v"],[t,"v"],...]}`, each value a
JSON string. Parsed as JSON, every sample becomes a list, a number and a string, and the
strings are then converted one by one: at a thousand replicas that is 7 M samples and most
of the client's time (about 2.5 s of the read's 2.8 s of CPU with `triage rules` loaded).

Here the samples' bytes are checked to be exactly that form and their brackets and quotes
taken out, so orjson reads them as one flat list of numbers, which numpy makes an array at
C speed: a few passes over the bytes and one parse, no Python object per sample but a float.

What is read is the same, to the last bit, as the series parsed as JSON and each value
with `float` (`replies._samples`), because only what both read alike is read here; anything
else gets None, and the caller parses the series as JSON, which names what is wrong:
- **The form.** The object is `{"metric":{...},"values":[[...]]}` in that order, unspaced.
  Its samples' brackets, commas and quotes, in order, are `[[,""],[,""],...]`: every
  sample a pair, its value quoted, no bracket, comma or quote inside a number.
- **The characters.** The samples hold nothing but digits, `.`, `-`, `+`, `e`, `E` and `NaN`.
  A JSON number is then what `float` reads too, and orjson rounds it as `float` does; what
  JSON does not take (`+1`, `.5`, `1e400`) fails orjson and is left to the caller.
- **What JSON has no number for.** `NaN` is read as JSON's `null`, which numpy makes NaN.
  `+Inf` and `-Inf` are left to the caller (the characters), as is a value of `-0`, which
  JSON reads as the integer 0 and `float` as -0.0.
"""

from __future__ import annotations

import functools

import numpy as np
import orjson

from signals.prometheus.replies import ReplyArrays, _Parsed, _Samples

METRIC_OPEN = b'{"metric":'
VALUES_OPEN = b'},"values":[['
"""Where a series' labels end and its samples begin. Label values are strings, with their
own quotes escaped, so this occurs nowhere else in the object."""
VALUES_CLOSE = b"]]}"

_STRUCTURE = b'[],"'
_NUMBER = b"0123456789.-+eENa"
_OTHER_THAN_STRUCTURE = bytes(sorted(set(range(256)) - set(_STRUCTURE)))


@functools.lru_cache(maxsize=64)
def _skeleton(samples: int) -> bytes:
    """The structure of `samples` samples in Prometheus's form: `[[,""],[,""]]`."""
    return b"[" + b",".join([b'[,""]'] * samples) + b"]"


def _nothing_between(samples: bytes, count: int) -> bool:
    """Whether the structure's bytes touch wherever no number may be: only a sample's time
    (between `[` and `,`) and its value (between the quotes) hold anything else. The samples
    begin with `[[` and end with `]]` as they are cut out of the series."""
    return (
        samples.endswith(b'"]]')
        and samples.count(b',"') == count
        and samples.count(b'"]') == count
        and samples.count(b"],[") == count - 1
    )


def canonical_series(piece: bytes | bytearray, reply: ReplyArrays) -> _Parsed | None:
    """One series object of a matrix reply, parsed; None when it is not in Prometheus's own form."""
    if not piece.startswith(METRIC_OPEN) or not piece.endswith(VALUES_CLOSE):
        return None
    opened = piece.find(VALUES_OPEN)
    if opened < 0:
        return None
    samples = bytes(piece[opened + len(VALUES_OPEN) - 2 : -1])  # [[t,"v"],...]
    skeleton = samples.translate(None, _OTHER_THAN_STRUCTURE)
    count, extra = divmod(len(skeleton) - 1, 6)
    if extra or not count or skeleton != _skeleton(count) or not _nothing_between(samples, count):
        return None
    if samples.translate(None, _STRUCTURE + _NUMBER) or b'"-0"' in samples:
        return None
    numbers = samples.translate(None, b'[]"')
    if b"N" in numbers:
        numbers = numbers.replace(b"NaN", b"null")
    try:
        flat = np.array(orjson.loads(b"[" + numbers + b"]"), dtype=np.float64)
        metric = orjson.loads(piece[: opened + 1] + b"}")["metric"]
    except (orjson.JSONDecodeError, TypeError, ValueError, KeyError):
        return None
    if flat.shape != (2 * count,) or not isinstance(metric, dict):
        return None
    if not all(type(value) is str for value in metric.values()):
        return None
    times = reply.times(flat[0::2].copy())
    return _Parsed(reply.labels(metric), _Samples(times, flat[1::2].copy()), "values")
