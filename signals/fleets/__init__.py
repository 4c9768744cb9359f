"""Fleets: the replicas that serve one model in one workload, found in one Prometheus.

`inventory` fetches the label sets once (`labelsets` says which labels each keeps, and
reads the same rows from series in hand, a raw fixture's), `discover` joins them (pure),
and `scope` turns one fleet into each exporter's own selector and replica label, so every
query of a diagnosis reads that fleet alone and no layer is blinded by the scoping.
"""

from signals.fleets.discover import Inventory, discover
from signals.fleets.model import Fleet, FleetMap, Gpu, JoinProblem, Workload
from signals.vocabulary import DEFAULT_FLEET_LABELS

__all__ = [
    "DEFAULT_FLEET_LABELS",
    "Fleet",
    "FleetMap",
    "Gpu",
    "Inventory",
    "JoinProblem",
    "Workload",
    "discover",
]
