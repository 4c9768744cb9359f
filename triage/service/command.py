"""`triage serve`: its options, and the environment variables that carry its secrets.

Only argparse: every start of `triage` builds this parser (for `triage --help` among
others), and the run loop, with the web stack, is `triage.service.launch`, imported when
the service runs. `config` reads the same environment variables.
"""

from __future__ import annotations

import argparse
from typing import Any

TOKEN_ENV = "TRIAGE_SERVE_TOKEN"
PROMETHEUS_TOKEN_ENV = "TRIAGE_PROMETHEUS_TOKEN"

EPILOG = f"""\
Point an Alertmanager receiver at it (send_resolved and max_alerts recommended):

  receivers:
    - name: triage
      webhook_configs:
        - url: http://triage:9095/api/alertmanager
          send_resolved: true
          max_alerts: 200
          http_config:
            authorization:
              credentials_file: /etc/alertmanager/triage-token

then run (one process; for several replicas on PostgreSQL, see docs/serve.md):

  triage serve --prometheus http://prometheus:9090 --token-file /etc/triage/token \\
      --store /var/lib/triage/triage.db --config /etc/triage/serve.yaml   # sinks in the file

Every alert is stored before the answer, diagnosed in the background at its startsAt
(symptom: the alert's `symptom` label, else --alert-symptom, else the playbooks'
alert_symptoms, else auto), and each group's diagnosis is sent once to every sink.
Flags override the --config file (see docs/serve.md for every key). Secrets: prefer
files or ${TOKEN_ENV} / ${PROMETHEUS_TOKEN_ENV} to flags, which show up in `ps`.

endpoints: POST /api/alertmanager · GET /api/annotations[/ID] · GET /annotations/ID
(HTML) · GET /api/deliveries · /healthz · /readyz · /metrics · /openapi.json

exit codes: 0 stopped by SIGTERM or Ctrl-C, 2 bad configuration.
"""


