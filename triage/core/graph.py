"""The decision graph the walk follows: which causes a symptom reaches, through which layers.

A symptom reaches causes through its layers (symptom -> layer -> cause), in layer order
and then in the order its playbook lists them; that reach is all the walk asks of the
graph, so it is read from the knowledge once, when the graph is built. The whole graph
as a networkx DiGraph, with the checks, actions, `explains` and forbidden actions as
well, is `triage.core.digraph`, built where it is looked at (`triage playbooks check`),
so a diagnosis does not import networkx. A test holds the two to the same edges.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from triage.core.model import LAYERS, Action
from triage.core.playbook import Knowledge


@dataclass(frozen=True)
class TriageGraph:
    """The knowledge and the reach built from it; the walk asks it what to visit."""

    knowledge: Knowledge
    reach: Mapping[str, tuple[str, ...]]
    """Per symptom, the causes its layers list: in layer then playbook order, each once."""

    def causes_of(self, symptom: str) -> list[str]:
        """Causes reachable from a symptom through its layers, in layer then playbook order."""
        return list(self.reach.get(symptom, ()))

    def layers_of(self, symptom: str) -> tuple[tuple[str, tuple[str, ...]], ...]:
        spec = self.knowledge.symptoms[symptom]
        return tuple((layer, tuple(spec.layers[layer])) for layer in LAYERS if layer in spec.layers)

    def action(self, action_id: str) -> Action:
        spec = self.knowledge.actions[action_id]
        return Action(action_id, spec.text.strip(), spec.confirm.strip())


def build_graph(kb: Knowledge) -> TriageGraph:
    """The graph of `kb`; the playbook loader has already checked every reference."""
    reach: dict[str, tuple[str, ...]] = {}
    for sid, s in sorted(kb.symptoms.items()):
        causes: list[str] = []
        for layer in LAYERS:
            for cid in s.layers.get(layer, ()):  # type: ignore[call-overload]
                if cid not in causes:
                    causes.append(cid)
        reach[sid] = tuple(causes)
    return TriageGraph(kb, reach)
