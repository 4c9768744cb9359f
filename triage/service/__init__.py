"""`triage serve`: an Alertmanager webhook receiver that attaches a diagnosis to every alert.

The pieces are kept apart so each can be read and tested alone: `config` (the YAML and
flags, validated once at start), `payload` (the webhook v4 model), `store` (SQLite, the
only durable state: intake, work queue, annotations, outbox), `worker` (diagnoses in
the background), `messages` and `sinks` (what goes out, and its delivery), `metrics`
(the Prometheus text exposition) and `app` (HTTP). Nothing in the diagnosis core
imports this package.
"""