def add_serve_parser(sub: Any) -> None:
    """Add the `serve` subcommand to the `triage` parser's subparsers."""
    s = sub.add_parser(
        "serve",
        help="Alertmanager webhook service: every alert arrives already diagnosed",
        description="Run the Alertmanager webhook receiver: store each alert, diagnose each alert group "
        "against Prometheus in the background, serve the annotations, and send one message per group "
        "event to the configured sinks.",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog=EPILOG,
    )
    s.add_argument("--config", metavar="FILE", help="settings as YAML (see docs/serve.md); flags override it")
    s.add_argument("--listen", metavar="HOST:PORT", help="address to listen on (default 127.0.0.1:9095)")
    s.add_argument(
        "--store",
        metavar="PATH|URL",
        help="SQLite database file (default triage.db), or a postgresql://user@host:5432/db URL shared by "
        "several replicas (password from PGPASSWORD or ~/.pgpass, never in a flag)",
    )
    s.add_argument(
        "--store-sync",
        choices=("normal", "full"),
        help="SQLite only. normal: survives the process being killed (default); "
        "full: also fsyncs every commit",
    )
    s.add_argument(
        "--store-timeout",
        metavar="DURATION",
        help="PostgreSQL: the longest a store transaction may take before it fails; the intake then "
        "answers 503 with Retry-After (default 5s)",
    )
    s.add_argument(
        "--store-lease",
        metavar="DURATION",
        help="how long a replica's claim on work or on a message holds unrenewed; after a replica dies, "
        "another takes its work over once this has passed (default 60s)",
    )
    s.add_argument("--playbooks", metavar="DIR", help="playbook folder (default: bundled)")
    s.add_argument("--templates", metavar="DIR", help="your own sink/page templates (searched first)")
    s.add_argument("--public-url", metavar="URL", help="this service's external URL, for links in messages")
    s.add_argument("--workers", type=int, metavar="N", help="threads taking diagnosis work (default 4)")
    s.add_argument(
        "--diagnosis-processes",
        type=int,
        metavar="N",
        help="processes that fetch and diagnose, apart from the intake (default 1; 0: in the worker threads)",
    )
    auth = s.add_argument_group("intake authentication (as Alertmanager's http_config sends it)")
    auth.add_argument("--token-file", metavar="FILE", help=f"bearer token file (or ${TOKEN_ENV})")
    auth.add_argument("--token", metavar="TOKEN", help="bearer token (visible in ps; prefer --token-file)")
    prom = s.add_argument_group("signals")
    prom.add_argument("--prometheus", metavar="URL", help="Prometheus-compatible base URL (required)")
    prom.add_argument(
        "--prometheus-token-file", metavar="FILE", help=f"bearer token file (or ${PROMETHEUS_TOKEN_ENV})"
    )
    prom.add_argument(
        "--prometheus-timeout", metavar="DURATION", help="deadline of one fetch round (default 10s)"
    )
    prom.add_argument(
        "--selector", metavar="S", help="label matchers for every query, e.g. '{namespace=\"llm\"}'"
    )
    prom.add_argument("--replica-label", metavar="L", help="label that names a replica (default instance)")
    prom.add_argument(
        "--fleet-labels",
        metavar="L,L",
        help="labels that name a fleet on an alert (default namespace,model_name): each group is "
        "diagnosed on the fleet its alerts name; '' diagnoses every group with --selector",
    )
    prom.add_argument("--lookback", metavar="DURATION", help="history fetched before the alert (default 2h)")
    prom.add_argument(
        "--coalesce",
        metavar="DURATION",
        help="alerts of a group starting within this of each other share one diagnosis (default 5m)",
    )
    prom.add_argument(
        "--max-concurrent-fetches",
        type=int,
        metavar="N",
        help="fetch rounds in flight at once, over all workers and processes; each sends "
        "at most 8 queries in parallel (default 1)",
    )
    prom.add_argument(
        "--step",
        metavar="DURATION",
        help="resolution of the fetched signals (default 30s)",
    )
    alerts = s.add_argument_group("alerts")
    alerts.add_argument(
        "--alert-symptom",
        metavar="ALERTNAME=SYMPTOM",
        action="append",
        help="symptom of an alertname without a symptom label (repeatable)",
    )
    alerts.add_argument(
        "--heartbeat", metavar="ALERTNAME", help="always-firing alert, not diagnosed (default Watchdog)"
    )
    alerts.add_argument(
        "--heartbeat-max-age",
        metavar="DURATION",
        help="report the pipeline broken (/readyz, /metrics) when the heartbeat is older (e.g. 8h)",
    )
    alerts.add_argument(
        "--max-body-bytes", type=int, metavar="N", help="largest request body (default 4 MiB)"
    )
    alerts.add_argument(
        "--max-alerts", type=int, metavar="N", help="most alerts in one notification (default 5000)"
    )
    sinks = s.add_argument_group(
        "sinks",
        "a JSON webhook or Slack from a flag; Microsoft Teams, PagerDuty, Opsgenie and Grafana, "
        "and every sink option, in the config file's `sinks:` (docs/serve.md, Sinks)",
    )
    sinks.add_argument(
        "--sink-webhook", metavar="URL", action="append", help="generic JSON webhook (repeatable)"
    )
    sinks.add_argument(
        "--sink-slack", metavar="URL", action="append", help="Slack-compatible incoming webhook"
    )
    s.add_argument("--log-level", choices=("debug", "info", "warning", "error"), default="info")


FLAGS = (
    "listen",
    "store",
    "store_sync",
    "store_lease",
    "store_timeout",
    "playbooks",
    "templates",
    "public_url",
    "workers",
    "diagnosis_processes",
    "token_file",
    "token",
    "prometheus",
    "prometheus_token_file",
    "prometheus_timeout",
    "selector",
    "replica_label",
    "fleet_labels",
    "lookback",
    "step",
    "coalesce",
    "max_concurrent_fetches",
    "alert_symptom",
    "heartbeat",
    "heartbeat_max_age",
    "max_body_bytes",
    "max_alerts",
    "sink_webhook",
    "sink_slack",
)
"""The options that `config` merges over the file, as attribute names of the parsed arguments."""
