"""The storm of `bench/serve_storm.py` against one replica on SQLite and against several
replicas sharing one PostgreSQL, in one run; prints one Markdown table, a column per setup.

`python -m bench.serve_storm --ha` runs it (see `--help` there). Both setups get the same
storm (same seed, same `startsAt`), the same backfilled Prometheus, the same service flags
and a sink: a `RecordingSink` (tests/service/harness/sink.py) on loopback, registered with
`--sink-webhook` on every replica, which records each message and its `Idempotency-Key`.

- SQLite ×1: one `triage serve` on a fresh SQLite file, as the plain benchmark runs it.
- PostgreSQL ×N: a temporary PostgreSQL (tools/pgserver.py: `fsync=off` unless
  `--pg-fsync`), one fresh database, and N `triage serve` processes all given
  `--store <its URL>`. The storm's POSTs are spread over the N replicas per connection,
  as a Kubernetes Service does (`storm_client.post_storm` with N URLs): each client's
  keep-alive connection stays on one replica, so the repeats and the HA duplicates of
  a group's notification land on whichever replica the client that took them talks to.

Measured per setup, from the clients, the sink, /proc and the store (plain SQL, sqlite3 or
psycopg; the tables are the same on both databases):

  lost                    storm episodes (fingerprint, startsAt) with no annotation row
  duplicate annotations   annotation rows beyond one per episode
  duplicate sink messages messages the sink accepted beyond one per Idempotency-Key
  same message, two keys  messages whose (group, kind, episode, diagnosis, alerts) repeats
                          one already accepted under another key (a message sent twice
                          by two replicas would show here, not above)
  intake p50 / p99        per request, as the clients saw it; per replica for N > 1
  all annotated after     from the first POST until no annotation is pending
  sink drained after      from the first POST until no outbox row is pending
  peak RSS per replica    VmHWM of each replica plus its diagnosis process(es)
  fetches per group       signal fetch rounds (work.fetches) per alert group
  log                     lines of each replica's serve.log (level warning) holding
                          ERROR, Traceback or 503, and the intake's non-2xx answers

Each replica's serve.log is copied to bench/out/storm-ha-<setup>-<n>.log for reading
after the run, and every request's latency, replica and alert count to
bench/out/storm-ha-<setup>-requests.json. With --pg-stats, the costliest statements of
the PostgreSQL run (pg_stat_statements) are printed after the table.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import signal
import sqlite3
import subprocess
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from contextlib import ExitStack
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import psycopg

from bench.serve_storm import TOKEN, _norm, descendants, peak_rss_mb, serving
from bench.storm_client import StormResult, post_storm
from tests.service.harness.sink import RecordingSink
from tools.pgserver import MISSING_BINARIES, TemporaryPostgres, find_postgres_bindir

OUT = Path(__file__).resolve().parent / "out"
PROBLEMS = re.compile(r"ERROR|Traceback|\b503\b")


@dataclass
class Setup:
    """What one setup measured."""

    name: str
    replicas: int
    result: StormResult
    episodes: int = 0
    lost: int = 0
    duplicates: int = 0
    all_done: float | None = None
    drained: float | None = None
    rss: list[tuple[float, float]] = field(default_factory=list)
    fetches: int = 0
    items: int = 0
    groups: int = 0
    states: dict[str, str | int] = field(default_factory=dict)
    outbox: dict[str, int] = field(default_factory=dict)
    delivered: int = 0
    keys: int = 0
    no_key: int = 0
    sink_duplicates: int = 0
    same_message: int = 0
    exit_codes: list[int | None] = field(default_factory=list)
    log_problems: list[int] = field(default_factory=list)
    log_samples: list[str] = field(default_factory=list)
    transactions: str = "—"
    per_alert: tuple[float, float] = (0.0, 0.0)
    cpu: list[tuple[float, float]] = field(default_factory=list)
    database_cpu: float | None = None
    client_cpu: float = 0.0
    statements: list[tuple[Any, ...]] = field(default_factory=list)


def postgres_settings(args: argparse.Namespace) -> dict[str, str]:
    """The `postgres -c` settings beyond tools/pgserver.py's defaults that the flags ask for."""
    settings: dict[str, str] = {}
    if args.pg_fsync:
        settings |= {"fsync": "on", "full_page_writes": "on"}
    if args.pg_stats:
        settings |= {"shared_preload_libraries": "pg_stat_statements", "pg_stat_statements.track": "all"}
    if args.pg_log_slow is not None:
        settings |= {"log_min_duration_statement": f"{args.pg_log_slow}ms", "log_lock_waits": "on"}
    return settings


