"""The verdict: one of four answers, and what it rests on beyond the ranked causes.

- `no_incident`: the server's own signals do not breach the symptom (a client saw what the
  server does not, or no symptom shows at all); no cause is named.
- `unexplained`: the symptom is breached and no cause's required evidence holds; the first
  movers are the answer.
- `ambiguous`: the first causes score within the margin and neither explains the other;
  each is named with what tells it apart, instead of a pick by a hair.
- `cause`: the first cause explains the symptom.

The first movers are a second opinion beside any verdict: when what moved first sits in a
layer the verdict's chain does not explain, the causes that leave it unexplained lose
score and the answer says why.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import replace

from signals.timeparse import format_instant
from signals.vocabulary import EXPORTERS, SIGNALS
from triage.core.graph import TriageGraph
from triage.core.model import CauseFinding, FirstMover, Unmonitored, Verdict
from triage.core.movers import earliest
from triage.core.playbook import signals_of


def chained(a: CauseFinding, b: CauseFinding) -> bool:
    """Whether one of the two explains the other (a chain is one answer, not a tie)."""
    return b.cause in a.explains or a.cause in b.explains or b.cause in a.explained_by


def tied(ranked: list[CauseFinding], margin: float, own: Mapping[str, float]) -> list[CauseFinding]:
    """The causes within `margin` of the top one that are not in its chain (empty when none).

    The top one carries the evidence of what it explains (its final score); the others are
    compared on their own scores (`own`), before any lift: two causes that explain the same
    mechanism are not tied by it.
    """
    if len(ranked) < 2:
        return []
    top = ranked[0]
    close = [c for c in ranked[1:] if top.score - own.get(c.cause, c.score) <= margin and not chained(top, c)]
    return [top, *close] if close else []


def tells_apart(graph: TriageGraph, finding: CauseFinding, others: Iterable[CauseFinding]) -> str:
    """What would confirm this cause rather than the others: its own strongest holding check on a
    signal the others do not require, and the query of its first action."""
    kb = graph.knowledge
    theirs: set[str] = set()
    for other in others:
        theirs |= signals_of(kb.causes[other.cause].requires)
    own = [e for e in finding.evidence if e.holds and e.role == "requires" and e.signal not in theirs]
    own = own or [e for e in finding.evidence if e.holds and e.signal not in theirs]
    own = own or [e for e in finding.evidence if e.holds]
    parts = []
    if own:
        best = max(own, key=lambda e: (e.margin, e.departure))
        parts.append(f"{best.check} ({best.note})" if best.note else best.check)
    confirm = next((a.confirm for a in finding.actions if a.confirm), "")
    if confirm:
        parts.append(f"confirm: {confirm}")
    return "; ".join(parts) or kb.causes[finding.cause].title


def verdict_of(breached: bool, ranked: list[CauseFinding], close: list[CauseFinding]) -> Verdict:
    """The verdict, from the breach, the ranked causes and those tied at the top (`tied`)."""
    if not breached:
        return "no_incident"
    if not ranked:
        return "unexplained"
    return "ambiguous" if close else "cause"


def _chain(graph: TriageGraph, finding: CauseFinding, ranked: list[CauseFinding]) -> list[CauseFinding]:
    """The cause and the ranked causes in its chain: those it explains and those explaining it."""
    kb = graph.knowledge
    mine = set(kb.causes[finding.cause].explains)
    return [finding] + [
        f
        for f in ranked
        if f.cause != finding.cause and (f.cause in mine or finding.cause in kb.causes[f.cause].explains)
    ]


def _accounts_for(graph: TriageGraph, chain: list[CauseFinding]) -> tuple[set[str], set[str]]:
    """The layers and signals a chain accounts for: its causes' layers, and the signals their
    checks read with the layers of those (a release that slows the engines explains the engine)."""
    kb = graph.knowledge
    reads: set[str] = set()
    for f in chain:
        reads |= _reads(graph, f)
    layers = {kb.causes[f.cause].layer for f in chain} | {SIGNALS[s].layer for s in reads if s in SIGNALS}
    return layers, reads


def _reads(graph: TriageGraph, finding: CauseFinding) -> set[str]:
    """The signals a cause's checks read and its evidence holds on."""
    spec = graph.knowledge.causes[finding.cause]
    return signals_of(spec.requires, spec.supports) | {e.signal for e in finding.evidence if e.holds}


def second_opinion(
    graph: TriageGraph,
    ranked: list[CauseFinding],
    top: str,
    movers: tuple[FirstMover, ...],
    step: float,
    penalty: float,
) -> tuple[list[CauseFinding], tuple[str, ...]]:
    """Lower the causes whose chain leaves the first movers unexplained, and say why for `top`
    (the cause the walk ranks first). The scores lowered are the causes' own, so the caller
    orders them again afterwards.
    """
    first = earliest(movers, step)
    if not first or not ranked:
        return ranked, ()
    out: list[CauseFinding] = []
    notes: list[str] = []
    for finding in ranked:
        layers, reads = _accounts_for(graph, _chain(graph, finding, ranked))
        if any(m.layer in layers or m.signal in reads for m in first):
            out.append(finding)
            continue
        out.append(replace(finding, score=round(finding.score * penalty, 4)))
        if finding.cause == top:
            m = first[0]
            where = f" on {m.replica}" if m.replica else ""
            notes.append(
                f"{m.signal}{where} ({m.layer}) moved first, at {format_instant(m.moved_at)[11:]}, and "
                f"{finding.cause}'s chain does not explain the {m.layer} layer: its score is lowered"
            )
    return out, tuple(notes)


def unmonitored(
    graph: TriageGraph,
    referenced: set[str],
    present: Mapping[str, bool],
    walked: list[CauseFinding],
) -> tuple[Unmonitored, ...]:
    """Exporters the fleet does not run at all (none of their signals holds a sample), with
    the signals they would give and the causes left unprovable for want of them."""
    kb = graph.knowledge
    out = []
    for source, names in EXPORTERS.items():
        wanted = sorted(s for s in names if s in referenced)
        if not wanted or any(present.get(s, False) for s in names):
            continue
        unprovable = sorted(
            f.cause
            for f in walked
            if f.status == "unproven" and signals_of(kb.causes[f.cause].requires) & set(names)
        )
        out.append(Unmonitored(source, tuple(wanted), tuple(unprovable)))
    return tuple(out)
