"""Series pushed into a Prometheus through its remote-write receiver (protocol 1.0).

Raw replay used to go through `promtool tsdb create-blocks-from openmetrics`: the series as
text, one line per sample with every label written out again, parsed three times over (once
for the time range, once per two-hour block). For a raw fixture of a thousand series that
is most of the replay's cost. Remote write carries each series' labels once per request and
a sample in a dozen bytes, and Prometheus appends it to its head, which keeps every sample
and label as a backfilled block does and answers PromQL alike (`tests/signals/test_remotewrite.py`
and the raw fixtures' replays in `tests/test_raw_fixtures.py` hold the two to each other).

The wire format is the remote-write 1.0 `WriteRequest`, snappy block-compressed:

    WriteRequest { repeated TimeSeries timeseries = 1; }
    TimeSeries   { repeated Label labels = 1; repeated Sample samples = 2; }
    Label        { string name = 1; string value = 2; }
    Sample       { double value = 1; int64 timestamp = 2; }

It is written here with numpy rather than through generated protobuf classes: the four
messages never change, and a sample must cost a few array operations, not a Python object.

Why the requests are cut by time: Prometheus's head refuses a sample older than an hour
before the newest it holds ("out of bounds"). So every series' samples go in one-hour
slices, oldest first; within a slice any order is accepted. A slice too large for one
request is cut between series.
"""

from __future__ import annotations

import urllib.error
import urllib.request
from collections.abc import Iterable, Iterator

import cramjam
import numpy as np
import numpy.typing as npt

from signals.errors import SignalError
from signals.gridseries import OpenMetricsSeries, checked_series

SLICE_MS = 3_600_000
"""One request's span: Prometheus accepts samples down to an hour before its newest."""

REQUEST_BYTES = 8 << 20
"""About how many uncompressed bytes one request carries before a slice is cut."""

_HEADERS = {
    "Content-Encoding": "snappy",
    "Content-Type": "application/x-protobuf",
    "User-Agent": "llm-triage",
    "X-Prometheus-Remote-Write-Version": "0.1.0",
}
NO_PROXY_OPENER = urllib.request.build_opener(urllib.request.ProxyHandler({}))
"""Opens URLs of a temporary server on loopback directly, whatever proxy the environment names
(`signals.tempprom` asks its readiness through it too)."""
_ROW = 22
"""The longest encoded sample entry: tag, length, tag, 8-byte double, tag, 10-byte varint."""


class RemoteWriteError(SignalError):
    """Prometheus refused a request or could not be reached; the message carries its answer."""


def _varint(n: int) -> bytes:
    out = bytearray()
    while True:
        low, n = n & 0x7F, n >> 7
        if not n:
            out.append(low)
            return bytes(out)
        out.append(low | 0x80)


def _field(tag: int, payload: bytes) -> bytes:
    """A length-delimited field: its tag byte, the payload's length, the payload."""
    return bytes((tag,)) + _varint(len(payload)) + payload


def _labels(pairs: Iterable[tuple[str, str]]) -> bytes:
    """The series' `labels` fields from its (name, value) pairs, `__name__` among them, sorted
    by name as the protocol asks."""
    return b"".join(_field(0x0A, _field(0x0A, k.encode()) + _field(0x12, v.encode())) for k, v in pairs)


class _Grid:
    """The timestamps of a regular grid already encoded as each sample's entry less its value,
    shared by every series on that grid."""

    def __init__(self, start: float, step: float, length: int) -> None:
        # The same float64 arithmetic as `to_openmetrics`, so both paths write the same millisecond.
        self.millis = np.rint((start + np.arange(length) * float(step)) * 1000).astype(np.int64)
        if length and self.millis[0] < 0:
            raise ValueError("timestamps before 1970 cannot be written")
        stamps = self.millis.astype(np.uint64)
        varint = np.zeros((length, 10), dtype=np.uint8)
        size = np.ones(length, dtype=np.int64)
        for k in range(10):
            varint[:, k] = (stamps & np.uint64(0x7F)).astype(np.uint8)
            stamps = stamps >> np.uint64(7)
            more = stamps > 0
            if not more.any():
                break
            varint[more, k] |= 0x80
            size += more
        self.rows = np.zeros((length, _ROW), dtype=np.uint8)
        self.rows[:, 0] = 0x12  # TimeSeries.samples
        self.rows[:, 1] = 10 + size  # the Sample's length: 1 + 8 + 1 + varint
        self.rows[:, 2] = 0x09  # Sample.value, a fixed 64-bit double
        self.rows[:, 11] = 0x10  # Sample.timestamp, a varint
        self.rows[:, 12:] = varint
        self.used = np.arange(_ROW)[None, :] < (12 + size)[:, None]
        self.slices = self.millis // SLICE_MS