def compare(
    prometheus_url: str,
    storm: Sequence[Mapping[str, Any]],
    wanted: set[tuple[str, str]],
    args: argparse.Namespace,
    options: Sequence[str] = (),
) -> int:
    """Run the storm on SQLite ×1 and on PostgreSQL ×`args.pg_replicas`, print the table.

    `options` are further `triage serve` flags for every replica. Returns 0 when every
    setup met every target.
    """
    setups = []
    if not args.ha_skip_sqlite:
        setups.append(run_setup("sqlite", 1, None, prometheus_url, storm, wanted, args, options))
    bindir = find_postgres_bindir()
    if bindir is None:
        raise SystemExit(MISSING_BINARIES)
    with TemporaryPostgres(bindir=bindir, settings=postgres_settings(args)) as pg:
        try:
            url = pg.create_database("storm")
            postmaster = int((pg.directory / "data" / "postmaster.pid").read_text().split()[0])
            setups.append(
                run_setup(
                    "postgresql",
                    args.pg_replicas,
                    url,
                    prometheus_url,
                    storm,
                    wanted,
                    args,
                    options,
                    postmaster,
                )
            )
        finally:
            log = pg.directory / "postgres.log"
            if log.exists():
                OUT.mkdir(exist_ok=True)
                shutil.copyfile(log, OUT / "storm-ha-postgres.log")
    ok = print_table(setups, args)
    for setup in setups:
        if setup.statements:
            print_statements(setup)
    for setup in setups:
        for line in setup.log_samples:
            print(f"{setup.name}: {line}")
    return 0 if ok else 1


