"""A test cluster: many LLM fleets, their exporters, and a real Prometheus that scraped them.

Fleet discovery has to join three exporters that label each replica differently (the
engine's `pod`, DCGM's `exported_pod` or `pod`, kube-state-metrics' owner chain). To test
it honestly the label sets must be exactly what a cluster produces, so nothing here writes
them by hand: every target serves its page over HTTP on its own loopback address, a real
Prometheus scrapes them through the Prometheus Operator's relabeling, and the history is
then backfilled under the label sets that scrape produced.

Modules, in the order the data flows:
- `model`: the cluster's objects (nodes, GPUs, pods, Services, monitors, fleet specs);
- `monitors`: each chart's pod labels, Service and ServiceMonitor/PodMonitor (which real file);
- `layout`: placement, loopback addresses, controllers' names;
- `stories`: the incident told on each fleet, for the synthesiser (`tools.synth`);
- `history`, `kube`: the synthesiser's series moved onto the cluster's targets and labels;
- `exposition`, `servers`: the `/metrics` pages and the HTTP servers that serve them;
- `scrape`: the Operator's generated jobs over static targets with `__meta_kubernetes_*` labels;
- `harness`: scrape, match every series to its scraped label set, backfill;
- `scenarios`: the standard scenario and its truth record;
- `rawfixture`: two of its fleets written as one raw fixture (`python -m tools.cluster.rawfixture`).
"""

from tools.cluster.model import ClusterError
from tools.cluster.scenarios import FleetTruth, GpuTruth, PodTruth, Scenario, Truth, three_fleets

__all__ = ["ClusterError", "FleetTruth", "GpuTruth", "PodTruth", "Scenario", "Truth", "three_fleets"]