def _sample_runs(grid: _Grid, values: npt.NDArray[np.float64]) -> Iterator[tuple[int, bytes]]:
    """(slice, encoded samples) for each one-hour slice the series has samples in; NaN is no sample."""
    kept = np.flatnonzero(~np.isnan(values))
    if not len(kept):
        return
    rows = grid.rows[kept]
    rows[:, 3:11] = values[kept].astype("<f8").view(np.uint8).reshape(-1, 8)
    used = grid.used[kept]
    encoded = rows[used].tobytes()
    ends = np.cumsum(used.sum(axis=1))
    slices = grid.slices[kept]
    cuts = np.flatnonzero(np.diff(slices)) + 1
    first = 0
    for lo, hi in zip([0, *cuts.tolist()], [*cuts.tolist(), len(kept)], strict=True):
        last = int(ends[hi - 1])
        yield int(slices[lo]), encoded[first:last]
        first = last


def write_requests(
    series: Iterable[OpenMetricsSeries], *, request_bytes: int = REQUEST_BYTES
) -> Iterator[bytes]:
    """Snappy-compressed `WriteRequest` bodies holding every sample of `series`, oldest slice
    first. Checked as `to_openmetrics` checks (names, a step, no series twice): `ValueError`."""
    grids: dict[tuple[float, float, int], _Grid] = {}
    by_slice: dict[int, list[tuple[tuple[tuple[str, str], ...], bytes, bytes]]] = {}
    for name, labels, values, start, step in checked_series(series):
        array = np.asarray(values, dtype=np.float64)
        grid = grids.get((start, step, len(array)))
        if grid is None:
            grid = grids[(start, step, len(array))] = _Grid(start, step, len(array))
        key = tuple(sorted([("__name__", name), *labels.items()]))
        prefix = None
        for index, samples in _sample_runs(grid, array):
            prefix = prefix or _labels(key)
            by_slice.setdefault(index, []).append((key, prefix, samples))
    for index in sorted(by_slice):
        body: list[bytes] = []
        size = 0
        # In the order of their label sets, the order a backfilled block keeps them in: the
        # head numbers series as they arrive and hands a selector its series in that order.
        for _, prefix, samples in sorted(by_slice[index], key=lambda entry: entry[0]):
            entry = _field(0x0A, prefix + samples)
            if body and size + len(entry) > request_bytes:
                yield bytes(cramjam.snappy.compress_raw(b"".join(body)))
                body, size = [], 0
            body.append(entry)
            size += len(entry)
        if body:
            yield bytes(cramjam.snappy.compress_raw(b"".join(body)))


def push(
    url: str,
    series: Iterable[OpenMetricsSeries],
    *,
    timeout: float = 60.0,
    request_bytes: int = REQUEST_BYTES,
) -> int:
    """Every sample of `series` written to the Prometheus at `url` (its receiver enabled);
    the number of requests. `RemoteWriteError` with Prometheus's answer when one is refused."""
    sent = 0
    for body in write_requests(series, request_bytes=request_bytes):
        request = urllib.request.Request(f"{url}/api/v1/write", data=body, method="POST", headers=_HEADERS)
        try:
            with NO_PROXY_OPENER.open(request, timeout=timeout) as response:
                response.read()
        except urllib.error.HTTPError as exc:
            answer = exc.read().decode("utf-8", errors="replace").strip()
            refused = f"remote write refused (HTTP {exc.code}): {answer or exc.reason}"
            raise RemoteWriteError(refused) from None
        except (urllib.error.URLError, OSError) as exc:
            raise RemoteWriteError(f"remote write to {url} failed: {exc}") from None
        sent += 1
    return sent
