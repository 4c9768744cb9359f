"""Delivering group messages: rendering them for each kind of sink, and sending them from the outbox.

- `registry`: every kind of sink by name; `kind`: what a kind is;
- `render`: bodies from bundled or user templates; `escape`: label text made safe per format;
- `http`: one request, and what its answer means (retry, dead letter, shorten);
- `dispatch`: the delivery threads, retries, dead letters and shortening;
- one module per destination: `webhook` (JSON webhooks and Slack), `teams`, `pagerduty`,
  `opsgenie` (the two share `notes`), `grafana`.
"""

from triage.service.sinks.dispatch import Dispatcher, shortened, shortenings
from triage.service.sinks.render import Renderer

__all__ = ["Dispatcher", "Renderer", "shortened", "shortenings"]
