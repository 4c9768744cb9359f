"""Evidence read from a stand-in says so.

Some stacks cannot give a signal as the vocabulary defines it: Triton exports a request's
time as a cumulative counter (a mean, not a P99), TGI's per-token time is each request's
own mean, a default DCGM install has no throttle reasons and the throttle is inferred from
the SM clock. The catalog marks such a source with `stands_in`, the frame carries it per
signal, and every piece of evidence read from that signal names it: a stand-in is never
taken for the real thing at 3 a.m.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace

from triage.core.model import CauseFinding, Diagnosis, Evidence


def _said(evidence: Evidence, stand_ins: Mapping[str, str]) -> Evidence:
    what = stand_ins.get(evidence.signal)
    if not what:
        return evidence
    note = f"{evidence.note}; read as {what}" if evidence.note else f"read as {what}"
    return replace(evidence, note=note)


def _finding(finding: CauseFinding, stand_ins: Mapping[str, str]) -> CauseFinding:
    return replace(finding, evidence=tuple(_said(e, stand_ins) for e in finding.evidence))


def with_stand_ins(diagnosis: Diagnosis, stand_ins: Mapping[str, str]) -> Diagnosis:
    """The diagnosis with every piece of evidence from a stand-in source annotated, and the
    stand-ins it read listed (`stand_ins` in its JSON)."""
    used = {e.signal for e in diagnosis.symptom_evidence}
    used |= {e.signal for c in diagnosis.walked for e in c.evidence}
    read = {s: w for s, w in stand_ins.items() if s in used}
    if not read:
        return diagnosis
    return replace(
        diagnosis,
        symptom_evidence=tuple(_said(e, read) for e in diagnosis.symptom_evidence),
        causes=tuple(_finding(c, read) for c in diagnosis.causes),
        walked=tuple(_finding(c, read) for c in diagnosis.walked),
        stand_ins=tuple(sorted(read.items())),
    )