def run_setup(
    kind: str,
    replicas: int,
    store: str | None,
    prometheus_url: str,
    storm: Sequence[Mapping[str, Any]],
    wanted: set[tuple[str, str]],
    args: argparse.Namespace,
    extra: Sequence[str],
    postmaster: int | None = None,
) -> Setup:
    """Start `replicas` services on `store` (None: a SQLite file), post the storm, measure."""
    with ExitStack() as stack:
        tmp = Path(stack.enter_context(tempfile.TemporaryDirectory()))
        sink = stack.enter_context(RecordingSink())
        options = ["--workers", str(args.workers), "--sink-webhook", f"{sink.url}/hook", *extra]
        if store is None:
            options += ["--store-sync", args.store_sync]
        services: list[tuple[subprocess.Popen[bytes], str, Path]] = []
        for n in range(replicas):
            work = tmp / f"replica-{n}"
            work.mkdir()
            process, url, db = stack.enter_context(serving(prometheus_url, work, options, store=store))
            services.append((process, url, work))
            if store is None:
                store_db = db
        conn: Any
        if store is None:
            conn = sqlite3.connect(f"file:{store_db}?mode=ro", uri=True, timeout=30)
        else:
            conn = psycopg.connect(store, autocommit=True)
        stack.callback(conn.close)

        def one(sql: str) -> Any:
            return conn.execute(sql).fetchone()[0]

        cpu0 = [(cpu_seconds(p.pid), sum(map(cpu_seconds, descendants(p.pid)))) for p, _, _ in services]
        db_cpu0 = postgres_cpu(postmaster) if postmaster else 0.0
        client0 = time.process_time()
        t0 = time.monotonic()
        result = post_storm(
            [f"{url}/api/alertmanager" for _, url, _ in services],
            storm,
            concurrency=args.concurrency,
            token=TOKEN,
            rate=len(storm) / args.within,
        )
        setup = Setup(f"{'SQLite' if store is None else 'PostgreSQL'} ×{replicas}", replicas, result)
        setup.per_alert = fit(
            [(len(storm[o.index]["alerts"]), o.seconds) for o in result.outcomes if o.status]
        )
        deadline = time.monotonic() + 600
        while time.monotonic() < deadline:
            pending = one("SELECT count(*) FROM annotations WHERE state = 'pending'")
            if (
                setup.all_done is None
                and pending == 0
                and one("SELECT count(*) FROM annotations") >= len(wanted)
            ):
                setup.all_done = time.monotonic() - t0
            if setup.all_done is not None and one("SELECT count(*) FROM outbox WHERE state = 'pending'") == 0:
                setup.drained = time.monotonic() - t0
                break
            time.sleep(0.2)
        setup.client_cpu = time.process_time() - client0
        if postmaster:
            setup.database_cpu = postgres_cpu(postmaster) - db_cpu0
        for (process, _, _), (main0, children0) in zip(services, cpu0, strict=True):
            setup.cpu.append(
                (
                    cpu_seconds(process.pid) - main0,
                    sum(map(cpu_seconds, descendants(process.pid))) - children0,
                )
            )
        for process, _, _ in services:
            children = [peak_rss_mb(c) for c in descendants(process.pid)]
            main = peak_rss_mb(process.pid)
            setup.rss.append((main + sum(children), main))
        stored = {
            (fp, datetime.fromtimestamp(s, UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z"))
            for fp, s in conn.execute("SELECT fingerprint, starts_at FROM annotations").fetchall()
        }
        rows = one("SELECT count(*) FROM annotations")
        setup.episodes = len(wanted)
        setup.lost = len({(fp, _norm(s)) for fp, s in wanted} - stored)
        setup.duplicates = rows - len(stored)
        setup.states = dict(conn.execute("SELECT state, count(*) FROM annotations GROUP BY state").fetchall())
        cause = conn.execute(
            "SELECT cause, count(*) FROM annotations GROUP BY cause ORDER BY 2 DESC LIMIT 1"
        ).fetchone()
        setup.states["most common cause"] = f"{cause[0]} ({cause[1]})" if cause else "-"
        setup.fetches, setup.items = conn.execute(
            "SELECT coalesce(sum(fetches), 0), count(*) FROM work"
        ).fetchone()
        setup.groups = one("SELECT count(*) FROM groups")
        setup.outbox = dict(conn.execute("SELECT state, count(*) FROM outbox GROUP BY state").fetchall())
        if store is not None:
            commits, rollbacks, deadlocks = conn.execute(
                "SELECT xact_commit, xact_rollback, deadlocks FROM pg_stat_database "
                "WHERE datname = current_database()"
            ).fetchone()
            setup.transactions = f"{commits} / {rollbacks} / {deadlocks}"
            if args.pg_stats:
                conn.execute("CREATE EXTENSION IF NOT EXISTS pg_stat_statements")
                setup.statements = conn.execute(
                    "SELECT calls, total_exec_time, mean_exec_time, max_exec_time, rows, "
                    "regexp_replace(query, '\\s+', ' ', 'g') FROM pg_stat_statements "
                    "WHERE dbid = (SELECT oid FROM pg_database WHERE datname = current_database()) "
                    "ORDER BY total_exec_time DESC"
                ).fetchall()
        accepted = sink.accepted()
        keys = Counter(r.header("Idempotency-Key") for r in accepted)
        setup.no_key = keys.pop(None, 0)
        setup.delivered = len(accepted)
        setup.keys = len(keys)
        setup.sink_duplicates = sum(n - 1 for n in keys.values())
        first: dict[str, str | None] = {}
        for r in accepted:
            body = r.json if isinstance(r.json, dict) else {}
            content = json.dumps(
                [body.get(k) for k in ("group_key", "kind", "episode", "diagnosis", "alert_count", "alerts")],
                sort_keys=True,
            )
            key = r.header("Idempotency-Key")
            if content in first and first[content] != key:
                setup.same_message += 1
            first.setdefault(content, key)
        for process, _, _ in services:
            process.send_signal(signal.SIGTERM)
        for process, _, _ in services:
            try:
                setup.exit_codes.append(process.wait(60))
            except subprocess.TimeoutExpired:
                setup.exit_codes.append(None)
        OUT.mkdir(exist_ok=True)
        (OUT / f"storm-ha-{kind}-requests.json").write_text(
            json.dumps(
                [
                    {"i": o.index, "replica": o.target, "ms": round(o.seconds * 1000, 2), "status": o.status,
                     "alerts": len(storm[o.index]["alerts"])}
                    for o in result.outcomes
                ]
            )
        )  # fmt: skip
        for n, (_, _, work) in enumerate(services):
            log = work / "serve.log"
            shutil.copyfile(log, OUT / f"storm-ha-{kind}-{n}.log")
            problems = [
                line for line in log.read_text(errors="replace").splitlines() if PROBLEMS.search(line)
            ]
            setup.log_problems.append(len(problems))
            setup.log_samples += [f"replica {n}: {line[:300]}" for line in dict.fromkeys(problems)][:5]
    return setup


TICK = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int, reaped: bool = False) -> float:
    """User + system CPU seconds of a process (and of its waited-for children if `reaped`)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    ticks = int(fields[11]) + int(fields[12]) + (int(fields[13]) + int(fields[14]) if reaped else 0)
    return ticks / TICK


def postgres_cpu(postmaster: int) -> float:
    """CPU seconds of a PostgreSQL server so far: the postmaster, its exited backends, the live ones."""
    return cpu_seconds(postmaster, reaped=True) + sum(cpu_seconds(c) for c in descendants(postmaster))


def fit(points: Sequence[tuple[int, float]]) -> tuple[float, float]:
    """Least squares `seconds = a + b * alerts` over the requests: (a, b) in ms."""
    n = len(points)
    if n < 2:
        return (0.0, 0.0)
    mx = sum(x for x, _ in points) / n
    my = sum(y for _, y in points) / n
    sxx = sum((x - mx) ** 2 for x, _ in points)
    b = sum((x - mx) * (y - my) for x, y in points) / sxx if sxx else 0.0
    return ((my - b * mx) * 1000, b * 1000)


def print_statements(setup: Setup, top: int = 15) -> None:
    """pg_stat_statements over the whole PostgreSQL run: the costliest statements, as Markdown."""
    calls = sum(int(r[0]) for r in setup.statements)
    total = sum(float(r[1]) for r in setup.statements)
    print(
        f"\npg_stat_statements, {setup.name}: {calls} statements, {total / 1000:.1f} s executing "
        f"in all, {calls / max(setup.result.requests, 1):.0f} per notification posted"
    )
    print("| calls | total ms | mean ms | max ms | rows | statement |")
    print("| ---: | ---: | ---: | ---: | ---: | --- |")
    for n, total_ms, mean, most, rows, query in setup.statements[:top]:
        print(f"| {n} | {total_ms:.0f} | {mean:.3f} | {most:.1f} | {rows} | `{query[:110]}` |")


def print_table(setups: Sequence[Setup], args: argparse.Namespace) -> bool:
    """Print the Markdown table; True when every setup met every target."""
    ok = True

    def mark(good: bool) -> str:
        nonlocal ok
        ok = ok and good
        return "" if good else " ✘"

    def ms(seconds: float | None) -> str:
        return "-" if seconds is None else f"{seconds * 1000:.1f} ms"

    rows: list[tuple[str, list[str], str]] = []

    def row(name: str, target: str, cell: Callable[[Setup], str]) -> None:
        rows.append((name, [cell(s) for s in setups], target))

    row("notifications answered 2xx", "all", lambda s: f"{s.result.ok} / {s.result.requests}"
        + mark(s.result.ok == s.result.requests))  # fmt: skip
    row("non-2xx answers, transport errors", "—", lambda s: (
        ", ".join(f"{k}: {v}" for k, v in s.result.statuses.items() if not 200 <= k < 300) or "none")
        + f", {len(s.result.errors)}")  # fmt: skip
    row(
        "lost (storm episodes with no annotation)",
        "0",
        lambda s: f"{s.lost} of {s.episodes}" + mark(s.lost == 0),
    )
    row("duplicate annotations", "0", lambda s: f"{s.duplicates}" + mark(s.duplicates == 0))
    row("sink messages accepted (distinct keys)", "—", lambda s: f"{s.delivered} ({s.keys})"
        + (f", {s.no_key} without a key" if s.no_key else ""))  # fmt: skip
    row("duplicate sink messages (same Idempotency-Key)", "0",
        lambda s: f"{s.sink_duplicates}" + mark(s.sink_duplicates == 0))  # fmt: skip
    row("same message under two keys", "0", lambda s: f"{s.same_message}" + mark(s.same_message == 0))
    row("outbox rows by state", "—", lambda s: ", ".join(f"{k}: {v}" for k, v in sorted(s.outbox.items())))
    row("intake p50", "—", lambda s: ms(s.result.latency(50)))
    p99 = 0.050
    row("intake p99", "≤ 50 ms", lambda s: ms(s.result.latency(99))
        + mark((s.result.latency(99) or 1) <= p99))  # fmt: skip
    row("intake p99 per replica", "—", lambda s: " / ".join(
        ms(s.result.latency(99, n)) for n in range(s.replicas)) if s.replicas > 1 else "—")  # fmt: skip
    row("intake ≈ a + b × alerts in the notification", "—",
        lambda s: f"{s.per_alert[0]:.1f} ms + {s.per_alert[1]:.2f} ms × alerts")  # fmt: skip
    row("intake max", "—", lambda s: ms(max(s.result.latencies, default=None)))
    row(
        "storm posted in",
        "≤ 20 s",
        lambda s: f"{s.result.wall_seconds:.1f} s" + mark(s.result.wall_seconds <= 20),
    )
    row("all annotated after", "≤ 60 s", lambda s: (
        f"{s.all_done:.1f} s" if s.all_done else "not within 600 s")
        + mark(s.all_done is not None and s.all_done <= 60))  # fmt: skip
    row("sink drained after", "—", lambda s: f"{s.drained:.1f} s" if s.drained else "not within 600 s")
    row("peak RSS per replica, service + diagnosis", "reported",
        lambda s: " / ".join(f"{total:.0f} MB" for total, _ in s.rss))  # fmt: skip
    row("of which the intake process", "—", lambda s: " / ".join(f"{main:.0f} MB" for _, main in s.rss))
    row("diagnoses (group × moment) for groups", "—", lambda s: f"{s.items} for {s.groups}")
    row("signal fetches per group", "—", lambda s: f"{s.fetches / max(s.groups, 1):.2f}")
    row("annotation states", "—", lambda s: ", ".join(f"{k}: {v}" for k, v in s.states.items()))
    row("log lines with ERROR / Traceback / 503", "0",
        lambda s: " / ".join(str(n) for n in s.log_problems) + mark(not any(s.log_problems)))  # fmt: skip
    row("CPU s, storm to drained: intake processes", "—",
        lambda s: " / ".join(f"{main:.1f}" for main, _ in s.cpu))  # fmt: skip
    row("CPU s: diagnosis processes", "—", lambda s: " / ".join(f"{child:.1f}" for _, child in s.cpu))
    row("CPU s: PostgreSQL server (all backends)", "—",
        lambda s: "—" if s.database_cpu is None else f"{s.database_cpu:.1f}")  # fmt: skip
    row("CPU s: the benchmark (clients, sink)", "—", lambda s: f"{s.client_cpu:.1f}")
    row("PostgreSQL commits / rollbacks / deadlocks", "—", lambda s: s.transactions)
    row("exit status after SIGTERM", "0", lambda s: " / ".join(str(c) for c in s.exit_codes)
        + mark(all(c == 0 for c in s.exit_codes)))  # fmt: skip
    print(f"| measure | {' | '.join(s.name for s in setups)} | target |")
    print(f"| --- |{' --- |' * len(setups)} --- |")
    for name, cells, target in rows:
        print(f"| {name} | {' | '.join(cells)} | {target} |")
    return ok
