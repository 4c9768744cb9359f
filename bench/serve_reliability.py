"""Reliability test 10 ("Storm") against `triage serve`; prints a table.

The shape (docs/reference reliability.md section 6, item 10): one notification with
5,000 alerts, plus 200 POSTs a second of 1-50 alerts for 60 s. Pass: ack p99 <= 2 s;
stored + explicitly rejected == sent, no silent drops; at most 8 Prometheus requests
in flight at any moment, counted at a stand-in in front of Prometheus; RSS peak
< 500 MB and back within 20 % of baseline 60 s after the storm; alerts the service
sheds for overload carry a reason.

Set-up as bench/serve_storm.py (the same backfilled Prometheus and `triage serve`
subprocess, through `signal_data` and `serving`), except that the service reads
Prometheus through `CountingProxy`, which forwards every request and records how
many are in flight at once.

The background traffic is what Alertmanager sends: every POST is a snapshot of one
of `--groups` groups (up to 50 alerts each), holding that group's first 1-50
alerts; so an alert is sent many times and "sent" means unique firing episodes,
`(fingerprint, startsAt)`. The 5,000-alert notification is a group of its own,
posted at the start of the background traffic. The service's default
`limits.max_alerts` is 5,000, so it is accepted without raising any limit.

RSS is the sum over the service process and its diagnosis process(es): the
baseline after one warm-up alert has been diagnosed (so the diagnosis process
exists and has loaded the playbooks), sampled every 0.25 s during the storm, and
again 60 s after the last POST was answered.

Run: python -m bench.serve_reliability [--groups 400] [--rate 200] [--duration 60]
"""

from __future__ import annotations

import argparse
import http.client
import random
import signal
import sqlite3
import sys
import tempfile
import threading
import time
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from bench.serve_storm import TOKEN, descendants, peak_rss_mb, serving, signal_data
from bench.storm_client import (
    StormResult,
    _notification,
    alert_fingerprint,
    build_storm,
    episodes,
    percentile,
    post_storm,
)
from signals.tempprom import TemporaryPrometheus

MAX_IN_FLIGHT = 8

SCOPING = ["--fleet-labels", ""]
"""The storm's alerts name a fleet (namespace="llm", model_name=...) that the backfilled
series do not carry: with the service's default fleet labels every group would be
annotated "no fleet" without a fetch. Fleet scoping off diagnoses each group on the
whole (one-fleet) Prometheus, as bench/serve_storm.py does."""


class CountingProxy:
    """Forwards GETs to a real Prometheus and records the most requests in flight at once.

    A request counts from the moment its headers are read until its answer has been
    written back, so the figure is what Prometheus itself sees, plus a little.
    """

    def __init__(self, upstream: str) -> None:
        parts = urlsplit(upstream)
        self.host, self.port = parts.hostname or "127.0.0.1", parts.port or 80
        self.lock = threading.Lock()
        self.in_flight = 0
        self.max_in_flight = 0
        self.requests = 0
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_GET(self) -> None:
                with proxy.lock:
                    proxy.in_flight += 1
                    proxy.requests += 1
                    proxy.max_in_flight = max(proxy.max_in_flight, proxy.in_flight)
                try:
                    conn = http.client.HTTPConnection(proxy.host, proxy.port, timeout=60)
                    try:
                        conn.request("GET", self.path, headers={"Accept": self.headers.get("Accept", "*/*")})
                        reply = conn.getresponse()
                        body = reply.read()
                    finally:
                        conn.close()
                    self.send_response(reply.status)
                    self.send_header("Content-Type", reply.getheader("Content-Type", "application/json"))
                    self.send_header("Content-Length", str(len(body)))
                    self.end_headers()
                    self.wfile.write(body)
                finally:
                    with proxy.lock:
                        proxy.in_flight -= 1

            def log_message(self, format: str, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self._thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self) -> CountingProxy:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()


