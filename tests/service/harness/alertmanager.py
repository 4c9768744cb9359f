"""A real Alertmanager (0.25, the Debian package) on loopback, for end-to-end tests of the webhook service.

The service's contract is whatever Alertmanager really sends: snapshots of a whole
group, repeats after `repeat_interval`, `resolved` notifications, retries after a 5xx,
and duplicates from both members of an HA pair. A hand-written payload can only
restate what its author believed, so the tests drive the real binary:
`TemporaryAlertmanager` writes a route and a `webhook_configs` receiver (bearer token
from a credentials file, or basic auth, as `http_config` sends them), starts
`prometheus-alertmanager` on free loopback ports from a private temporary directory,
and stops it on exit whatever happened. Alerts go in through Alertmanager's own v2 API
(`push()`), as Prometheus would send them.

Timing defaults are short (`group_wait` 1s, `group_interval` 2s, `repeat_interval`
4s) so a repeat or a resolve arrives within seconds instead of Alertmanager's
production defaults of 30s / 5m / 4h. A repeat is sent on the first `group_interval`
tick at which the notification-log entry of the last send is older than
`repeat_interval`; that entry is written just after the send, slightly later than the
tick, so a repeat arrives between `repeat_interval` and `repeat_interval +
group_interval` after the previous notification (4s to 6s with these defaults).
An alert whose `startsAt` is older than `group_wait` is flushed at once when its
group is created, without waiting for `group_wait`.

`ha_pair()` starts two clustered members that gossip with each other; the member at
position 1 waits `peer_timeout` before sending and skips the send if it has already
heard (by gossip) that its peer delivered. Push alerts to both members, as Prometheus
does with an HA pair.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import socket
import subprocess
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Iterator, Mapping, Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from types import TracebackType
from typing import Any

import pytest
import yaml

from signals.tempprom import free_loopback_port

BINARIES = ("prometheus-alertmanager", "alertmanager")
ZERO_TIME = "0001-01-01T00:00:00Z"
"""How Alertmanager serialises `endsAt` of a firing alert in a webhook notification."""

_LOG_TAIL_LINES = 20
_NO_PROXY = urllib.request.build_opener(urllib.request.ProxyHandler({}))


class AlertmanagerError(RuntimeError):
    """Alertmanager could not be started or did not answer; the message carries its log tail."""


def find_alertmanager() -> str | None:
    """The path of `prometheus-alertmanager` (Debian's name) or `alertmanager`, or None."""
    for name in BINARIES:
        path = shutil.which(name)
        if path is not None:
            return path
    return None


def require_alertmanager_binary() -> str:
    """The Alertmanager binary; skip loudly without it, and fail under CI=true, where it must run."""
    path = find_alertmanager()
    if path is not None:
        return path
    reason = (
        "!!! prometheus-alertmanager not on PATH: real-Alertmanager tests NOT RUN "
        "(install the Debian package `prometheus-alertmanager`) !!!"
    )
    if os.environ.get("CI") == "true":
        pytest.fail(reason)
    pytest.skip(reason)


def free_port(udp_too: bool = False) -> int:
    """A loopback port free right now (TCP, and UDP too for a gossip port, which memberlist needs both of)."""
    for _ in range(50):
        port = free_loopback_port()
        if not udp_too:
            return port
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as udp:
            try:
                udp.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    raise AlertmanagerError("no free loopback port with both TCP and UDP available")


def rfc3339(moment: datetime) -> str:
    """UTC RFC 3339 with millisecond precision, as Alertmanager's API accepts it."""
    return moment.astimezone(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def make_alert(
    alertname: str,
    *,
    service: str = "llm",
    starts_at: datetime | None = None,
    ends_at: datetime | None = None,
    annotations: Mapping[str, str] | None = None,
    generator_url: str = "http://prometheus.test:9090/graph?g0.expr=up",
    **labels: str,
) -> dict[str, Any]:
    """One alert for `POST /api/v2/alerts`, as Prometheus sends it.

    `starts_at` should be fixed by the caller for an alert pushed more than once:
    Prometheus keeps sending the same `startsAt` while an alert fires, and the
    `(fingerprint, startsAt)` pair is what identifies a firing episode. An `ends_at`
    in the past resolves the alert.
    """
    alert: dict[str, Any] = {
        "labels": {"alertname": alertname, "service": service, **labels},
        "annotations": dict(annotations or {}),
        "startsAt": rfc3339(starts_at or datetime.now(UTC)),
        "generatorURL": generator_url,
    }
    if ends_at is not None:
        alert["endsAt"] = rfc3339(ends_at)
    return alert


def resolved(alert: Mapping[str, Any], ago: float = 1.0) -> dict[str, Any]:
    """The same alert with `endsAt` `ago` seconds in the past, which resolves it on the next flush."""
    ends = datetime.now(UTC) - timedelta(seconds=ago)
    return {**alert, "endsAt": rfc3339(ends)}


class TemporaryAlertmanager:
    """One `prometheus-alertmanager` process with a single webhook receiver; a context manager.

    The receiver (named `receiver`, default `triage`) posts to `webhook_url`. With
    `bearer_token`, the token is written to a file and sent through
    `http_config.authorization.credentials_file`, the way an operator keeps it out of
    the config; with `basic_auth=(user, password)` it is sent as basic auth (the two
    are mutually exclusive in Alertmanager, and here).

    Clustering is off unless `cluster=True`: then the member gossips on
    `cluster_port` (a free one by default) and joins `peers` ("host:port"). Gossip,
    push-pull and settling are made fast (`--cluster.gossip-interval=50ms` makes the
    settle poll 0.5s) so a pair is ready in a few seconds.
    """

    def __init__(
        self,
        webhook_url: str,
        *,
        bearer_token: str | None = None,
        basic_auth: tuple[str, str] | None = None,
        group_by: Sequence[str] = ("alertname", "service"),
        group_wait: str = "1s",
        group_interval: str = "2s",
        repeat_interval: str = "4s",
        send_resolved: bool = True,
        max_alerts: int = 0,
        receiver: str = "triage",
        cluster: bool = False,
        peers: Sequence[str] = (),
        cluster_port: int | None = None,
        peer_timeout: str = "15s",
        settle_timeout: str = "5s",
        start_timeout: float = 20.0,
        binary: str | None = None,
    ) -> None:
        if bearer_token is not None and basic_auth is not None:
            raise ValueError("bearer_token and basic_auth are mutually exclusive in Alertmanager")
        self.webhook_url = webhook_url
        self.bearer_token = bearer_token
        self.basic_auth = basic_auth
        self.group_by = list(group_by)
        self.group_wait = group_wait
        self.group_interval = group_interval
        self.repeat_interval = repeat_interval
        self.send_resolved = send_resolved
        self.max_alerts = max_alerts
        self.receiver = receiver
        self.clustered = cluster or bool(peers)
        self.peers = list(peers)
        self.peer_timeout = peer_timeout
        self.settle_timeout = settle_timeout
        self.start_timeout = start_timeout
        self._binary = binary
        self._port = free_port()
        self._cluster_port = (cluster_port or free_port(udp_too=True)) if self.clustered else None
        self._tmp: tempfile.TemporaryDirectory[str] | None = None
        self._process: subprocess.Popen[bytes] | None = None
        self._log_path: Path | None = None

    # -- addresses -------------------------------------------------------------------

    @property
    def url(self) -> str:
        """The HTTP API and UI, `http://127.0.0.1:PORT` (also the `externalURL` in notifications)."""
        return f"http://127.0.0.1:{self._port}"

    @property
    def cluster_address(self) -> str | None:
        """`127.0.0.1:PORT` this member gossips on, or None when clustering is off."""
        return None if self._cluster_port is None else f"127.0.0.1:{self._cluster_port}"

    # -- lifecycle -------------------------------------------------------------------

    def __enter__(self) -> TemporaryAlertmanager:
        self.start()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()

    def config(self) -> dict[str, Any]:
        """The Alertmanager configuration this instance runs with (a dict, dumped as YAML)."""
        webhook: dict[str, Any] = {
            "url": self.webhook_url,
            "send_resolved": self.send_resolved,
            "max_alerts": self.max_alerts,
        }
        http_config: dict[str, Any] = {}
        if self.bearer_token is not None:
            http_config["authorization"] = {"type": "Bearer", "credentials_file": str(self._path("token"))}
        if self.basic_auth is not None:
            http_config["basic_auth"] = {
                "username": self.basic_auth[0],
                "password_file": str(self._path("password")),
            }
        if http_config:
            webhook["http_config"] = http_config
        return {
            "route": {
                "receiver": self.receiver,
                "group_by": self.group_by,
                "group_wait": self.group_wait,
                "group_interval": self.group_interval,
                "repeat_interval": self.repeat_interval,
            },
            "receivers": [{"name": self.receiver, "webhook_configs": [webhook]}],
        }

    def start(self) -> None:
        """Write the config and secrets, start the process and wait until `/-/ready` answers."""
        binary = self._binary or find_alertmanager()
        if binary is None:
            raise AlertmanagerError("prometheus-alertmanager not found: install the Debian package")
        self._tmp = tempfile.TemporaryDirectory(prefix="alertmanager-")
        if self.bearer_token is not None:
            _write_secret(self._path("token"), self.bearer_token)
        if self.basic_auth is not None:
            _write_secret(self._path("password"), self.basic_auth[1])
        config_path = self._path("alertmanager.yml")
        config_path.write_text(yaml.safe_dump(self.config(), sort_keys=False))
        (self._path("data")).mkdir()
        args = [
            binary,
            f"--config.file={config_path}",
            f"--storage.path={self._path('data')}",
            f"--web.listen-address=127.0.0.1:{self._port}",
            f"--web.external-url={self.url}",
            "--data.retention=1h",
            "--log.level=debug",
        ]
        if self._cluster_port is None:
            args.append("--cluster.listen-address=")
        else:
            address = f"127.0.0.1:{self._cluster_port}"
            args += [
                f"--cluster.listen-address={address}",
                f"--cluster.advertise-address={address}",
                "--cluster.gossip-interval=50ms",
                "--cluster.pushpull-interval=1s",
                "--cluster.probe-interval=200ms",
                "--cluster.reconnect-interval=1s",
                f"--cluster.settle-timeout={self.settle_timeout}",
                f"--cluster.peer-timeout={self.peer_timeout}",
            ]
            args += [f"--cluster.peer={peer}" for peer in self.peers]
        self._log_path = self._path("alertmanager.log")
        with open(self._log_path, "wb") as log:
            self._process = subprocess.Popen(
                args, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, cwd=self._path(".")
            )
        try:
            self._wait_ready()
        except BaseException:
            self.stop()
            raise

    def stop(self) -> None:
        """Terminate (then kill after 5s) and remove the temporary directory."""
        process, self._process = self._process, None
        if process is not None and process.poll() is None:
            process.terminate()
            try:
                process.wait(timeout=5)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(timeout=5)
        if self._tmp is not None:
            self._tmp.cleanup()
            self._tmp = None

    def log_tail(self, lines: int = _LOG_TAIL_LINES) -> str:
        """The log's error lines, then its last lines (stdout and stderr), for error messages.

        The log runs at debug level, so the line that explains a failure (a config
        error, a refused notification) is often not among the last ones; error lines
        are therefore quoted first.
        """
        if self._log_path is None or not self._log_path.exists():
            return "(no log)"
        all_lines = self._log_path.read_text(errors="replace").splitlines()
        errors = [line for line in all_lines if "level=error" in line][-5:]
        head = ["errors:", *errors, "last lines:"] if errors else []
        return "\n".join(head + all_lines[-lines:])

    def _path(self, name: str) -> Path:
        if self._tmp is None:
            raise AlertmanagerError("Alertmanager is not started")
        return Path(self._tmp.name) / name

    def _wait_ready(self) -> None:
        deadline = time.monotonic() + self.start_timeout
        while True:
            process = self._process
            if process is None or process.poll() is not None:
                code = None if process is None else process.returncode
                raise AlertmanagerError(f"Alertmanager exited with code {code} at start:\n{self.log_tail()}")
            try:
                with _NO_PROXY.open(self.url + "/-/ready", timeout=1) as response:
                    if response.status == 200:
                        return
            except (urllib.error.URLError, OSError):
                pass
            if time.monotonic() > deadline:
                waited = f"{self.start_timeout:.0f}s"
                tail = self.log_tail()
                raise AlertmanagerError(f"Alertmanager not ready at {self.url} after {waited}:\n{tail}")
            time.sleep(0.05)

    # -- API -------------------------------------------------------------------------

    def push(self, alerts: Sequence[Mapping[str, Any]]) -> None:
        """`POST /api/v2/alerts`: labels, annotations, startsAt, endsAt, generatorURL per alert."""
        self._request("POST", "/api/v2/alerts", list(alerts))

    def alerts(self) -> list[dict[str, Any]]:
        """`GET /api/v2/alerts`: the alerts Alertmanager holds, with their fingerprints and state."""
        result = self._request("GET", "/api/v2/alerts")
        assert isinstance(result, list)
        return result

    def status(self) -> dict[str, Any]:
        """`GET /api/v2/status`: cluster (status, peers), config, uptime, version."""
        result = self._request("GET", "/api/v2/status")
        assert isinstance(result, dict)
        return result

    def wait_cluster_ready(self, n_peers: int = 2, timeout: float = 20.0) -> dict[str, Any]:
        """Wait until `/api/v2/status` says the cluster is `ready` with `n_peers` members (self included).

        Returns the cluster status. An unsettled member holds its notifications back,
        so tests wait for this before pushing.
        """
        deadline = time.monotonic() + timeout
        cluster: dict[str, Any] = {}
        while time.monotonic() < deadline:
            cluster = self.status().get("cluster", {})
            if cluster.get("status") == "ready" and len(cluster.get("peers") or []) >= n_peers:
                return cluster
            time.sleep(0.1)
        raise AlertmanagerError(
            f"cluster not ready with {n_peers} peers after {timeout:.0f}s: {cluster}\n{self.log_tail()}"
        )

    def _request(self, method: str, path: str, body: object = None) -> object:
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(
            self.url + path, data=data, method=method, headers={"Content-Type": "application/json"}
        )
        try:
            with _NO_PROXY.open(request, timeout=10) as response:
                raw = response.read()
        except urllib.error.HTTPError as exc:
            detail = exc.read().decode(errors="replace")
            raise AlertmanagerError(f"{method} {path} -> {exc.code}: {detail}") from exc
        return json.loads(raw) if raw.strip() else None


class AlertmanagerPair:
    """Two clustered members; `push()` sends to both, as Prometheus does with an HA pair."""

    def __init__(self, members: tuple[TemporaryAlertmanager, TemporaryAlertmanager]) -> None:
        self.members = members

    def __iter__(self) -> Iterator[TemporaryAlertmanager]:
        return iter(self.members)

    def __getitem__(self, index: int) -> TemporaryAlertmanager:
        return self.members[index]

    def push(self, alerts: Sequence[Mapping[str, Any]]) -> None:
        for member in self.members:
            member.push(alerts)


@contextlib.contextmanager
def ha_pair(webhook_url: str, *, ready_timeout: float = 20.0, **kw: Any) -> Iterator[AlertmanagerPair]:
    """Two clustered Alertmanagers posting to `webhook_url`, yielded once both see each other.

    Keyword arguments go to both `TemporaryAlertmanager`s (tokens, intervals,
    `peer_timeout`). Each member gossips on its own free loopback port with the other
    as `--cluster.peer`.
    """
    ports = (free_port(udp_too=True), free_port(udp_too=True))
    while ports[1] == ports[0]:
        ports = (ports[0], free_port(udp_too=True))
    first = TemporaryAlertmanager(
        webhook_url, cluster=True, cluster_port=ports[0], peers=[f"127.0.0.1:{ports[1]}"], **kw
    )
    second = TemporaryAlertmanager(
        webhook_url, cluster=True, cluster_port=ports[1], peers=[f"127.0.0.1:{ports[0]}"], **kw
    )
    with first, second:
        for member in (first, second):
            member.wait_cluster_ready(2, ready_timeout)
        yield AlertmanagerPair((first, second))


def _write_secret(path: Path, value: str) -> None:
    path.write_text(value)
    path.chmod(0o600)
