"""An Alertmanager alert storm, as webhook notifications, posted by concurrent clients.

The webhook service must take a storm of 10,000 alerts in 200 groups without losing
or duplicating an annotation, and acknowledge each POST within milliseconds. A real
Alertmanager cannot produce that many notifications quickly on demand, so
`build_storm` builds them the way Alertmanager 0.25 would send them, and
`post_storm` posts them from a pool of threads, timing each request.

What the storm contains (`build_storm(n_alerts, n_groups, seed)`):

- `n_groups` groups, keyed like a route with `group_by: [alertname, service]`; every
  symptom of the vocabulary occurs, through the alert names `triage rules` writes and
  a few more.
- `n_alerts` alerts spread evenly over the groups. Each alert fires once, so there are
  exactly `n_alerts` unique firing episodes, `(fingerprint, startsAt)`, and a correct
  service stores exactly `n_alerts` annotations.
- Each group's alerts join in up to `waves` waves, and each notification is a
  snapshot of the whole group so far, never a delta, exactly as Alertmanager sends
  them: the first wave's alerts are therefore repeated in every later notification.
- Every group's last snapshot is sent twice, byte for byte (a repeat notification
  after `repeat_interval`), and for a share `ha_share` of the groups a third time
  with the second HA member's `externalURL` (the duplicate an HA pair sends).
- Fingerprints are Alertmanager's own (FNV-1a 64 over the sorted label set), so they
  match what the real binary would compute for the same labels.

Payloads are ordered by round (every group's first wave, then every group's second,
and so on, then the repeats and HA duplicates), shuffled within a round, and posted
concurrently, so arrival order is no more guaranteed than with a real Alertmanager.

Run: python -m bench.storm_client --url http://127.0.0.1:8080/api/alertmanager --token-file token
(see --help; exit status 0 only when every request got a 2xx).
"""

from __future__ import annotations

import argparse
import http.client
import json
import math
import random
import sys
import threading
import time
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

ZERO_TIME = "0001-01-01T00:00:00Z"
"""`endsAt` of a firing alert in a webhook notification: Go's zero time."""

DEFAULT_START = datetime(2026, 11, 30, 3, 0, 0, tzinfo=UTC)
"""Default first `startsAt`: fixed, so the same seed builds byte-identical storms."""

RECEIVER = "triage"
EXTERNAL_URLS = ("http://alertmanager-0.storm.test:9093", "http://alertmanager-1.storm.test:9093")
USER_AGENT = "Alertmanager/0.25.0 (llm-triage storm_client)"

ALERTS: tuple[tuple[str, str, str], ...] = (
    ("TTFTP99High", "ttft_slow", "TTFT P99 {value}s above the SLO on {instance}"),
    ("TPOTP99High", "tpot_slow", "TPOT P99 {value}s above the SLO on {instance}"),
    ("ErrorRatioHigh", "errors", "{value} of requests failing on {instance}"),
    ("RejectedRatioHigh", "rejected", "{value} of requests rejected at the gateway for {instance}"),
    ("SpendRateHigh", "cost_up", "spend up {value}x against last week on {instance}"),
    ("AnswerQualityDrop", "quality_down", "answer quality score down {value} on {instance}"),
    ("KVCacheNearFull", "tpot_slow", "KV cache {value} full on {instance}"),
    ("QueueGrowing", "rejected", "engine queue growing for {value}m on {instance}"),
)
"""(alertname, symptom label, summary template); the symptoms are the vocabulary's six ids."""

MODELS = ("meta-llama/Llama-3.1-8B-Instruct", "meta-llama/Llama-3.1-70B-Instruct", "Qwen/Qwen2.5-7B-Instruct")


# -- building the storm ----------------------------------------------------------------------


