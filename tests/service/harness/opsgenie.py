"""An Opsgenie Alert API stand-in on loopback (see `ApiStandIn` for the faults and the record).

It speaks the part of the Alert API the sink uses, with `identifierType=alias`:
`GET /v2/alerts/{alias}/notes` (404 `{"message": "Alert does not exist", "took",
"requestId"}` for an alias it does not hold), `POST /v2/alerts/{alias}/notes`, which
answers 202 `{"result": "Request will be processed", "took", "requestId"}` whether or
not the alert exists, as Opsgenie processes action requests later, and `GET
/v2/alerts/requests/{requestId}`, which answers 404 until the request is processed
(`pending_polls` looks) and then `{"data": {"isSuccess", "status", ...}}` ("Alert
does not exist" for a note on a missing alert). It checks `Authorization: GenieKey
<key>` (401 `{"message": "Could not authenticate", ...}` otherwise) and refuses a note
over 25,000 characters (422).
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Mapping
from typing import Any

from .pagerduty import Answer, ApiStandIn

OG_ERRORS = {
    400: "Invalid JSON body",
    401: "Could not authenticate",
    403: "You are not authorized for this operation",
    404: "Alert does not exist",
    413: "Request entity too large",
    422: "Request body is not processable. Please check the errors.",
    429: "You are making too many requests! To avoid errors, we recommend you limit requests.",
    500: "Internal Server Error",
    503: "Service Unavailable",
}
OG_NOTE_MAX = 25_000


class OpsgenieStandIn(ApiStandIn):
    """Alerts by alias, each with its notes; action requests processed after `pending_polls` status looks."""

    def __init__(self, token: str, pending_polls: int = 0) -> None:
        super().__init__()
        self.token = token
        self.pending_polls = pending_polls
        self.alerts: dict[str, list[dict[str, Any]]] = {}
        self.processed: dict[str, dict[str, Any]] = {}
        self._looks: dict[str, int] = {}
        self._ids = itertools.count(1)
        self.fail_requests_with: str | None = None
        """A status text that makes every accepted note request fail when processed."""

    def create_alert(self, alias: str) -> None:
        with self._cond:
            self.alerts.setdefault(alias, [])

    def notes(self, alias: str) -> list[str]:
        with self._cond:
            return [n["note"] for n in self.alerts.get(alias, [])]

    def authorized(self, headers: Mapping[str, str]) -> bool:
        got = next((v for k, v in headers.items() if k.lower() == "authorization"), None)
        return got == f"GenieKey {self.token}"

    def error(self, status: int, message: str | None = None) -> Any:
        return {
            "message": message or OG_ERRORS.get(status, "Error"),
            "took": 0.002,
            "requestId": self._request_id(),
        }

    def _request_id(self) -> str:
        return f"00000000-0000-4000-8000-{next(self._ids):012d}"

    def route(
        self, method: str, path: str, query: dict[str, list[str]], headers: Mapping[str, str], body: Any
    ) -> Answer:
        parts = path.strip("/").split("/")
        if method == "GET" and parts[:3] == ["v2", "alerts", "requests"] and len(parts) == 4:
            request_id = parts[3]
            looks = self._looks.get(request_id, 0)
            self._looks[request_id] = looks + 1
            if request_id not in self.processed or looks < self.pending_polls:
                return 404, self.error(404, "Request not found. It might not be processed, yet."), {}
            return (
                200,
                {"data": self.processed[request_id], "took": 0.01, "requestId": self._request_id()},
                {},
            )
        if len(parts) == 4 and parts[:2] == ["v2", "alerts"] and parts[3] == "notes":
            alias = parts[2]
            by_alias = query.get("identifierType") == ["alias"]
            notes = self.alerts.get(alias) if by_alias else None
            if method == "GET":
                if notes is None:
                    return 404, self.error(404), {}
                ordered = list(reversed(notes)) if query.get("order") == ["desc"] else list(notes)
                limit = int(query.get("limit", ["20"])[0])
                return (
                    200,
                    {"data": ordered[:limit], "paging": {}, "took": 0.01, "requestId": self._request_id()},
                    {},
                )
            if method == "POST":
                note = body.get("note") if isinstance(body, dict) else None
                if not isinstance(note, str) or not note:
                    return 422, {**self.error(422), "errors": {"note": "Note is required"}}, {}
                if len(note) > OG_NOTE_MAX:
                    return (
                        422,
                        {**self.error(422), "errors": {"note": f"Note can not be longer than {OG_NOTE_MAX}"}},
                        {},
                    )
                request_id = self._request_id()
                success = notes is not None and self.fail_requests_with is None
                status = (
                    "Alert does not exist" if notes is None else (self.fail_requests_with or "Added note")
                )
                if success and notes is not None:
                    notes.append(
                        {
                            "note": note,
                            "owner": str(body.get("user", "")),
                            "createdAt": time.strftime("%Y-%m-%dT%H:%M:%SZ"),
                            "offset": str(len(notes) + 1),
                        }
                    )
                self.processed[request_id] = {
                    "success": success,
                    "action": "AddNote",
                    "processedAt": time.strftime("%Y-%m-%dT%H:%M:%SZ"),
                    "integrationId": "c9cec2cb-e782-4ebb-bc1d-1b2fa703cf03",
                    "isSuccess": success,
                    "status": status,
                    "alertId": "",
                    "alias": alias if notes is not None else "",
                }
                return 202, {"result": "Request will be processed", "took": 0.01, "requestId": request_id}, {}
        return 404, {"message": "Could not find handler", "took": 0.0, "requestId": self._request_id()}, {}
