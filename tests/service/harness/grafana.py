"""A Grafana annotations API on loopback: in-memory annotations with ids.

`POST /api/annotations` (`text` required; `{"message": "Annotation added", "id": N}`),
`PATCH /api/annotations/:id` (text, tags, time, timeEnd; 404 when there is none),
`GET /api/annotations` (`tags` AND-ed, `type`, `dashboardUID`, `limit`), each checking
`Authorization: Bearer <token>` (401 `{"message": "Unauthorized"}`) and, when an org is
set, `X-Grafana-Org-Id`. The faults of `RecordingSink` apply before the API is.
"""

from __future__ import annotations

import json
import threading
import time
import urllib.parse
from http.server import BaseHTTPRequestHandler
from typing import Any

from .sink import Received, RecordingSink, _Handler, _Reply, _send


class _GrafanaHandler(_Handler):
    def do_PATCH(self) -> None:
        self.server.sink._handle(self)


class GrafanaAPI(RecordingSink):
    """Grafana's annotations API for one service account token in one organisation."""

    def __init__(self, token: str, org_id: int = 1, *, max_body: int = 1 << 20) -> None:
        super().__init__()
        self.token = token
        self.org_id = org_id
        self.limit = max_body
        self.annotations: dict[int, dict[str, Any]] = {}
        self._lock = threading.Lock()

    def start(self) -> None:
        if self._server is not None:
            return
        super().start()
        assert self._server is not None
        self._server.RequestHandlerClass = _GrafanaHandler

    def _handle(self, handler: BaseHTTPRequestHandler) -> None:
        arrived = time.monotonic()
        handler.close_connection = True
        length = int(handler.headers.get("Content-Length") or 0)
        body = handler.rfile.read(length) if length else b""
        try:
            parsed: Any = json.loads(body) if body else None
        except ValueError:
            parsed = None
        reply = self._next_reply()
        stall = reply.stall
        if reply.status < 400:
            if length > self.limit:
                reply = _Reply(413, b'{"message":"request entity too large"}')
            else:
                reply = self._api(handler, parsed)
        self._record(
            Received(
                handler.command,
                handler.path,
                dict(handler.headers.items()),
                body,
                parsed,
                reply.status,
                arrived,
            )
        )
        if stall and self._release.wait(stall):
            return
        _send(handler, reply)

    def _api(self, handler: BaseHTTPRequestHandler, parsed: Any) -> _Reply:
        if handler.headers.get("Authorization") != f"Bearer {self.token}":
            return _json(401, {"message": "Unauthorized"})
        if handler.headers.get("X-Grafana-Org-Id", "1") != str(self.org_id):
            return _json(401, {"message": "Unauthorized"})
        url = urllib.parse.urlsplit(handler.path)
        query = urllib.parse.parse_qs(url.query)
        parts = url.path.rstrip("/").split("/")
        with self._lock:
            if handler.command == "GET" and url.path == "/api/annotations":
                return _json(200, self._find(query))
            if handler.command == "POST" and url.path == "/api/annotations":
                if not isinstance(parsed, dict) or not parsed.get("text"):
                    return _json(400, {"message": "bad request data"})
                new = len(self.annotations) + 1
                self.annotations[new] = {
                    "id": new,
                    "dashboardUID": parsed.get("dashboardUID", ""),
                    "time": parsed.get("time", 0),
                    "timeEnd": parsed.get("timeEnd", parsed.get("time", 0)),
                    "tags": list(parsed.get("tags") or []),
                    "text": parsed["text"],
                }
                return _json(200, {"message": "Annotation added", "id": new})
            if handler.command == "PATCH" and len(parts) == 4 and parts[:3] == ["", "api", "annotations"]:
                item = self.annotations.get(int(parts[3])) if parts[3].isdigit() else None
                if item is None:
                    return _json(404, {"message": "Could not find annotation to update"})
                if not isinstance(parsed, dict):
                    return _json(400, {"message": "bad request data"})
                for key in ("text", "tags", "time", "timeEnd"):
                    if key in parsed:
                        item[key] = parsed[key]
                return _json(200, {"message": "Annotation patched"})
        return _json(404, {"message": "Not found"})

    def _find(self, query: dict[str, list[str]]) -> list[dict[str, Any]]:
        wanted = set(query.get("tags", []))
        uid = query.get("dashboardUID", [None])[0]
        limit = int(query.get("limit", ["100"])[0])
        found = [
            dict(a)
            for a in self.annotations.values()
            if wanted <= set(a["tags"]) and (uid is None or a["dashboardUID"] == uid)
        ]
        return sorted(found, key=lambda a: -a["time"])[:limit]


def _json(status: int, value: Any) -> _Reply:
    return _Reply(status, json.dumps(value).encode())
