"""The walk: from the symptom through its layers to ranked causes, actions and red lines.

Pure and deterministic: the frame, the graph and the moment `at` go in, a Diagnosis
comes out; ties are broken by id. The reasoning follows DESIGN.md:

1. symptom first: only the causes the symptom's layers can produce are asked, and then
   the partners of the ranked ones (what explains them, what they explain), named beside
   them but never ahead of a cause the symptom asked about;
2. against a baseline: the onset is found, and checks compare after it with before it;
3. per replica: outlier, broad and event checks read every replica, not the fleet sum;
4. the deepest cause wins: when a ranked cause `explains` another ranked one, it goes
   first and the explained cause is named as its mechanism;
5. unknown is not healthy: a missing signal leaves a check unknown, which lowers the
   score and is listed, and never counts as normal;
6. never guess: a cause is ranked only if every required check holds or is unknown,
   no more are unknown than hold, its `key` checks (its signature) are not unknown, and
   at least one holding check is a departure from its baseline;
7. forbidden actions are part of every answer, each with evidence behind its reason.
"""

from __future__ import annotations

import heapq
import math
import re
from collections.abc import Mapping
from dataclasses import replace

from signals.frame import SignalFrame
from signals.timeparse import format_duration, format_instant, parse_duration
from signals.vocabulary import SIGNALS
from triage.core.checks import Context, evaluate, evaluate_entry
from triage.core.graph import TriageGraph
from triage.core.model import AUTO, NO_SYMPTOM, CauseFinding, Diagnosis, Evidence, Forbidden, Role, Status
from triage.core.movers import first_movers
from triage.core.playbook import Knowledge, signals_of
from triage.core.standins import with_stand_ins
from triage.core.tenants import tenants_settled
from triage.core.verdict import second_opinion, tells_apart, tied, unmonitored, verdict_of
from triage.core.windows import Onset, find_onset, make_windows

SUPPORT_WEIGHT = 0.5
AGAINST_PENALTY = 0.5
UNKNOWN_REQUIRED_PENALTY = 0.85


def _symptom_onset(graph: TriageGraph, frame: SignalFrame, symptom: str, at: float) -> Onset | None:
    """Where the symptom began: the strongest worsening of its own signals.

    A change point that leaves the symptom invisible may be noise (correlated noise passes a
    t test more easily than it should); when an info series (a version, a configuration)
    changed within the lookback and the symptom is visible from there, that change is the
    onset instead: for a quality drop after a rollout it is the only onset there is.
    """
    kb = graph.knowledge
    spec = kb.symptoms[symptom]
    numeric = [s for s in spec.onset if SIGNALS.get(s) is None or SIGNALS[s].kind != "info"]
    info = [s for s in spec.onset if s not in numeric]
    onset = find_onset(frame, numeric, at, kb.settings)
    if info and (onset is None or not _detect(graph, frame, symptom, at, onset)[3]):
        changed = find_onset(frame, info, at, kb.settings)
        if changed is not None and (onset is None or _detect(graph, frame, symptom, at, changed)[3]):
            onset = changed
    if onset is None:
        fallback: set[str] = set()
        for cause in graph.causes_of(symptom):
            fallback |= signals_of(kb.causes[cause].requires)
        fallback -= set(spec.onset)
        onset = find_onset(frame, sorted(fallback), at, kb.settings)
    return onset


