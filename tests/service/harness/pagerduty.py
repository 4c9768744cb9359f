"""A PagerDuty REST API v2 stand-in on loopback, and the base it shares with the Opsgenie one.

`ApiStandIn` is a real threaded HTTP server on 127.0.0.1 (like `RecordingSink`) that
records every request and answers through `route`, after the faults queued for the
next requests: a status with the service's own error body (`fail`), an answer held
back (`stall`, for client timeouts), or the work done and the connection closed
without an answer (`drop_answer`, as when the sender dies after its request reached
the service). Tests wait on a condition notified on every request, never on a sleep.

`PagerDutyStandIn` speaks the part of the REST API the sink uses: `GET /incidents`
filtered by `incident_key` and `statuses[]` (newest first), `GET` and `POST
/incidents/{id}/notes`. It checks `Authorization: Token token=<key>` (401 otherwise)
and, on a POST, the `From` header (400 without), refuses note content over 25,000
characters (400), and answers errors as PagerDuty does: `{"error": {"message", "code",
"errors"}}`.
"""

from __future__ import annotations

import itertools
import json
import threading
import time
import urllib.parse
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any

from .sink import Received

Answer = tuple[int, Any, Mapping[str, str]]


@dataclass(frozen=True)
class Request(Received):
    """One request as the stand-in received it (status 0: not answered), with its query parsed."""

    query: dict[str, list[str]] = field(default_factory=dict)


@dataclass
class Fault:
    status: int = 503
    body: Any = None
    headers: Mapping[str, str] = field(default_factory=dict)
    stall: float = 0.0
    drop: bool = False
    method: str | None = None
    path: str | None = None

    def matches(self, method: str, path: str) -> bool:
        return (self.method is None or self.method == method) and (self.path is None or self.path in path)


class ApiStandIn:
    """The server, the record and the faults; subclasses answer in `route` and shape errors in `error`."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._requests: list[Request] = []
        self._faults: deque[Fault] = deque()
        self._release = threading.Event()
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    def __enter__(self) -> ApiStandIn:
        server = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
        server.daemon_threads = True
        server.block_on_close = False
        server.stand_in = self  # type: ignore[attr-defined]
        self._server = server
        self._thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
        self._thread.start()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self._release.set()
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
        if self._thread is not None:
            self._thread.join(5)

    @property
    def url(self) -> str:
        assert self._server is not None
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    # -- faults ----------------------------------------------------------------------

    def fail(
        self,
        status: int,
        *,
        times: int = 1,
        body: Any = None,
        headers: Mapping[str, str] | None = None,
        method: str | None = None,
        path: str | None = None,
    ) -> None:
        """Answer `status` with the service's error body (or `body`) to the next `times` matching requests."""
        with self._cond:
            for _ in range(times):
                self._faults.append(Fault(status, body, dict(headers or {}), method=method, path=path))

    def stall(
        self, seconds: float, *, times: int = 1, method: str | None = None, path: str | None = None
    ) -> None:
        """Hold the next `times` matching requests `seconds` before answering normally."""
        with self._cond:
            for _ in range(times):
                self._faults.append(Fault(0, stall=seconds, method=method, path=path))

    def drop_answer(self, *, method: str = "POST", path: str | None = None) -> None:
        """Do the next matching request's work, then close the connection without answering."""
        with self._cond:
            self._faults.append(Fault(0, drop=True, method=method, path=path))

    # -- what was received -----------------------------------------------------------

    @property
    def requests(self) -> list[Request]:
        with self._cond:
            return list(self._requests)

    def count(self, method: str, path_part: str = "") -> int:
        return sum(1 for r in self.requests if r.method == method and path_part in r.path)

    def wait_for(self, predicate: Callable[[list[Request]], bool], timeout: float = 10.0) -> bool:
        deadline = time.monotonic() + timeout
        with self._cond:
            while not predicate(list(self._requests)):
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return False
                self._cond.wait(remaining)
            return True

    def notify(self) -> None:
        with self._cond:
            self._cond.notify_all()

    # -- to be given by the service --------------------------------------------------

    def authorized(self, headers: Mapping[str, str]) -> bool:
        raise NotImplementedError

    def error(self, status: int, message: str | None = None) -> Any:
        raise NotImplementedError

    def route(
        self, method: str, path: str, query: dict[str, list[str]], headers: Mapping[str, str], body: Any
    ) -> Answer:
        raise NotImplementedError

    # -- server side -----------------------------------------------------------------

    def _take_fault(self, method: str, path: str) -> Fault | None:
        with self._cond:
            for fault in self._faults:
                if fault.matches(method, path):
                    self._faults.remove(fault)
                    return fault
        return None

    def _handle(self, handler: BaseHTTPRequestHandler) -> None:
        arrived = time.monotonic()
        handler.close_connection = True
        length = int(handler.headers.get("Content-Length") or 0)
        raw = handler.rfile.read(length) if length else b""
        try:
            parsed = json.loads(raw) if raw else None
        except ValueError:
            parsed = None
        split = urllib.parse.urlsplit(handler.path)
        path, query = split.path, urllib.parse.parse_qs(split.query)
        headers = dict(handler.headers.items())
        fault = self._take_fault(handler.command, path)
        if fault is not None and fault.stall and self._release.wait(fault.stall):
            self._record(Request(handler.command, path, headers, raw, parsed, 0, arrived, query))
            return
        if fault is not None and fault.status:
            answer: Answer = (fault.status, fault.body or self.error(fault.status), fault.headers)
        elif not self.authorized(headers):
            answer = (401, self.error(401), {})
        else:
            with self._cond:
                answer = self.route(handler.command, path, query, headers, parsed)
        if fault is not None and fault.drop:
            self._record(Request(handler.command, path, headers, raw, parsed, 0, arrived, query))
            return
        status, body, extra = answer
        self._record(Request(handler.command, path, headers, raw, parsed, status, arrived, query))
        data = json.dumps(body).encode()
        try:
            handler.send_response(status)
            handler.send_header("Content-Type", "application/json")
            for name, value in extra.items():
                handler.send_header(name, value)
            handler.send_header("Content-Length", str(len(data)))
            handler.send_header("Connection", "close")
            handler.end_headers()
            handler.wfile.write(data)
        except (BrokenPipeError, ConnectionResetError):
            pass

    def _record(self, request: Request) -> None:
        with self._cond:
            self._requests.append(request)
            self._cond.notify_all()


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def do_GET(self) -> None:
        self.server.stand_in._handle(self)  # type: ignore[attr-defined]

    def do_POST(self) -> None:
        self.server.stand_in._handle(self)  # type: ignore[attr-defined]

    def log_message(self, format: str, *args: object) -> None:
        """Quiet: tests assert on `requests`."""


