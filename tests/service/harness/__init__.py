"""Real parts for the webhook service's end-to-end tests.

- `alertmanager`: a real Alertmanager on loopback (`TemporaryAlertmanager`, `ha_pair`),
  alerts pushed through its v2 API, `require_alertmanager_binary()` for the skip/fail
  guard.
- `sink`: `RecordingSink`, an HTTP receiver that records every request and can fail,
  stall, stop and restart on the same port.

Tests under `tests/service/` import them as `harness.alertmanager` and `harness.sink`:
pytest puts `tests/service` on `sys.path` for the test modules there.
"""
