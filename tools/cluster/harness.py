"""Scrape, then backfill: real relabeling for the label sets, the synthesiser for the history.

1. `scrape`: every target serves its last-moment page on its own loopback address; a real
   Prometheus runs the Operator's jobs (`tools.cluster.scrape`) against them with a short
   interval, `/api/v1/targets` is polled until exactly the expected targets are active, up,
   and scraped at least twice (bounded; no sleeping beyond the polling), and the label set
   of every series is read back from `/api/v1/series`. Then it is all stopped.
2. `match`: each synthesised series' scraped label set is found. Prometheus adds its target
   labels to what the exporter wrote, by `honor_labels` (false: a clash renames the
   exporter's label `exported_<name>`; true: the exporter's label wins; empty values vanish).
   That rule predicts the label set; it is then looked up among the scraped ones, and only a
   label set Prometheus really produced is used. A synthesised series with no scraped label
   set, or a scraped series that nothing synthesised, is a `ClusterError` naming it. `up`
   is backfilled too: 1 while the target answered, 0 while it did not.
3. `backfill`: the history under those label sets, as OpenMetrics, into a fresh
   `TemporaryPrometheus` (not started: the caller owns its lifetime).
"""

from __future__ import annotations

import json
import time
import urllib.parse
import urllib.request
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from signals.tempprom import TemporaryPrometheus, to_openmetrics
from tools.cluster.history import History, describe
from tools.cluster.model import Cluster, ClusterError, Labels
from tools.cluster.scrape import scrape_configs
from tools.cluster.servers import ExpositionServers

SYNTHETIC = frozenset(
    {
        "up",
        "scrape_duration_seconds",
        "scrape_samples_scraped",
        "scrape_samples_post_metric_relabeling",
        "scrape_series_added",
    }
)
_NO_PROXY = urllib.request.build_opener(urllib.request.ProxyHandler({}))
FloatArray = npt.NDArray[np.float64]
Backfill = tuple[str, dict[str, str], FloatArray]


@dataclass(frozen=True)
class Scrape:
    """What the real scrape produced: series label sets, target labels, served pages."""

    series: tuple[Mapping[str, str], ...]
    targets: Mapping[str, Mapping[str, str]]
    honor: Mapping[str, bool]
    dropped: tuple[Mapping[str, str], ...]
    pages: Mapping[str, str]
    configs: tuple[Mapping[str, Any], ...]


def _get(url: str, data: Mapping[str, str] | None = None) -> Any:
    body = urllib.parse.urlencode(data).encode() if data is not None else None
    with _NO_PROXY.open(url, data=body, timeout=30) as response:
        payload = json.loads(response.read())
    if payload.get("status") != "success":
        raise ClusterError(f"{url}: {payload}")
    return payload["data"]


def _wait_for_targets(url: str, expected: set[str], interval: float, timeout: float) -> Any:
    """Poll until exactly `expected` are active, up, and each scraped twice; the targets' data."""
    deadline = time.monotonic() + timeout
    first_up: dict[str, str] = {}
    while True:
        data = _get(f"{url}/api/v1/targets")
        active = {
            t["labels"].get("instance", t["discoveredLabels"]["__address__"]): t
            for t in data["activeTargets"]
        }
        if active and set(active) != expected:
            raise ClusterError(
                f"the relabeling kept the wrong targets: unexpected {sorted(set(active) - expected)}, "
                f"missing {sorted(expected - set(active))}"
            )
        for address, target in active.items():
            if target["health"] == "up":
                first_up.setdefault(address, target["lastScrape"])
        twice = [a for a, t in active.items() if t["health"] == "up" and t["lastScrape"] != first_up[a]]
        if active and len(twice) == len(expected):
            return data
        if time.monotonic() > deadline:
            down = {a: t["lastError"] or t["health"] for a, t in active.items() if a not in twice}
            raise ClusterError(f"targets not scraped twice within {timeout:g}s: {down}")
        time.sleep(min(0.2, interval / 4))


def unready_pods(cluster: Cluster, history: History) -> set[str]:
    """Engine pods not answering at the last moment (their endpoints read not ready)."""
    return {
        p.name for w in cluster.workloads for p in w.engine_pods if not history.presence(p.address)[-2:].any()
    }