PD_ERRORS = {
    400: (2001, "Invalid Input Provided"),
    401: (2006, "Authentication required"),  # PagerDuty's words for a missing or bad key
    403: (2010, "Access Denied"),
    404: (2100, "Not Found"),
    413: (2001, "Request Entity Too Large"),
    429: (2020, "Rate Limit Exceeded"),
    500: (2000, "Internal Error"),
    503: (2000, "Service Unavailable"),
}
PD_NOTE_MAX = 25_000


class PagerDutyStandIn(ApiStandIn):
    """Incidents by id, each with its `incident_key`, status, creation time and notes."""

    def __init__(self, token: str) -> None:
        super().__init__()
        self.token = token
        self.incidents: dict[str, dict[str, Any]] = {}
        self._ids = itertools.count(1)

    def open_incident(
        self, incident_key: str, status: str = "triggered", created_at: float | None = None
    ) -> str:
        with self._cond:
            incident_id = f"PINC{next(self._ids):03d}"
            self.incidents[incident_id] = {
                "id": incident_id,
                "type": "incident",
                "incident_key": incident_key,
                "status": status,
                "created_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(created_at or time.time())),
                "notes": [],
            }
            self._cond.notify_all()
            return incident_id

    def set_status(self, incident_id: str, status: str) -> None:
        with self._cond:
            self.incidents[incident_id]["status"] = status

    def notes(self, incident_id: str) -> list[str]:
        with self._cond:
            return [n["content"] for n in self.incidents[incident_id]["notes"]]

    def authorized(self, headers: Mapping[str, str]) -> bool:
        got = next((v for k, v in headers.items() if k.lower() == "authorization"), None)
        return got == f"Token token={self.token}"

    def error(self, status: int, message: str | None = None, errors: list[str] | None = None) -> Any:
        code, words = PD_ERRORS.get(status, (2000, "Error"))
        return {
            "error": {"message": message or words, "code": code, **({"errors": errors} if errors else {})}
        }

    def route(
        self, method: str, path: str, query: dict[str, list[str]], headers: Mapping[str, str], body: Any
    ) -> Answer:
        parts = path.strip("/").split("/")
        if method == "GET" and parts == ["incidents"]:
            keys = query.get("incident_key", [])
            statuses = set(query.get("statuses[]", [])) or {"triggered", "acknowledged"}
            if query.get("date_range") != ["all"]:
                statuses &= {"triggered", "acknowledged"}  # without it, only recent incidents
            found = [
                {k: v for k, v in i.items() if k != "notes"}
                for i in self.incidents.values()
                if (not keys or i["incident_key"] in keys) and i["status"] in statuses
            ]
            found.sort(key=lambda i: (i["created_at"], i["id"]), reverse=True)
            return 200, {"incidents": found, "limit": 100, "offset": 0, "more": False, "total": None}, {}
        if len(parts) == 3 and parts[0] == "incidents" and parts[2] == "notes":
            incident = self.incidents.get(parts[1])
            if incident is None:
                return 404, self.error(404), {}
            if method == "GET":
                return 200, {"notes": list(incident["notes"])}, {}
            if method == "POST":
                sender = next((v for k, v in headers.items() if k.lower() == "from"), None)
                if not sender or "@" not in sender:
                    return (
                        400,
                        self.error(400, errors=["A valid user email must be given in the From header"]),
                        {},
                    )
                content = (body or {}).get("note", {}).get("content") if isinstance(body, dict) else None
                if not isinstance(content, str) or not content:
                    return 400, self.error(400, errors=["Note content is required"]), {}
                if len(content) > PD_NOTE_MAX:
                    return (
                        400,
                        self.error(
                            400, errors=[f"Content is too long (maximum is {PD_NOTE_MAX} characters)"]
                        ),
                        {},
                    )
                note = {
                    "id": f"PNOTE{len(incident['notes']) + 1}",
                    "content": content,
                    "user": {"type": "user_reference", "summary": sender},
                    "created_at": time.strftime("%Y-%m-%dT%H:%M:%SZ"),
                }
                incident["notes"].append(note)
                return 200, {"note": note}, {}
        return 404, self.error(404), {}
