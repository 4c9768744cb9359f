"""Every kind of sink by name (the `kind` of a sink in serve.yaml)."""

from __future__ import annotations

from collections.abc import Mapping

from triage.service.sinks.grafana import GRAFANA
from triage.service.sinks.kind import Kind
from triage.service.sinks.opsgenie import OPSGENIE
from triage.service.sinks.pagerduty import PAGERDUTY
from triage.service.sinks.teams import TEAMS
from triage.service.sinks.webhook import SLACK, WEBHOOK

KINDS: Mapping[str, Kind] = {
    kind.name: kind for kind in (WEBHOOK, SLACK, TEAMS, PAGERDUTY, OPSGENIE, GRAFANA)
}