def _detect(
    graph: TriageGraph, frame: SignalFrame, symptom: str, at: float, onset: Onset | None
) -> tuple[float, tuple[Evidence, ...], bool | None, bool | None]:
    """Severity (>= 1 when visible), the detection evidence, whether it is visible (an
    alerting line of `detect` holds) and whether it is breached at all (`detect` or `breach`)."""
    kb = graph.knowledge
    ctx = Context(
        frame, make_windows(frame, at, onset.time if onset else None, kb.settings), kb.settings.floors
    )
    evidence = []
    severity = 0.0
    spec = kb.symptoms[symptom]
    for check in spec.detect:
        result = evaluate(ctx, check)
        evidence.append(_with_role(result, "detect"))
        if result.holds and result.value is not None and math.isfinite(result.value):
            if check.kind == "above" and check.threshold:
                severity = max(severity, result.value / check.threshold)
            elif result.baseline and result.baseline > 0 and check.factor:
                severity = max(severity, (result.value / result.baseline) / check.factor)
            else:
                severity = max(severity, 1.0)
    known = [e.holds for e in evidence if e.holds is not None]
    visible = any(known) if known else None
    breach = [_with_role(evaluate(ctx, check), "detect") for check in spec.breach]
    evidence += [e for e in breach if e.holds]
    seen = known + [e.holds for e in breach if e.holds is not None]
    breached = any(seen) if seen else None
    if not visible and breached:
        # below every alerting line: ranked after any symptom that crosses one
        rises = [
            e.value / e.baseline for e in breach if e.holds and e.value and e.baseline and e.baseline > 0
        ]
        severity = max(rises) / 10 if rises else 0.1
    return severity, tuple(evidence), visible, breached


def _with_role(evidence: Evidence, role: Role) -> Evidence:
    return replace(evidence, role=role)


def _score_cause(ctx: Context, graph: TriageGraph, cause: str) -> CauseFinding:
    spec = graph.knowledge.causes[cause]
    required = [_with_role(evaluate_entry(ctx, e), "requires") for e in spec.requires]
    support = [_with_role(evaluate_entry(ctx, e), "supports") for e in spec.supports]
    against = [_with_role(evaluate_entry(ctx, e), "against") for e in spec.against]
    evidence = required + support + against
    weights_req = [e.weight for e in spec.requires]
    weights_sup = [e.weight * SUPPORT_WEIGHT for e in spec.supports]

    def finding(status: Status, score: float, why: str = "") -> CauseFinding:
        return CauseFinding(
            cause=cause,
            layer=spec.layer,
            title=spec.title,
            status=status,
            score=score,
            evidence=tuple(evidence),
            why_not=why,
            actions=tuple(graph.action(a) for a in spec.first_actions),
        )

    failed = [e for e in required if e.holds is False]
    if failed:
        return finding("ruled_out", 0.0, f"{failed[0].check} does not hold ({failed[0].note})")
    blind = [e for e, entry in zip(required, spec.requires, strict=True) if entry.key and e.holds is None]
    if blind:
        return finding("unproven", 0.0, f"{blind[0].check} could not be evaluated ({blind[0].note})")
    holding = sum(1 for e in required if e.holds)
    unknown = sum(1 for e in required if e.holds is None)
    if holding == 0:
        return finding("unproven", 0.0, "no required check could be evaluated")
    if unknown > holding:
        return finding(
            "unproven", 0.0, f"{unknown} of {len(required)} required checks could not be evaluated"
        )
    if not any(e.holds and e.departure for e in required + support):
        return finding("no_departure", 0.0, "nothing departs from its baseline")
    total = sum(weights_req) + sum(weights_sup)
    explained = sum(w for w, e in zip(weights_req, required, strict=True) if e.holds)
    explained += sum(w for w, e in zip(weights_sup, support, strict=True) if e.holds)
    strength = [e.margin for e in required + support if e.holds]
    score = 0.45 + 0.4 * (explained / total) + 0.15 * (sum(strength) / len(strength))
    score *= UNKNOWN_REQUIRED_PENALTY ** sum(1 for e in required if e.holds is None)
    # what speaks against a cause counts while it holds; once it has ended it is shown, not weighed
    score *= AGAINST_PENALTY ** sum(1 for e in against if e.holds and e.live)
    if any(e.holds and not e.live for e in required):
        # what a required check found has ended before the last minutes: past, not present
        score *= graph.knowledge.settings.past_weight
    return finding("ranked", round(min(score, 1.0), 4))