def alert_fingerprint(labels: Mapping[str, str]) -> str:
    """Alertmanager's fingerprint of a label set: FNV-1a 64 over sorted `name 0xff value 0xff`, 16 hex digits.

    The same function as Prometheus's `model.LabelSet.Fingerprint`, so a storm alert
    has the fingerprint a real Alertmanager would give it.
    """
    digest = 14695981039346656037
    for name in sorted(labels):
        for part in (name.encode(), b"\xff", labels[name].encode(), b"\xff"):
            for byte in part:
                digest = ((digest ^ byte) * 1099511628211) & 0xFFFFFFFFFFFFFFFF
    return f"{digest:016x}"


def rfc3339(moment: datetime) -> str:
    """UTC, millisecond precision, `Z` suffix."""
    return moment.astimezone(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def group_key(group_labels: Mapping[str, str]) -> str:
    """The `groupKey` Alertmanager sends for the root route: `{}:{name="value", ...}`, names sorted."""
    pairs = ", ".join(f"{name}={json.dumps(group_labels[name])}" for name in sorted(group_labels))
    return "{}:{" + pairs + "}"


def _common(mappings: Sequence[Mapping[str, str]]) -> dict[str, str]:
    """The pairs every mapping shares: Alertmanager's `commonLabels` / `commonAnnotations`."""
    if not mappings:
        return {}
    first = mappings[0]
    return {k: v for k, v in sorted(first.items()) if all(m.get(k) == v for m in mappings[1:])}


def _notification(
    alerts: list[dict[str, Any]], group_labels: dict[str, str], external_url: str, receiver: str
) -> dict[str, Any]:
    return {
        "receiver": receiver,
        "status": "firing",
        "alerts": alerts,
        "groupLabels": group_labels,
        "commonLabels": _common([a["labels"] for a in alerts]),
        "commonAnnotations": _common([a["annotations"] for a in alerts]),
        "externalURL": external_url,
        "version": "4",
        "groupKey": group_key(group_labels),
        "truncatedAlerts": 0,
    }


def _split(size: int, waves: int, rng: random.Random) -> list[int]:
    """Wave sizes summing to `size`, each at least 1, at most `waves` of them."""
    n = max(1, min(waves, size))
    cuts = sorted(rng.sample(range(1, size), n - 1)) if n > 1 else []
    bounds = [0, *cuts, size]
    return [bounds[i + 1] - bounds[i] for i in range(n)]


def build_storm(
    n_alerts: int = 10_000,
    n_groups: int = 200,
    seed: int = 0,
    *,
    waves: int = 3,
    ha_share: float = 0.25,
    start: datetime | None = None,
    receiver: str = RECEIVER,
    fleets: Sequence[Mapping[str, str]] = (),
) -> list[dict[str, Any]]:
    """Webhook v4 notifications for `n_alerts` alerts in `n_groups` groups (see the module docstring).

    With `fleets` (each fleet's labels, `namespace` and `model_name`), group g's alerts carry
    fleet g mod len(fleets)'s labels, so a storm spreads over the fleets of one Prometheus.

    Unique firing episodes: exactly `n_alerts`. Notifications: for each group, one
    snapshot per wave (`min(waves, group size)`), one exact repeat of the last
    snapshot, and one HA duplicate for about `ha_share` of the groups. The same
    arguments always build the same storm.
    """
    if n_groups < 1 or n_alerts < n_groups:
        raise ValueError(f"need at least one alert per group: n_alerts={n_alerts}, n_groups={n_groups}")
    if waves < 1 or not 0.0 <= ha_share <= 1.0:
        raise ValueError(f"waves must be >= 1 and ha_share in [0, 1]: waves={waves}, ha_share={ha_share}")
    rng = random.Random(seed)
    origin = start or DEFAULT_START
    rounds: list[list[dict[str, Any]]] = [[] for _ in range(waves + 1)]
    base, extra = divmod(n_alerts, n_groups)
    for g in range(n_groups):
        alertname, symptom, summary = ALERTS[g % len(ALERTS)]
        service = f"llm-{g // len(ALERTS):03d}"
        model = MODELS[(g // len(ALERTS)) % len(MODELS)]
        group_labels = {"alertname": alertname, "service": service}
        group_start = origin + timedelta(seconds=rng.uniform(0, 120))
        runbook = f"https://runbooks.example/llm/{alertname}"
        severity = rng.choice(("page", "ticket"))
        alerts: list[dict[str, Any]] = []
        for wave, count in enumerate(_split(base + (g < extra), waves, rng)):
            for _ in range(count):
                i = len(alerts)
                instance = f"10.{g // 256}.{g % 256}.{i % 256}:{8000 + i // 256}"
                fleet = fleets[g % len(fleets)] if fleets else {"namespace": "llm", "model_name": model}
                labels = {
                    "alertname": alertname,
                    "instance": instance,
                    "model_name": fleet["model_name"],
                    "namespace": fleet["namespace"],
                    "service": service,
                    "severity": severity,
                    "symptom": symptom,
                }
                value = f"{rng.uniform(0.05, 0.9):.2f}"
                starts = group_start + timedelta(seconds=30 * wave + rng.uniform(0, 15))
                alerts.append(
                    {
                        "status": "firing",
                        "labels": labels,
                        "annotations": {
                            "runbook_url": runbook,
                            "summary": summary.format(value=value, instance=instance),
                        },
                        "startsAt": rfc3339(starts),
                        "endsAt": ZERO_TIME,
                        "generatorURL": f"http://prometheus.storm.test:9090/graph?g0.expr={alertname}",
                        "fingerprint": alert_fingerprint(labels),
                    }
                )
            snapshot = [dict(a) for a in alerts]
            rounds[wave].append(_notification(snapshot, group_labels, EXTERNAL_URLS[0], receiver))
        final = _notification([dict(a) for a in alerts], group_labels, EXTERNAL_URLS[0], receiver)
        rounds[waves].append(final)
        if rng.random() < ha_share:
            twin = _notification([dict(a) for a in alerts], group_labels, EXTERNAL_URLS[1], receiver)
            rounds[waves].append(twin)
    storm: list[dict[str, Any]] = []
    for batch in rounds:
        rng.shuffle(batch)
        storm.extend(batch)
    return storm


def episodes(payloads: Iterable[Mapping[str, Any]]) -> set[tuple[str, str]]:
    """The unique firing episodes, `(fingerprint, startsAt)`, in a list of notifications."""
    alerts = (a for p in payloads for a in p["alerts"])
    return {(a["fingerprint"], a["startsAt"]) for a in alerts if a["status"] == "firing"}


@dataclass(frozen=True)
class StormShape:
    """What a storm holds, for the report and for checking a service's store against it."""

    notifications: int
    alert_entries: int
    episodes: int
    groups: int
    exact_repeats: int
    ha_duplicates: int

    @staticmethod
    def of(payloads: Sequence[Mapping[str, Any]]) -> StormShape:
        seen: Counter[str] = Counter()
        same_alerts: Counter[str] = Counter()
        for p in payloads:
            seen[json.dumps(p, sort_keys=True)] += 1
            same_alerts[json.dumps([p["groupKey"], p["alerts"]], sort_keys=True)] += 1
        exact = sum(n - 1 for n in seen.values())
        return StormShape(
            notifications=len(payloads),
            alert_entries=sum(len(p["alerts"]) for p in payloads),
            episodes=len(episodes(payloads)),
            groups=len({p["groupKey"] for p in payloads}),
            exact_repeats=exact,
            ha_duplicates=sum(n - 1 for n in same_alerts.values()) - exact,
        )


# -- posting it ------------------------------------------------------------------------------


def percentile(values: Sequence[float], q: float) -> float:
    """The nearest-rank `q`-th percentile (0 < q <= 100): a value that was actually observed.

    Nearest rank never interpolates below an observed tail, so p99 of 100 requests is
    the slowest but one, not a blend of the two slowest; that is the reading an
    intake latency target (p99 <= 50 ms) is meant to be checked against.
    """
    if not values:
        raise ValueError("percentile of no values")
    if not 0 < q <= 100:
        raise ValueError(f"percentile q must be in (0, 100], got {q}")
    ordered = sorted(values)
    return ordered[max(1, math.ceil(q / 100 * len(ordered))) - 1]


@dataclass(frozen=True)
class Outcome:
    """One POST: the HTTP status, or the transport error when no response came; seconds it took.

    `target` is the index of the URL it was sent to, when `post_storm` was given several.
    """

    index: int
    seconds: float
    status: int | None
    error: str | None = None
    target: int = 0


@dataclass
class StormResult:
    """Every request's outcome, with the wall time of the whole storm."""

    outcomes: list[Outcome] = field(default_factory=list)
    wall_seconds: float = 0.0
    concurrency: int = 0

    @property
    def requests(self) -> int:
        return len(self.outcomes)

    @property
    def latencies(self) -> list[float]:
        """Seconds per request that got an HTTP response (connect + send + full response read)."""
        return [o.seconds for o in self.outcomes if o.status is not None]

    @property
    def statuses(self) -> dict[int, int]:
        return dict(sorted(Counter(o.status for o in self.outcomes if o.status is not None).items()))

    @property
    def errors(self) -> list[str]:
        return [o.error for o in self.outcomes if o.error is not None]

    @property
    def ok(self) -> int:
        """Requests answered 2xx: what Alertmanager counts as delivered."""
        return sum(1 for o in self.outcomes if o.status is not None and 200 <= o.status < 300)

    def latency(self, q: float, target: int | None = None) -> float | None:
        """The `q`-th percentile latency, of every request or of those sent to URL `target`."""
        values = [o.seconds for o in self.outcomes if o.status is not None and target in (None, o.target)]
        return percentile(values, q) if values else None

    def as_dict(self) -> dict[str, Any]:
        return {
            "requests": self.requests,
            "ok": self.ok,
            "statuses": {str(k): v for k, v in self.statuses.items()},
            "errors": len(self.errors),
            "first_errors": self.errors[:5],
            "p50_ms": _ms(self.latency(50)),
            "p99_ms": _ms(self.latency(99)),
            "max_ms": _ms(max(self.latencies, default=None)),
            "wall_seconds": round(self.wall_seconds, 3),
            "concurrency": self.concurrency,
        }

    def table(self) -> str:
        """A two-column table of the figures a benchmark report quotes."""
        d = self.as_dict()
        statuses = ", ".join(f"{k}: {v}" for k, v in d["statuses"].items()) or "none"
        rate = self.requests / self.wall_seconds if self.wall_seconds > 0 else 0.0
        rows = [
            ("requests", str(d["requests"])),
            ("answered 2xx", str(d["ok"])),
            ("statuses", statuses),
            ("transport errors", str(d["errors"])),
            ("latency p50", _fmt_ms(d["p50_ms"])),
            ("latency p99", _fmt_ms(d["p99_ms"])),
            ("latency max", _fmt_ms(d["max_ms"])),
            ("wall time", f"{self.wall_seconds:.2f} s"),
            ("throughput", f"{rate:.0f} req/s with {self.concurrency} clients"),
        ]
        rows += [("error", e) for e in d["first_errors"]]
        width = max(len(name) for name, _ in rows)
        return "\n".join(f"{name:<{width}}  {value}" for name, value in rows)


def _ms(seconds: float | None) -> float | None:
    return None if seconds is None else round(seconds * 1000, 2)


def _fmt_ms(ms: float | None) -> str:
    return "-" if ms is None else f"{ms:.1f} ms"


def post_storm(
    url: str | Sequence[str],
    payloads: Sequence[Mapping[str, Any]],
    *,
    concurrency: int = 16,
    token: str | None = None,
    timeout: float = 5.0,
    rate: float | None = None,
) -> StormResult:
    """POST every payload to `url` from `concurrency` threads; never raises for a failed request.

    Without `rate` the clients send as fast as the server answers, which measures
    the server saturated: latency is then mostly queueing. With `rate` (requests per
    second, over all clients) request `i` is not sent before `i / rate` seconds into
    the storm, which spreads it over a chosen duration (the intake target is a storm
    posted within 20 s) and measures the latency of an unsaturated server.

    Each thread keeps one keep-alive connection, as Alertmanager's HTTP client does,
    and reconnects after a transport error or a response that closes it. Bodies are
    serialised before the clock starts, so latencies measure the server, not
    `json.dumps`. A request's latency runs from sending (connecting, if needed) to
    having read the whole response.

    Given several URLs (replicas of one service behind a load balancer), each new
    connection goes to the next URL in turn, as a Kubernetes Service balances
    connections, not requests: a thread's keep-alive connection stays on one replica
    until it is closed, and its reconnection may land on another. Which notification
    reaches which replica therefore depends on the threads' timing, so the repeats and
    HA duplicates of one group are spread over the replicas. `Outcome.target` says
    which URL took each request.
    """
    if concurrency < 1:
        raise ValueError(f"concurrency must be >= 1, got {concurrency}")
    if rate is not None and rate <= 0:
        raise ValueError(f"rate must be > 0, got {rate}")
    urls = [url] if isinstance(url, str) else list(url)
    if not urls:
        raise ValueError("no URL to post to")
    targets = [urlsplit(u) for u in urls]
    for u, parts in zip(urls, targets, strict=True):
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"not an http(s) URL: {u!r}")
    paths = [(p.path or "/") + (f"?{p.query}" if p.query else "") for p in targets]
    connections = iter(range(sys.maxsize))
    headers = {"Content-Type": "application/json", "User-Agent": USER_AGENT}
    if token is not None:
        headers["Authorization"] = f"Bearer {token}"
    bodies = [json.dumps(p, separators=(",", ":")).encode() for p in payloads]
    outcomes: list[Outcome | None] = [None] * len(bodies)
    lock = threading.Lock()
    cursor = iter(range(len(bodies)))
    go = threading.Event()
    began = 0.0

    def connect() -> tuple[http.client.HTTPConnection, int]:
        with lock:
            target = next(connections) % len(targets)
        parts = targets[target]
        cls = http.client.HTTPSConnection if parts.scheme == "https" else http.client.HTTPConnection
        return cls(parts.hostname or "", parts.port, timeout=timeout), target

    def worker() -> None:
        go.wait()
        conn: http.client.HTTPConnection | None = None
        target = 0
        while True:
            with lock:
                i = next(cursor, None)
            if i is None:
                break
            if rate is not None:
                delay = began + i / rate - time.perf_counter()
                if delay > 0:
                    time.sleep(delay)
            if conn is None:
                conn, target = connect()
            sent = time.perf_counter()
            try:
                conn.request("POST", paths[target], body=bodies[i], headers=headers)
                response = conn.getresponse()
                response.read()
                outcomes[i] = Outcome(i, time.perf_counter() - sent, response.status, target=target)
                if response.will_close:
                    conn.close()
                    conn = None
            except (OSError, http.client.HTTPException) as exc:
                outcomes[i] = Outcome(
                    i, time.perf_counter() - sent, None, f"{type(exc).__name__}: {exc}", target
                )
                if conn is not None:
                    conn.close()
                conn = None
        if conn is not None:
            conn.close()

    threads = [threading.Thread(target=worker, name=f"storm-{n}", daemon=True) for n in range(concurrency)]
    for thread in threads:
        thread.start()
    began = time.perf_counter()
    go.set()
    for thread in threads:
        thread.join()
    wall = time.perf_counter() - began
    done = [o for o in outcomes if o is not None]
    return StormResult(outcomes=done, wall_seconds=wall, concurrency=concurrency)


# -- command line ----------------------------------------------------------------------------


def _start(text: str) -> datetime:
    if text == "now":
        return datetime.now(UTC).replace(microsecond=0) - timedelta(minutes=5)
    moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m bench.storm_client",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog=(
            "examples:\n"
            "  python -m bench.storm_client --dry-run\n"
            "      print the storm's shape (notifications, unique episodes, repeats) and exit\n"
            "  python -m bench.storm_client --url http://127.0.0.1:8080/api/alertmanager \\\n"
            "      --token-file /run/secrets/triage-token --concurrency 32 --json\n\n"
            "The token is read from a file, never from the command line, where other users\n"
            "of the machine could read it in the process list. Exit status: 0 when every\n"
            "request was answered 2xx, 1 otherwise, 2 for a usage error."
        ),
    )
    parser.add_argument("--url", help="the intake endpoint to POST each notification to")
    parser.add_argument("--token-file", type=Path, help="file holding the bearer token (whitespace stripped)")
    parser.add_argument("--alerts", type=int, default=10_000, help="alerts, i.e. unique episodes (10000)")
    parser.add_argument("--groups", type=int, default=200, help="Alertmanager groups (200)")
    parser.add_argument("--waves", type=int, default=3, help="notifications per group as alerts join (3)")
    parser.add_argument("--ha-share", type=float, default=0.25, help="share of groups resent by an HA twin")
    parser.add_argument("--seed", type=int, default=0, help="random seed; same seed, same storm (0)")
    parser.add_argument(
        "--start",
        type=_start,
        default=DEFAULT_START,
        help="first startsAt, RFC 3339, or `now` for five minutes ago (default: a fixed moment)",
    )
    parser.add_argument("--concurrency", type=int, default=16, help="concurrent clients (16)")
    parser.add_argument("--timeout", type=float, default=5.0, help="per-request timeout in seconds (5)")
    parser.add_argument(
        "--duration",
        type=float,
        help="spread the storm evenly over this many seconds (default: as fast as the server answers)",
    )
    parser.add_argument("--json", action="store_true", help="print the result as one JSON object")
    parser.add_argument("--dry-run", action="store_true", help="print the storm's shape, post nothing")
    parser.add_argument("--dump", type=Path, help="also write the payloads to this JSON file")
    args = parser.parse_args(argv)
    try:
        payloads = build_storm(
            args.alerts, args.groups, args.seed, waves=args.waves, ha_share=args.ha_share, start=args.start
        )
    except ValueError as exc:
        parser.error(str(exc))
    shape = StormShape.of(payloads)
    if args.dump is not None:
        args.dump.write_text(json.dumps(payloads))
    if args.dry_run:
        print(json.dumps(shape.__dict__) if args.json else _shape_line(shape))
        return 0
    if not args.url:
        parser.error("--url is required unless --dry-run")
    token = args.token_file.read_text().strip() if args.token_file is not None else None
    rate = len(payloads) / args.duration if args.duration else None
    result = post_storm(
        args.url, payloads, concurrency=args.concurrency, token=token, timeout=args.timeout, rate=rate
    )
    if args.json:
        print(json.dumps({"storm": shape.__dict__, "result": result.as_dict()}))
    else:
        print(_shape_line(shape) + f" -> {args.url}")
        print(result.table())
    return 0 if result.ok == result.requests else 1


def _shape_line(shape: StormShape) -> str:
    return (
        f"storm: {shape.notifications} notifications, {shape.alert_entries} alert entries, "
        f"{shape.episodes} unique episodes in {shape.groups} groups "
        f"({shape.exact_repeats} exact repeats, {shape.ha_duplicates} HA duplicates)"
    )


if __name__ == "__main__":
    sys.exit(main())
