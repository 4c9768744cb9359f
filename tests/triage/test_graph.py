"""The decision graph: what the walk visits is what the whole DiGraph holds."""

from __future__ import annotations

from triage.core.digraph import decision_digraph, node
from triage.core.graph import TriageGraph
from triage.core.model import LAYERS


def test_the_reach_the_walk_follows_is_the_digraphs_symptom_layer_cause_paths(graph: TriageGraph) -> None:
    digraph = decision_digraph(graph.knowledge)
    assert set(graph.reach) == set(graph.knowledge.symptoms)
    for symptom in graph.knowledge.symptoms:
        through_layers: list[str] = []
        for layer in LAYERS:
            layer_node = node("layer", f"{symptom}/{layer}")
            if layer_node in digraph:
                assert digraph.has_edge(node("symptom", symptom), layer_node)
                for succ in digraph.successors(layer_node):
                    cause = succ.split(":", 1)[1]
                    if cause not in through_layers:
                        through_layers.append(cause)
        assert graph.causes_of(symptom) == through_layers, symptom
        assert through_layers, f"{symptom} reaches no cause"


def test_an_unknown_symptom_reaches_nothing(graph: TriageGraph) -> None:
    assert graph.causes_of("no_such_symptom") == []


def test_the_digraph_holds_every_id_of_the_knowledge(graph: TriageGraph) -> None:
    digraph = decision_digraph(graph.knowledge)
    kb = graph.knowledge
    for kind, ids in (
        ("symptom", kb.symptoms),
        ("cause", kb.causes),
        ("action", kb.actions),
        ("forbidden", kb.forbidden),
    ):
        assert all(node(kind, i) in digraph for i in ids), kind
