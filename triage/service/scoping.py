"""Which fleet a group's diagnosis reads: the one its alerts name, else the service's selector.

One Prometheus holds many fleets, and an alert for one of them must be diagnosed on that
fleet's series only (another fleet's trouble is never its cause). The alerts of a work
item say which fleet they are about (`signals.fleets.naming`: their fleet labels, else a
pod or instance of a replica); the fleets are found once per moment (one discovery,
shared by every group diagnosed at that moment) and the fleet's own scopes replace the
service's selector (`signals.fleets.scope`). Alerts that name no fleet are diagnosed with
the service's selector, as before fleets existed, and the note says so. Alerts that name
a fleet Prometheus does not have, or several, are not diagnosed: the note says why.

With no fleet labels configured (`fleet_labels: []`) nothing is looked up: every group is
diagnosed with the service's selector.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from signals.catalog import QueryOptions
from signals.fleets import FleetMap, discover
from signals.fleets.discover import ENGINES
from signals.fleets.inventory import fetch_inventory
from signals.fleets.naming import name_fleet, names_anything
from signals.fleets.scope import scoped_options
from signals.prometheus import PrometheusSource
from triage.service.fetches import SharedFetches


@dataclass(frozen=True)
class Scoping:
    """How one work item is read: the query options, the key its frames are shared under, the fleet
    it is about (labels and workload, as the diagnosis names it) and the one-line note saying so."""

    options: QueryOptions
    key: str
    fleet: tuple[tuple[str, str], ...]
    note: str
    refused: bool = False


class FleetScoper:
    """Decides each work item's scoping; fleets are discovered once per moment through `fleets`."""

    def __init__(
        self,
        options: QueryOptions,
        fleet_labels: Sequence[str],
        lookback: float,
        fleets: SharedFetches[float, FleetMap],
    ) -> None:
        self.options = options
        self.fleet_labels = tuple(fleet_labels)
        self.lookback = lookback
        self.fleets = fleets

    def _selector(self, why: str) -> Scoping:
        selector = f"{{{self.options.selector}}}" if self.options.selector else "(none: the whole Prometheus)"
        return Scoping(self.options, "", (), f"{why}; diagnosed with the service's selector {selector}")

    def discover(self, source: PrometheusSource, at: float) -> FleetMap:
        """The fleets of the `lookback` before `at`; none without engine metrics (asked first, in one
        request, which is also how an unreachable Prometheus shows at once)."""
        if not source.metric_names() & set(ENGINES):
            return FleetMap(())
        return discover(fetch_inventory(source, at, self.lookback), self.fleet_labels)

    def decide(self, alerts: Sequence[Mapping[str, str]], at: float, source: PrometheusSource) -> Scoping:
        """The scoping of a work item with these alerts; SignalError when the fleets cannot be read."""
        if not self.fleet_labels:
            return self._selector("fleet scoping is off (no fleet labels configured)")
        if not any(names_anything(labels, self.fleet_labels) for labels in alerts):
            labels = ", ".join(self.fleet_labels)
            return self._selector(f"the alerts name no fleet (no {labels}, pod or instance label)")
        fleets, _ = self.fleets.get(at, lambda: self.discover(source, at))
        named = name_fleet(fleets, alerts, self.fleet_labels)
        if named.fleet is not None:
            fleet = named.fleet
            return Scoping(scoped_options(fleet, self.options), fleet.name, fleet.identity, named.reason)
        if named.refused:
            return Scoping(self.options, "", (), f"not diagnosed: {named.reason}", refused=True)
        return self._selector(named.reason)


__all__ = ["FleetScoper", "Scoping"]