def scrape(cluster: Cluster, history: History, *, interval: float = 1.0, timeout: float = 60.0) -> Scrape:
    """Serve every target, let a real Prometheus scrape it through the Operator's jobs, read back."""
    pages = {p.address: history.page(p.address) for p in cluster.targets}
    configs = scrape_configs(cluster, interval, unready_pods(cluster, history))
    honor_by_job = {c["job_name"]: bool(c["honor_labels"]) for c in configs}
    with ExpositionServers(pages), TemporaryPrometheus(scrape_configs=configs) as prometheus:
        data = _wait_for_targets(prometheus.url, set(pages), interval, timeout)
        now = time.time()
        found = _get(
            f"{prometheus.url}/api/v1/series",
            {"match[]": '{__name__=~".+"}', "start": str(now - 600), "end": str(now + 60)},
        )
    ups = {
        s["instance"]: {k: v for k, v in s.items() if k != "__name__"} for s in found if s["__name__"] == "up"
    }
    honor = {t["labels"]["instance"]: honor_by_job[t["scrapePool"]] for t in data["activeTargets"]}
    return Scrape(
        series=tuple(found),
        targets=ups,
        honor=honor,
        dropped=tuple(t["discoveredLabels"] for t in data["droppedTargets"]),
        pages=pages,
        configs=tuple(configs),
    )


def predict(exposed: Labels, target: Mapping[str, str], honor: bool) -> dict[str, str]:
    """The label set Prometheus gives a sample with these exporter labels from this target."""
    own = dict(exposed)
    if honor:
        out = {k: v for k, v in target.items() if k not in own}
        out.update(own)
    else:
        out = dict(own)
        resolved: list[str] = []
        for name in sorted((k for k in target if own.get(k, "") != ""), key=len):
            renamed = f"exported_{name}"
            while renamed in own or renamed in target or renamed in resolved:
                renamed = f"exported_{renamed}"
            resolved.append(renamed)
            out[renamed] = own[name]
        out.update(target)
    return {k: v for k, v in out.items() if v != ""}


def match(history: History, scraped: Scrape) -> list[Backfill]:
    """Every synthesised series under its scraped label set, plus `up`; `ClusterError` otherwise."""
    known = {frozenset(s.items()) for s in scraped.series}
    used: set[frozenset[tuple[str, str]]] = set()
    out: list[Backfill] = []
    missing: list[str] = []
    for s in history.series:
        if not np.isfinite(s.values).any():
            continue
        target = scraped.targets.get(s.target)
        if target is None:
            missing.append(
                f"{describe(s.name, s.labels)} ({s.origin}): its target {s.target} was not scraped"
            )
            continue
        labels = predict(s.labels, target, scraped.honor[s.target])
        key = frozenset({"__name__": s.name, **labels}.items())
        if key not in known:
            missing.append(f"{describe(s.name, s.labels)} ({s.origin}) as {describe(s.name, labels)}")
            continue
        used.add(key)
        out.append((s.name, labels, s.values))
    if missing:
        shown = "\n  ".join(missing[:10])
        more = f"\n  ... and {len(missing) - 10} more" if len(missing) > 10 else ""
        raise ClusterError(f"{len(missing)} synthesised series match no scraped label set:\n  {shown}{more}")
    for address, target in scraped.targets.items():
        used.add(frozenset({"__name__": "up", **target}.items()))
        out.append(("up", dict(target), history.presence(address).astype(float)))
    extra = [dict(k) for k in known - used if dict(k)["__name__"] not in SYNTHETIC]
    if extra:
        names = ", ".join(sorted(describe(e.pop("__name__"), e) for e in extra)[:10])
        raise ClusterError(f"{len(extra)} scraped series have no synthesised history: {names}")
    return out


def backfill(history: History, series: list[Backfill]) -> TemporaryPrometheus:
    """A TemporaryPrometheus (not yet started) holding the history under the scraped label sets.

    Its lookback is two steps: backfilled blocks carry no staleness markers, so a series
    that stopped (a crashed engine) disappears about when a scraping Prometheus would have
    marked it stale.
    """
    text = to_openmetrics(
        (name, labels, values, history.start, history.step) for name, labels, values in series
    )
    # promtool writes about a thousand series a second here: give a benchmark-sized cluster its time.
    timeout = max(60.0, len(series) / 500)
    return TemporaryPrometheus(text, lookback_delta=2 * history.step, startup_timeout=timeout)