def rss_mb(pid: int) -> float:
    """Resident memory now (VmRSS) of one process, 0 when it is gone."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return 0.0


def service_rss_mb(pid: int) -> float:
    """The service process and its diagnosis process(es), summed."""
    try:
        children = descendants(pid)
    except OSError:
        children = []
    return rss_mb(pid) + sum(rss_mb(c) for c in children)


class RssSampler:
    """Samples `service_rss_mb` every `period` seconds in a thread; `peak` is the largest sum seen."""

    def __init__(self, pid: int, period: float = 0.25) -> None:
        self.pid = pid
        self.period = period
        self.peak = 0.0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            self.peak = max(self.peak, service_rss_mb(self.pid))
            self._stop.wait(self.period)

    def __enter__(self) -> RssSampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()


def background(
    n_groups: int, posts: int, origin: datetime, exclude: str, seed: int = 1, largest: int = 50
) -> list[dict[str, Any]]:
    """`posts` group snapshots of 1-`largest` alerts each, over `n_groups` groups of `largest` alerts.

    `build_storm` names groups by their index, so its group 0 has the labels of the
    5,000-alert group; the group keyed `exclude` is left out to keep the two apart.
    """
    groups = build_storm(largest * (n_groups + 1), n_groups + 1, seed, waves=1, ha_share=0.0, start=origin)
    finals: dict[str, dict[str, Any]] = {}
    for payload in groups:
        finals.setdefault(payload["groupKey"], payload)
    pool = [p for key, p in finals.items() if key != exclude]
    rng = random.Random(seed)
    out = []
    for _ in range(posts):
        group = rng.choice(pool)
        k = rng.randint(1, min(largest, len(group["alerts"])))
        alerts = [dict(a) for a in group["alerts"][:k]]
        out.append(_notification(alerts, group["groupLabels"], group["externalURL"], group["receiver"]))
    return out


def warm_up(origin: datetime) -> dict[str, Any]:
    """One alert of a group of its own, diagnosed before the baseline RSS is read."""
    alert = dict(build_storm(1, 1, 3, waves=1, ha_share=0.0, start=origin)[0]["alerts"][0])
    alert["labels"] = {**alert["labels"], "alertname": "WarmUp", "service": "warm-up"}
    alert["fingerprint"] = alert_fingerprint(alert["labels"])
    group = {"alertname": "WarmUp", "service": "warm-up"}
    return _notification([alert], group, "http://alertmanager-0.storm.test:9093", "triage")


def _norm(text: str) -> str:
    moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
    return moment.astimezone(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _stored(conn: sqlite3.Connection) -> tuple[set[tuple[str, str]], int]:
    rows = conn.execute("SELECT fingerprint, starts_at FROM annotations").fetchall()
    keys = {
        (fp, datetime.fromtimestamp(s, UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z"))
        for fp, s in rows
    }
    return keys, len(rows)


def _keys(payloads: Sequence[Mapping[str, Any]]) -> set[tuple[str, str]]:
    return {(fp, _norm(s)) for fp, s in episodes(payloads)}


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--big", type=int, default=5000, help="alerts in the one large notification (5000)")
    parser.add_argument("--rate", type=float, default=200.0, help="background POSTs per second (200)")
    parser.add_argument("--duration", type=float, default=60.0, help="seconds of background POSTs (60)")
    parser.add_argument("--groups", type=int, default=400, help="groups the background POSTs snapshot (400)")
    parser.add_argument("--concurrency", type=int, default=32, help="posting clients (32)")
    parser.add_argument(
        "--timeout", type=float, default=10.0, help="per-POST timeout, as Alertmanager's (10 s)"
    )
    parser.add_argument("--after", type=float, default=60.0, help="seconds after the storm to read RSS (60)")
    parser.add_argument(
        "--settle", type=float, default=600.0, help="seconds to wait for every annotation (600)"
    )
    parser.add_argument(
        "--serve-option",
        action="append",
        default=[],
        metavar="FLAG",
        help="extra `triage serve` flag (repeatable)",
    )
    args = parser.parse_args()
    text, end = signal_data()
    origin = end - timedelta(minutes=20)
    big = build_storm(args.big, 1, 2, waves=1, ha_share=0.0, start=origin)[0]
    noise = background(args.groups, int(args.rate * args.duration), origin, big["groupKey"])
    warm = warm_up(origin)
    sent = _keys([big, *noise])
    sent_alert_entries = len(big["alerts"]) + sum(len(p["alerts"]) for p in noise)
    with (
        TemporaryPrometheus(text, startup_timeout=300) as prometheus,
        CountingProxy(prometheus.url) as proxy,
        tempfile.TemporaryDirectory() as tmp,
        serving(proxy.url, Path(tmp), [*SCOPING, *args.serve_option]) as (process, url, db),
    ):
        intake = f"{url}/api/alertmanager"
        conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=30)
        post_storm(intake, [warm], concurrency=1, token=TOKEN)
        while conn.execute("SELECT count(*) FROM annotations WHERE state != 'pending'").fetchone()[0] < 1:
            time.sleep(0.2)
        time.sleep(2)
        baseline = service_rss_mb(process.pid)
        proxy.max_in_flight = proxy.in_flight
        warm_requests = proxy.requests
        results: dict[str, StormResult] = {}
        with RssSampler(process.pid) as sampler:
            t0 = time.monotonic()
            big_thread = threading.Thread(
                target=lambda: results.__setitem__(
                    "big", post_storm(intake, [big], concurrency=1, token=TOKEN, timeout=args.timeout)
                )
            )
            big_thread.start()
            results["noise"] = post_storm(
                intake, noise, concurrency=args.concurrency, token=TOKEN, timeout=args.timeout, rate=args.rate
            )
            big_thread.join()
            storm_end = time.monotonic()
            all_done: float | None = None
            rss_after: float | None = None
            deadline = storm_end + max(args.settle, args.after)
            while time.monotonic() < deadline:
                now = time.monotonic()
                if rss_after is None and now >= storm_end + args.after:
                    rss_after = service_rss_mb(process.pid)
                if all_done is None:
                    pending = conn.execute(
                        "SELECT count(*) FROM annotations WHERE state = 'pending'"
                    ).fetchone()[0]
                    total = conn.execute("SELECT count(*) FROM annotations").fetchone()[0]
                    if pending == 0 and total >= len(sent) + 1:
                        all_done = now - t0
                if all_done is not None and rss_after is not None:
                    break
                time.sleep(0.25)
        hwm = peak_rss_mb(process.pid) + sum(peak_rss_mb(c) for c in descendants(process.pid))
        stored, n_rows = _stored(conn)
        states = dict(conn.execute("SELECT state, count(*) FROM annotations GROUP BY state").fetchall())
        reasons = dict(
            conn.execute(
                "SELECT coalesce(w.unavailable, '(no reason)'), count(*) FROM annotations a JOIN work w "
                "ON w.id = a.work_id WHERE a.state = 'unavailable' GROUP BY 1"
            ).fetchall()
        )
        unexplained = conn.execute(
            "SELECT count(*) FROM annotations a JOIN work w ON w.id = a.work_id "
            "WHERE a.state = 'unavailable' AND coalesce(w.unavailable, '') = ''"
        ).fetchone()[0]
        fetches, items = conn.execute("SELECT sum(fetches), count(*) FROM work").fetchone()
        conn.close()
        process.send_signal(signal.SIGTERM)
        code = process.wait(60)
    outcomes = [*results["big"].outcomes, *results["noise"].outcomes]
    payloads = [big, *noise]
    by_index = [(results["big"].outcomes, [big]), (results["noise"].outcomes, noise)]
    rejected_payloads = [
        ps[o.index] for os_, ps in by_index for o in os_ if o.status is not None and not 200 <= o.status < 300
    ]
    failed_payloads = [ps[o.index] for os_, ps in by_index for o in os_ if o.status is None]
    stored_sent = sent & stored
    rejected = _keys(rejected_payloads) - stored
    unanswered = _keys(failed_payloads) - stored - rejected
    lost = len(sent - stored - rejected)
    duplicates = n_rows - len(stored)
    statuses: dict[int, int] = {}
    for o in outcomes:
        if o.status is not None:
            statuses[o.status] = statuses.get(o.status, 0) + 1
    latencies = [o.seconds for o in outcomes if o.status is not None]
    p50, p99, worst = percentile(latencies, 50), percentile(latencies, 99), max(latencies)
    big_ack = results["big"].outcomes[0]
    acked = sum(1 for o in outcomes if o.status is not None and 200 <= o.status < 300)
    back = rss_after is not None and rss_after <= baseline * 1.2
    peak = max(sampler.peak, baseline)
    pending = states.get("pending", 0)
    done = (
        f"{all_done:.1f} s" if all_done is not None else f"not within {args.settle:.0f} s ({pending} pending)"
    )
    by_reason = ", ".join(f"{k}: {v}" for k, v in sorted(reasons.items())) or "-"
    rows = [
        ("POSTs sent (1 large + background)", f"{len(payloads)}", "", True),
        ("background POST rate achieved", f"{len(noise) / results['noise'].wall_seconds:.0f}/s over "
         f"{results['noise'].wall_seconds:.1f} s", f"{args.rate:.0f}/s", True),
        ("alert entries sent", f"{sent_alert_entries}", "", True),
        ("unique alerts sent (fingerprint, startsAt)", f"{len(sent)}", "", True),
        ("acked 2xx", f"{acked}", f"{len(payloads)}", acked == len(payloads)),
        ("HTTP statuses", ", ".join(f"{k}: {v}" for k, v in sorted(statuses.items())), "", True),
        ("transport errors (no answer)", f"{len(failed_payloads)}", "", True),
        ("alerts explicitly rejected (non-2xx)", f"{len(rejected)}", "", True),
        ("alerts without an answer, not stored", f"{len(unanswered)}", "0", not unanswered),
        ("alerts stored (annotation rows)", f"{len(stored_sent)}", f"{len(sent)}", True),
        ("stored + rejected == sent", f"{len(stored_sent) + len(rejected)} == {len(sent)}", "",
         len(stored_sent) + len(rejected) == len(sent)),
        ("lost", f"{lost}", "0", lost == 0),
        ("duplicate annotations", f"{duplicates}", "0", duplicates == 0),
        ("ack p50", f"{p50 * 1000:.1f} ms", "", True),
        ("ack p99", f"{p99 * 1000:.1f} ms", "<= 2000 ms", p99 <= 2.0),
        ("ack max", f"{worst * 1000:.1f} ms", "", True),
        ("ack of the 5,000-alert POST", f"{big_ack.status} in {big_ack.seconds * 1000:.0f} ms", "", True),
        ("max Prometheus requests in flight", f"{proxy.max_in_flight}", f"<= {MAX_IN_FLIGHT}",
         proxy.max_in_flight <= MAX_IN_FLIGHT),
        ("Prometheus requests during the storm", f"{proxy.requests - warm_requests}", "", True),
        ("RSS baseline (warm, idle)", f"{baseline:.0f} MB", "", True),
        ("RSS peak (sampled sum / VmHWM sum)", f"{peak:.0f} / {hwm:.0f} MB", "< 500 MB", hwm < 500),
        (f"RSS {args.after:.0f} s after the storm", f"{rss_after:.0f} MB" if rss_after is not None else "-",
         f"<= {baseline * 1.2:.0f} MB", back),
        ("every stored alert annotated after", done, "", all_done is not None),
        ("annotation states", ", ".join(f"{k}: {v}" for k, v in sorted(states.items())), "", True),
        ("unavailable, by reason", by_reason, "", True),
        ("shed or unavailable without a reason", f"{unexplained}", "0", unexplained == 0),
        ("diagnoses (work items) / signal fetches", f"{items} / {fetches}", "", True),
        ("exit status after SIGTERM", f"{code}", "0", code == 0),
    ]  # fmt: skip
    width = max(len(r[0]) for r in rows)
    vwidth = max(len(r[1]) for r in rows)
    print(f"{'measure':<{width}}  {'value':>{vwidth}}  {'target':>12}  ok")
    for name, value, target, ok in rows:
        print(f"{name:<{width}}  {value:>{vwidth}}  {target:>12}  {'yes' if ok else 'NO'}")
    return 0 if all(r[3] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