def _partners(ctx: Context, graph: TriageGraph, walked: list[CauseFinding]) -> list[CauseFinding]:
    """Causes outside the symptom's layers that explain, or are explained by, a ranked one.

    The chain is named, not only its top: a fallback model serving because replicas were
    lost, a prefill stall fed by a prompt surge. Each partner is scored on its own checks and
    ranked only when they hold.
    """
    kb = graph.knowledge
    seen = {f.cause for f in walked}
    frontier = [f.cause for f in walked if f.status == "ranked"]
    found: list[CauseFinding] = []
    while frontier:
        related: set[str] = set()
        for c in frontier:
            related |= set(kb.causes[c].explains)
            related |= {o for o, spec in kb.causes.items() if c in spec.explains}
        fresh = sorted(related - seen)
        seen |= set(fresh)
        scored = [_score_cause(ctx, graph, c) for c in fresh]
        found += scored
        frontier = [f.cause for f in scored if f.status == "ranked"]
    return found


def _order(
    findings: list[CauseFinding], graph: TriageGraph, asked: frozenset[str] | None = None
) -> list[CauseFinding]:
    """Rank by score, then move every cause ahead of the ranked causes it explains.

    A partner from outside the symptom's layers (`asked`) is named beside the causes it
    relates to but never moved ahead of one the symptom asked about: the symptom's own
    layers lead the answer.
    """
    by_id = {f.cause: f for f in findings}

    def leads(c: str, o: str) -> bool:
        return asked is None or c in asked or o not in asked

    explains = {
        c: [o for o in graph.knowledge.causes[c].explains if o in by_id and leads(c, o)] for c in by_id
    }
    explained_by: dict[str, list[str]] = {c: [] for c in by_id}
    for c, others in explains.items():
        for o in others:
            explained_by[o].append(c)
    # an explainer carries the evidence of what it explains: its score is at least theirs
    lifted: dict[str, float] = {}

    def lift(c: str, seen: frozenset[str]) -> float:
        if c in lifted:
            return lifted[c]
        own = by_id[c].score
        for o in explains[c]:
            if o not in seen:
                own = max(own, lift(o, seen | {c}))
        lifted[c] = own
        return own

    for c in sorted(by_id):
        lift(c, frozenset())
    indegree = {c: len(explained_by[c]) for c in by_id}
    heap = [(-lifted[c], c) for c in by_id if indegree[c] == 0]
    heapq.heapify(heap)
    order: list[str] = []
    while heap:
        _, c = heapq.heappop(heap)
        order.append(c)
        for o in explains[c]:
            indegree[o] -= 1
            if indegree[o] == 0:
                heapq.heappush(heap, (-lifted[o], o))
    return [
        replace(
            by_id[c],
            score=round(lifted[c], 4),
            explains=tuple(sorted(explains[c])),
            explained_by=tuple(sorted(explained_by[c])),
        )
        for c in order
    ]


def _summary(finding: CauseFinding, limit: int = 2) -> str:
    parts = [f"{e.signal or 'replicas'} {e.note}" for e in finding.evidence if e.holds and e.note][:limit]
    return "; ".join(parts)


def _forbidden(
    graph: TriageGraph,
    ctx: Context,
    symptom: str,
    ranked: list[CauseFinding],
    symptom_evidence: tuple[Evidence, ...],
) -> list[Forbidden]:
    """Every forbidden action the evidence makes tempting, with the evidence in its reason."""
    kb = graph.knowledge
    top = ranked[0] if ranked else None
    by_id = {f.cause: f for f in ranked}
    shown = next((e for e in symptom_evidence if e.holds), None)
    out = []
    for fid in kb.forbidden:  # in the playbook's order: scale-out, the first red line, first
        rule = kb.forbidden[fid]
        if top is not None and top.cause in rule.unless_top_cause:
            continue
        now = ""
        tempting = True
        if rule.when.always or symptom in rule.when.symptoms:
            tempting = any(evaluate(ctx, check).holds for check in rule.tempting_when)
            if rule.unless_top_cause:
                wanted = " or ".join(rule.unless_top_cause)
                now = (
                    f"the top cause is {top.cause} ({_summary(top, 2)}), not {wanted}"
                    if top is not None
                    else f"no cause departs from its baseline, so nothing shows {wanted}"
                )
                if top is not None and top.cause in rule.because:
                    now += f"; {rule.because[top.cause].strip()}"
            elif shown is not None:
                now = f"{shown.signal} {shown.note}"
            elif top is not None:
                now = f"the top cause is {top.cause} ({_summary(top, 1)})"
            elif symptom == NO_SYMPTOM:
                now = "no symptom is breached in the server's own signals"
            else:
                now = f"the symptom is {symptom}"
        else:
            hit = [c for c in rule.when.causes if c in by_id]
            if hit:
                cause = min(hit, key=lambda c: (ranked.index(by_id[c]), c))
                now = f"{cause} is ranked ({_summary(by_id[cause], 1)})"
            else:
                for check in rule.when.checks:
                    result = evaluate(ctx, check)
                    if result.holds:
                        now = f"{result.check}: {result.note}"
                        break
        if now:
            out.append(Forbidden(fid, f"{rule.reason.strip()} Now: {now}.", tempting))
    out.sort(key=lambda f: not f.tempting)
    return out


