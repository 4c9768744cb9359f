"""Reading the live Prometheus options (`triage.inputs.options`) into a source, a catalog,
query options and the fleets to diagnose, as every live command does.

Secrets come from flags, files or the environment (`TRIAGE_PROMETHEUS_TOKEN`), never
echoed back; a value that cannot work is a `SourceArgError` naming its flag.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Mapping

from signals.catalog import Catalog, QueryOptions, load_catalog, normalise_selector
from signals.fleets import Fleet, FleetMap, discover
from signals.fleets.inventory import fetch_inventory
from signals.fleets.scope import scoped_options
from signals.prometheus import Progress, PrometheusSource
from triage.inputs.arguments import read_secret
from triage.inputs.errors import SourceArgError
from triage.inputs.options import TOKEN_ENV


def prometheus_source(args: argparse.Namespace, progress: Progress | None = None) -> PrometheusSource:
    """The source the options describe; SourceArgError for a value that cannot work.
    `progress` hears the reads as they end (a front end's display)."""
    url = str(args.prometheus or "")
    if not url.startswith(("http://", "https://")):
        raise SourceArgError(f"--prometheus: '{url}' is not an http:// or https:// URL")
    if args.timeout <= 0:
        raise SourceArgError("--timeout: must be more than zero seconds")
    max_series = getattr(args, "max_series", None)
    if max_series is not None and max_series < 0:
        raise SourceArgError("--max-series: must be 0 (no cap) or more")
    token = read_secret(args.token_file, "token-file") if args.token_file else os.environ.get(TOKEN_ENV)
    basic: tuple[str, str] | None = None
    if args.basic_auth_file:
        user, sep, password = read_secret(args.basic_auth_file, "basic-auth-file").partition(":")
        if not sep:
            raise SourceArgError("--basic-auth-file: expected user:password")
        basic = (user, password)
    headers: dict[str, str] = {}
    for raw in args.header:
        key, sep, value = raw.partition(":")
        if not sep or not key.strip():
            raise SourceArgError(f"--header: expected 'Name: value', got '{raw}'")
        headers[key.strip()] = value.strip()
    return PrometheusSource(
        url.rstrip("/"),
        timeout=args.timeout,
        bearer_token=token or None,
        basic_auth=basic,
        headers=headers or None,
        ca_bundle=args.ca_file,
        compress=args.compress,
        verify=not args.insecure,
        progress=progress,
        **({"max_series": max_series} if max_series is not None else {}),
    )


def query_options(args: argparse.Namespace) -> QueryOptions:
    try:
        selector = normalise_selector(args.selector or "")
    except ValueError as exc:
        raise SourceArgError(f"--selector: {exc}") from None
    label = args.replica_label
    if not label or not label.replace("_", "a").isalnum() or label[0].isdigit():
        raise SourceArgError(f"--replica-label: '{label}' is not a label name")
    return QueryOptions(replica_label=label, selector=selector)


def catalog(args: argparse.Namespace) -> Catalog:
    return load_catalog(args.catalog)


def live_source(
    args: argparse.Namespace,
    at: float | None = None,
    lookback: float = 3600.0,
    *,
    scope: bool = True,
    progress: Progress | None = None,
) -> tuple[PrometheusSource, Catalog, QueryOptions]:
    """The server, the catalog and the query options the live flags describe, as every live command
    reads them (the server's flags are checked first, so their errors come first); with `--fleet`,
    the options are scoped to the fleet as it was in the `lookback` before `at` (unless `scope`
    is off: the caller scopes per fleet itself). `progress` as for `prometheus_source`."""
    prometheus, cat, options, _ = live_fleet_source(args, at, lookback, scope=scope, progress=progress)
    return prometheus, cat, options


def live_fleet_source(
    args: argparse.Namespace,
    at: float | None = None,
    lookback: float = 3600.0,
    *,
    scope: bool = True,
    progress: Progress | None = None,
) -> tuple[PrometheusSource, Catalog, QueryOptions, Fleet | None]:
    """`live_source` and the fleet `--fleet` chose (None without it), for a command that records
    which fleet it read (a capture)."""
    prometheus, cat, options = prometheus_source(args, progress), catalog(args), query_options(args)
    wanted = getattr(args, "fleet", None)
    if not wanted or not scope:
        return prometheus, cat, options, None
    fleet = chosen_fleet(prometheus, args, wanted, at, lookback)
    return prometheus, cat, scoped_options(fleet, options), fleet


def fleet_labels(args: argparse.Namespace) -> tuple[str, ...]:
    labels = tuple(label.strip() for label in str(args.fleet_labels).split(",") if label.strip())
    for label in labels:
        if not label.replace("_", "a").isalnum() or label[0].isdigit():
            raise SourceArgError(f"--fleet-labels: '{label}' is not a label name")
    if not labels:
        raise SourceArgError("--fleet-labels: name at least one label")
    return labels


def find_fleets(
    prometheus: PrometheusSource, args: argparse.Namespace, at: float | None = None, lookback: float = 3600.0
) -> FleetMap:
    """The fleets the server held in the `lookback` before `at`, named by the configured fleet labels."""
    selector = query_options(args).selector
    return discover(fetch_inventory(prometheus, at, lookback, selector), fleet_labels(args))


def fleets_to_diagnose(
    prometheus: PrometheusSource,
    args: argparse.Namespace,
    at: float,
    lookback: float,
    alert_labels: Mapping[str, str] | None = None,
) -> list[Fleet]:
    """Which fleets a live diagnosis is about: the one `--fleet` names, the one an alert names
    by its fleet labels, or every fleet the server (within `--selector`) holds when there are
    several; none (an unscoped diagnosis, as with one fleet) otherwise."""
    if getattr(args, "fleet", None):
        return [chosen_fleet(prometheus, args, args.fleet, at, lookback)]
    found = find_fleets(prometheus, args, at, lookback)
    if alert_labels:
        from signals.fleets.naming import name_fleet  # an alert's labels alone need it

        named = name_fleet(found, [alert_labels], fleet_labels(args))
        if named.refused:
            raise SourceArgError(f"--alert: {named.reason}")
        if named.fleet is not None:
            return [named.fleet]
    return list(found.fleets) if len(found.fleets) > 1 else []


def chosen_fleet(
    prometheus: PrometheusSource,
    args: argparse.Namespace,
    wanted: str,
    at: float | None = None,
    lookback: float = 3600.0,
) -> Fleet:
    """The one fleet `--fleet` names; SourceArgError listing the fleets when it names none or several."""
    found = find_fleets(prometheus, args, at, lookback)
    try:
        return found.one(wanted, prometheus.url)
    except ValueError as exc:
        raise SourceArgError(f"--fleet: {exc}") from None
