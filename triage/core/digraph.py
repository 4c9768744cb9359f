"""The decision graph as a networkx DiGraph: every node and edge the playbooks define.

Nodes are typed by a prefix: `symptom:ttft_slow`, `layer:ttft_slow/request` (a layer
node per symptom, so that a symptom reaches only the causes its layers list),
`cause:kv_pressure`, `check:kv_pressure/requires/0`, `action:...`, `forbidden:...`.
Edges: symptom -> layer -> cause, cause -> check, cause -> action, cause -> cause
(`explains`), and symptom or cause -> forbidden action (what makes it tempting).
The walk reads the symptom -> layer -> cause part as `TriageGraph.reach` and needs no
networkx; this is the whole graph, for `triage playbooks check` and graph algorithms.
"""

from __future__ import annotations

import networkx as nx

from triage.core.model import LAYERS
from triage.core.playbook import Knowledge


def node(kind: str, name: str) -> str:
    return f"{kind}:{name}"


def decision_digraph(kb: Knowledge) -> nx.DiGraph:
    """Build the DiGraph; the playbook loader has already checked every reference."""
    g = nx.DiGraph()
    for sid, s in sorted(kb.symptoms.items()):
        g.add_node(node("symptom", sid), kind="symptom", title=s.title)
        for layer in LAYERS:
            members = s.layers.get(layer, ())  # type: ignore[call-overload]
            if not members:
                continue
            layer_node = node("layer", f"{sid}/{layer}")
            g.add_node(layer_node, kind="layer", layer=layer)
            g.add_edge(node("symptom", sid), layer_node)
            for cid in members:
                g.add_edge(layer_node, node("cause", cid))
    for cid, c in sorted(kb.causes.items()):
        g.add_node(node("cause", cid), kind="cause", layer=c.layer, title=c.title)
        for section in ("requires", "supports", "against"):
            for i, check in enumerate(getattr(c, section)):
                check_node = node("check", f"{cid}/{section}/{i}")
                g.add_node(check_node, kind="check", role=section, spec=check)
                g.add_edge(node("cause", cid), check_node)
        for aid in c.first_actions:
            g.add_edge(node("cause", cid), node("action", aid))
        for other in c.explains:
            g.add_edge(node("cause", cid), node("cause", other), relation="explains")
    for aid in kb.actions:
        g.add_node(node("action", aid), kind="action")
    for fid, f in sorted(kb.forbidden.items()):
        g.add_node(node("forbidden", fid), kind="forbidden")
        for sid in f.when.symptoms:
            g.add_edge(node("symptom", sid), node("forbidden", fid))
        for cid in f.when.causes:
            g.add_edge(node("cause", cid), node("forbidden", fid))
    return g
