"""A query reply's body, read as it arrives: whole when small, series by series when large.

A reply of up to a megabyte is parsed whole by orjson. A larger one (a view of a thousand
replicas is 7 MB of JSON, a histogram's buckets for them over 100 MB) would be held whole
as bytes and then as Python lists, about ten times its size, before any of it became
arrays, and a round parses several at once. Past `replies.STREAMED_REPLY_BYTES` it is
instead cut into series as the chunks arrive, each piece's samples made arrays at once,
so the read holds one chunk and the arrays, never the reply. A piece in Prometheus's own
form is read without a Python object per sample (`signals.prometheus.canonical`); any
other is parsed by orjson.

The cut is safe in any valid reply: the bytes `},{"metric":` hold two unescaped quotes,
so they never occur inside a JSON string, and a series' labels are a flat object. They
occur only where one series object ends and the next begins. Each piece between two cuts
is parsed as a list (`[` piece `]`), so a server that orders a series' keys differently
only makes pieces of several series. A reply with no `"result":[` (an error, or an
unexpected shape) is read whole, and a piece that is not JSON makes the reply malformed.
"""

from __future__ import annotations

from collections.abc import Iterable

import orjson
import requests

from signals.prometheus import replies
from signals.prometheus.canonical import canonical_series
from signals.prometheus.replies import ReplyArrays

CHUNK_BYTES = 1 << 20
"""What one read from the socket asks for."""
RESULT_OPEN = b'"result":['
SERIES_CUT = b'},{"metric":'


def read_reply(response: requests.Response) -> object:
    """The reply's JSON, its series' samples already arrays when it was large.

    The response should be requested with `stream=True`, or it is held whole anyway. Its
    connection is given back once the body is read, or closed if reading stops early.
    """
    try:
        return load_chunks(response.iter_content(CHUNK_BYTES))
    finally:
        response.close()


def load_chunks(chunks: Iterable[bytes]) -> object:
    """`read_reply` over any sequence of the body's byte chunks."""
    pending = iter(chunks)
    buffer = bytearray()
    for chunk in pending:
        buffer += chunk
        if len(buffer) > replies.STREAMED_REPLY_BYTES:
            break
    else:
        return orjson.loads(buffer)
    opened = buffer.find(RESULT_OPEN)
    if opened < 0:
        for chunk in pending:
            buffer += chunk
        return orjson.loads(buffer)
    head = bytes(buffer[: opened + len(RESULT_OPEN)])
    del buffer[: opened + len(RESULT_OPEN)]
    reply = ReplyArrays()
    series: list[object] = []
    _cut(buffer, series, reply)
    for chunk in pending:
        buffer += chunk
        _cut(buffer, series, reply)
    envelope = orjson.loads(head + buffer)
    data = envelope.get("data") if isinstance(envelope, dict) else None
    if isinstance(data, dict) and isinstance(data.get("result"), list):
        data["result"] = series + [reply.series(item) for item in data["result"]]
    return envelope


def _cut(buffer: bytearray, series: list[object], reply: ReplyArrays) -> None:
    """Parse every whole piece at the front of `buffer` into `series`, and drop those bytes.

    The buffer is shortened once per call (per chunk), not once per series.
    """
    start = 0
    while (found := buffer.find(SERIES_CUT, start)) >= 0:
        piece = buffer[start : found + 1]
        parsed = canonical_series(piece, reply)
        if parsed is not None:
            series.append(parsed)
        else:
            series.extend(reply.series(item) for item in orjson.loads(b"[" + piece + b"]"))
        start = found + 2
    del buffer[:start]
