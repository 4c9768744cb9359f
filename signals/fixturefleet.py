"""The fleet a fixture speaks of: `fleet:` at the top, and `expect.fleet` in a raw fixture.

A Prometheus holds many fleets, so an incident recorded from one must say which fleet
it is, or its replay could blame another fleet's trouble. A captured fixture records its
fleet (`fleet: {labels: {...}, workload: Kind/name}`). A raw fixture may hold several
fleets, exactly as the server it came from did; its `expect.fleet` (a fleet's name as
`triage fleets` prints it, or its labels `key=value,...`, as `--fleet` takes them) says
which one the expectation is about, and the replay diagnoses that fleet alone.

The fleets of a raw fixture are found in its own series by the same discovery a live
server gets (`signals.fleets`), so a name that matches no fleet, or several, is an error
located in the file when it loads, not a surprise in the replay. Only a raw fixture gets
there (`fleets_in`, `expect.fleet`), so those two import the discovery themselves and a
signal-level fixture loads without it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from signals.vocabulary import DEFAULT_FLEET_LABELS
from signals.yamldoc import Document

if TYPE_CHECKING:
    from signals.fleets import Fleet, FleetMap

FLEET_KEYS = ("labels", "workload")


@dataclass(frozen=True)
class FixtureFleet:
    """A fleet as a fixture records it: its labels (`namespace`, `model_name` by default) and,
    where kube-state-metrics showed it, its workload as `Kind/name`."""

    labels: tuple[tuple[str, str], ...]
    workload: str | None = None
    shown: str | None = field(default=None, compare=False)
    """The name discovery gave the fleet, where the record came from one: a stack's own naming
    (a KServe service for `/mnt/models`, TGI without a model label) is not in the labels."""

    @staticmethod
    def of(fleet: Fleet) -> FixtureFleet:
        workload = str(fleet.workload) if fleet.workload is not None else None
        return FixtureFleet(fleet.labels, workload, fleet.name)

    @property
    def name(self) -> str:
        """The name `triage fleets` prints for this fleet (what `--fleet` takes)."""
        if self.shown:
            return self.shown
        head = "/".join(v or "?" for _, v in self.labels)
        return f"{head}@{self.workload}" if self.workload else head

    def matches(self, fleet: Fleet) -> bool:
        """Same labels, and the same workload when this record names one."""
        if dict(fleet.labels) != dict(self.labels):
            return False
        return self.workload is None or str(fleet.workload) == self.workload

    def document(self) -> dict[str, Any]:
        """The `fleet:` block a capture writes."""
        out: dict[str, Any] = {"labels": dict(self.labels)}
        if self.workload:
            out["workload"] = self.workload
        return out


def _kind(value: Any) -> str:
    return "nothing" if value is None else type(value).__name__


def read_fleet(doc: Document, value: Any) -> FixtureFleet:
    """The top-level `fleet:` block, validated (every message names file, line and key)."""
    path: tuple[str | int, ...] = ("fleet",)
    if not isinstance(value, dict):
        raise doc.error(path, f"expected a mapping with labels and workload, got {_kind(value)}")
    for key in value:
        if key not in FLEET_KEYS:
            raise doc.error((*path, str(key)), f"unknown key; allowed: {', '.join(FLEET_KEYS)}")
    labels = value.get("labels")
    if not isinstance(labels, dict) or not labels:
        raise doc.error(
            (*path, "labels"), "expected the fleet's labels, e.g. {namespace: llm, model_name: M}"
        )
    pairs: list[tuple[str, str]] = []
    for key, label_value in labels.items():
        if not isinstance(label_value, str):
            raise doc.error((*path, "labels", str(key)), f"expected a string, got {_kind(label_value)}")
        pairs.append((str(key), label_value))
    workload = value.get("workload")
    if workload is not None:
        kind, sep, name = workload.partition("/") if isinstance(workload, str) else ("", "", "")
        if not (sep and kind and name):
            raise doc.error((*path, "workload"), "expected Kind/name, e.g. Deployment/vllm")
    return FixtureFleet(tuple(pairs), workload)


def read_expect_fleet(doc: Document, value: Any) -> str:
    """`expect.fleet`: a fleet's name or labels; the labels' syntax is checked here."""
    from signals.fleets import FleetMap

    path: tuple[str | int, ...] = ("expect", "fleet")
    if not isinstance(value, str) or not value.strip():
        raise doc.error(path, f"expected a fleet's name or labels (key=value,...), got {_kind(value)}")
    try:
        FleetMap(()).find(value)
    except ValueError as exc:
        raise doc.error(path, str(exc)) from None
    return value.strip()


def fleets_in(series: Iterable[tuple[str, Mapping[str, str]]], record: FixtureFleet | None) -> FleetMap:
    """The fleets raw series hold, found as a Prometheus holding them would show them."""
    from signals.fleets import discover
    from signals.fleets.labelsets import inventory_from_series

    return discover(inventory_from_series(series), fleet_labels(record))


def fleet_labels(record: FixtureFleet | None) -> tuple[str, ...]:
    """The labels that name a fleet in this fixture: the recorded fleet's, else the defaults."""
    return tuple(k for k, _ in record.labels) if record is not None else DEFAULT_FLEET_LABELS


def select_fleet(
    doc: Document,
    found: FleetMap,
    record: FixtureFleet | None,
    wanted: str | None,
    has_expect: bool,
    where: str = "the fixture",
) -> Fleet | None:
    """The fleet a raw fixture's replay diagnoses: the one `expect.fleet` names, else the one
    `fleet:` records; None when it names none and holds at most one (diagnosed as a whole).

    An InputError, located in the fixture, when a name matches no fleet or several, when
    `fleet:` and `expect.fleet` disagree, or when an expectation is given for a fixture
    holding several fleets without saying which.
    """
    chosen: Fleet | None = None
    if record is not None:
        matching = [f for f in found.fleets if record.matches(f)]
        if len(matching) != 1:
            names = ", ".join(f.name for f in (matching or found.fleets)) or "none found"
            problem = "matches several fleets" if matching else "matches no fleet in " + where
            raise doc.error(("fleet",), f"{record.name} {problem}; the fleets are: {names}")
        chosen = matching[0]
    if wanted is not None:
        try:
            named = found.one(wanted, where)
        except ValueError as exc:
            raise doc.error(("expect", "fleet"), str(exc)) from None
        if chosen is not None and named != chosen:
            raise doc.error(("expect", "fleet"), f"names {named.name}, but `fleet:` records {chosen.name}")
        chosen = named
    if chosen is None and has_expect and len(found.fleets) > 1:
        names = ", ".join(f.name for f in found.fleets)
        raise doc.error(
            ("expect",),
            f"{where} holds {len(found.fleets)} fleets ({names}): "
            "say which one this expectation is about with expect.fleet",
        )
    return chosen