def symptom_from_alert(labels: Mapping[str, str], kb: Knowledge) -> str | None:
    """The symptom an alert names: its `symptom` label, else the first alertname pattern that matches."""
    label = labels.get("symptom")
    if label and label in kb.symptoms:
        return label
    name = labels.get("alertname", "")
    for rule in kb.settings.alert_symptoms:
        if name and re.search(rule.match, name, flags=re.IGNORECASE):
            return rule.symptom
    return None


def diagnose(
    graph: TriageGraph, frame: SignalFrame, symptom: str = AUTO, at: float | None = None, source: str = ""
) -> Diagnosis:
    """Diagnose the frame at `at` (default: its last step), starting from `symptom` or auto."""
    kb = graph.knowledge
    when = frame.end if at is None else at
    if not frame.start <= when <= frame.end:
        raise ValueError(f"at {when} is outside the data ({frame.start} to {frame.end})")
    read_as = frame.stand_ins
    frame = tenants_settled(frame, when, kb.settings)
    if symptom != AUTO and symptom not in kb.symptoms:
        raise ValueError(f"unknown symptom {symptom}")
    symptom_source = source or ("given" if symptom != AUTO else "auto")

    onsets: dict[str, Onset | None] = {}
    if symptom == AUTO:
        best: tuple[bool, float, str] | None = None
        detections: dict[str, tuple[tuple[Evidence, ...], bool | None, bool | None]] = {}
        for sid in sorted(kb.symptoms):
            onsets[sid] = _symptom_onset(graph, frame, sid, when)
            severity, evidence, visible, breached_here = _detect(graph, frame, sid, when, onsets[sid])
            detections[sid] = (evidence, visible, breached_here)
            rank = (bool(visible), severity, sid)
            if breached_here and severity > 0 and (best is None or rank[:2] > best[:2]):
                best = rank
        chosen = best[2] if best else NO_SYMPTOM
        symptom_evidence, symptom_visible, symptom_breached = (
            detections[chosen] if best else ((), False, False)
        )
    else:
        chosen = symptom
        onsets[chosen] = _symptom_onset(graph, frame, chosen, when)
        _, symptom_evidence, symptom_visible, symptom_breached = _detect(
            graph, frame, chosen, when, onsets[chosen]
        )

    if chosen == NO_SYMPTOM:
        candidates = sorted(kb.causes)
        strongest = [o for o in onsets.values() if o is not None]
        onset = max(strongest, key=lambda o: (o.score, o.signal)) if strongest else None
        layers: tuple[tuple[str, tuple[str, ...]], ...] = ()
    else:
        candidates = graph.causes_of(chosen)
        onset = onsets[chosen]
        layers = graph.layers_of(chosen)

    windows = make_windows(frame, when, onset.time if onset else None, kb.settings)
    ctx = Context(frame, windows, kb.settings.floors, chosen)
    walked = [_score_cause(ctx, graph, c) for c in candidates]
    asked = frozenset(candidates) if chosen != NO_SYMPTOM else None
    walked += _partners(ctx, graph, walked)
    candidates = [f.cause for f in walked]
    breached = chosen != NO_SYMPTOM and symptom_breached is not False
    movers = first_movers(frame, kb.settings, windows.onset, when)
    notes: list[str] = []
    if breached:
        ranked = [f for f in walked if f.status == "ranked" and f.score >= kb.settings.min_score]
        lead = _order(ranked, graph, asked)
        ranked, opinion = second_opinion(
            graph,
            ranked,
            lead[0].cause if lead else "",
            movers,
            frame.step,
            kb.settings.second_opinion_penalty,
        )
        own = {f.cause: f.score for f in ranked}
        ranked = _order(ranked, graph, asked)
        notes += opinion
    else:
        ranked, own = [], {}
        notes.append(
            f"{chosen} is not breached in the server's own signals: no incident is seen server-side"
            if chosen != NO_SYMPTOM
            else "no symptom is breached in the server's own signals: no incident is seen server-side"
        )
    by_id = {f.cause: f for f in ranked}
    walked = [by_id.get(f.cause, f) if breached else _unranked(f) for f in walked]
    close = tied(ranked, kb.settings.ambiguity_margin, own)
    verdict = verdict_of(breached, ranked, close)
    ambiguous = tuple((c.cause, tells_apart(graph, c, [o for o in close if o is not c])) for c in close)
    born = _history_start(frame, windows.baseline, when, kb)
    if born is not None:
        notes.append(
            f"the data begins at {format_instant(born)[11:]}: there is no baseline before it, "
            "and the hour before the onset is not fully covered"
        )

    forbidden = _forbidden(graph, ctx, chosen, ranked, symptom_evidence)
    forbidden_ids = {f.action for f in forbidden}
    if ranked:
        actions = [a for a in ranked[0].actions if a.id not in forbidden_ids]
    elif chosen != NO_SYMPTOM:
        actions = [graph.action(a) for a in kb.symptoms[chosen].first_look if a not in forbidden_ids]
    else:
        actions = []

    referenced: set[str] = set()
    if chosen != NO_SYMPTOM:
        referenced |= {s for c in kb.symptoms[chosen].detect for s in c.signals()}
        referenced |= set(kb.symptoms[chosen].onset)
    for c in candidates:
        spec = kb.causes[c]
        referenced |= signals_of(spec.requires, spec.supports, spec.against)
    missing = tuple(sorted(s for s in referenced if not frame.has(s)))
    present = {s: frame.has(s) for s in SIGNALS}

    found = Diagnosis(
        symptom=chosen,
        symptom_source=symptom_source,
        at=when,
        onset=windows.onset,
        baseline_window=windows.baseline,
        causes=tuple(ranked),
        first_actions=tuple(actions),
        forbidden=tuple(forbidden),
        missing_signals=missing,
        symptom_evidence=symptom_evidence,
        symptom_visible=symptom_visible,
        walked=tuple(walked),
        layers=layers,
        verdict=verdict,
        ambiguous=ambiguous,
        first_movers=movers,
        notes=tuple(notes),
        unmonitored=unmonitored(graph, referenced, present, walked),
        history_start=born,
    )
    return with_stand_ins(found, read_as)


def _unranked(finding: CauseFinding) -> CauseFinding:
    """A cause that held but is not named: below the minimum score, or no incident to explain."""
    if finding.status != "ranked":
        return finding
    return replace(
        finding, status="no_departure", why_not=finding.why_not or "not ranked: no breach to explain"
    )


def _history_start(
    frame: SignalFrame, baseline: tuple[float, float], at: float, kb: Knowledge
) -> float | None:
    """The latest birth of the data before `at` when less than half the baseline hour fits
    after it (a fleet deployed minutes ago, a restarted Prometheus): the answer says so."""
    births = [b for b in frame.births() if b <= at]
    if not births or baseline[1] - baseline[0] >= 0.5 * parse_duration(kb.settings.windows.baseline):
        return None
    return births[-1]


def onset_text(diagnosis: Diagnosis) -> str:
    """`onset 14:20:00Z, 20m before` or `no onset found`."""
    if diagnosis.onset is None:
        return "no onset found"
    since = format_duration(diagnosis.at - diagnosis.onset)
    return f"onset {format_instant(diagnosis.onset)[11:]}, {since} before"
