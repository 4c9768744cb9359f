"""Metamorphic relations of the diagnosis: transformations of an incident and what they must do to the answer.

A fixture's expect block checks one answer; a metamorphic relation checks how the answer
moves when the incident is transformed in a way whose effect is known in advance. Six
transformations must leave the answer alone (renaming the replicas, moving the incident
in time, a longer or shorter history, a healthy blinking GPU flag, a healthy periodic
tenant, every rate in other units), three must move it (the top cause's evidence ended
before the onset, the symptom's breach removed, a traffic step stretched into a ramp).

"The answer" of a diagnosis is its verdict and its top cause; for `ambiguous`, the verdict
and the set of the first two causes. Every transformation here is a pure function over a
`SignalFrame` (the frame as loaded, after the raw replay for `level: raw` fixtures): the
input frame is never modified, every array is copied.

`tests/test_metamorphic.py` runs each relation over every bundled fixture and every
generated generality corpus, and `tests/conftest.py` prints the table of `RECORDED`
outcomes at the end of the run.
"""

from __future__ import annotations

import functools
import hashlib
import importlib
import multiprocessing
import re
import shutil
import sys
import tempfile
import threading
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import Executor, ProcessPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal, TypeVar

import numpy as np

from signals.fixture import Expect, Fixture, load_fixture
from signals.frame import FloatArray, Series, SignalFrame, build_frame
from signals.timeparse import parse_duration
from signals.vocabulary import REPLICA_LABEL, SIGNALS
from triage.core.graph import TriageGraph
from triage.core.model import Diagnosis, Evidence
from triage.core.playbook import Knowledge, iter_checks
from triage.core.walk import diagnose
from triage.replay import fixture_symptom
from triage.sources import load_playbooks

MINUTE = 60.0
HOUR = 3600.0


@functools.cache
def knowledge() -> Knowledge:
    """The bundled playbooks: what a symptom's breach reads, how far back a cause's events reach."""
    return load_playbooks()


def _seconds(name: str) -> float:
    return parse_duration(getattr(knowledge().settings.windows, name))


# ------------------------------------------------------------------ the answer

Answer = tuple[str, str | frozenset[str] | None]


def answer_of(diagnosis: Diagnosis) -> Answer:
    """(verdict, top cause or None); for `ambiguous`, (verdict, the set of the first two causes)."""
    if diagnosis.verdict == "ambiguous":
        return diagnosis.verdict, frozenset(c.cause for c in diagnosis.causes[:2])
    return diagnosis.verdict, diagnosis.causes[0].cause if diagnosis.causes else None


def show(answer: Answer | str) -> str:
    """An answer as one short word: `cause:kv_pressure`, `ambiguous:{a,b}`, `no_incident`."""
    if isinstance(answer, str):
        return answer
    verdict, top = answer
    if top is None:
        return verdict
    if isinstance(top, frozenset):
        return f"{verdict}:{{{','.join(sorted(top))}}}"
    return f"{verdict}:{top}"


# ------------------------------------------------------------------ the incidents


@dataclass(frozen=True)
class Case:
    """One incident ready for the walk: its frame (post-replay), moment and starting symptom."""

    name: str
    """`corpus/stem`, e.g. `fixtures/kv-pressure-long-context`."""
    frame: SignalFrame
    at: float
    symptom: str
    source: str
    expect: Expect | None = None
    """The fixture's own expect block, for the tests that hold a corpus to it."""

    @property
    def seed(self) -> int:
        """A seed of the case's own, stable across runs and machines."""
        return int(hashlib.sha256(self.name.encode()).hexdigest()[:8], 16)


def case_of(corpus: str, stem: str, fixture: Fixture, graph: TriageGraph) -> Case:
    symptom, source = fixture_symptom(fixture, None, graph.knowledge)
    return Case(f"{corpus}/{stem}", fixture.frame, fixture.at, symptom, source, fixture.expect)


@dataclass(frozen=True)
class Original:
    """A case and its diagnosis before any transformation (computed once per session)."""

    case: Case
    diagnosis: Diagnosis

    @property
    def answer(self) -> Answer:
        return answer_of(self.diagnosis)

    @property
    def onset(self) -> float | None:
        return self.diagnosis.onset


def diagnose_case(graph: TriageGraph, case: Case) -> Original:
    return Original(case, diagnose(graph, case.frame, case.symptom, case.at, source=case.source))


# ------------------------------------------------------------------ generated corpora

CORPORA = ("generality", "generality_hard", "generality_indep", "generality_field", "generality_verdict")
"""The generated corpora, each a module of `tools` with `main(["--out", DIR])`."""
OPTIONAL = frozenset({"generality_verdict"})
"""Corpora left out when their module is missing or does not import (still being written)."""


def available_corpora(wanted: Iterable[str] = CORPORA) -> list[str]:
    found = []
    for name in wanted:
        try:
            importlib.import_module(f"tools.{name}")
        except Exception:  # an optional corpus half-written (a syntax error) is left out too
            if name not in OPTIONAL:
                raise
            continue
        found.append(name)
    return found


def generation_tasks(corpora: Sequence[str]) -> list[tuple[str, tuple[str, ...]]]:
    """(module, incident names) to generate; `tools.generality`, by far the slowest to write and
    the only one that takes incident names (each seeded on its own), is split in two halves."""
    tasks: list[tuple[str, tuple[str, ...]]] = []
    for name in corpora:
        module = importlib.import_module(f"tools.{name}")
        incidents = [fn.__name__ for fn in getattr(module, "INCIDENTS", ())] if name == "generality" else []
        if len(incidents) >= 2:
            half = len(incidents) // 2
            tasks += [(name, tuple(incidents[:half])), (name, tuple(incidents[half:]))]
        else:
            tasks.append((name, ()))
    return tasks


def _fast_yaml() -> None:
    """`yaml.safe_dump` through libyaml's emitter, where PyYAML has it: the same documents, written
    ten times faster (the pure-Python emitter is most of a corpus' writing time). Called in the
    worker processes only."""
    import yaml

    if getattr(yaml, "__with_libyaml__", False):
        yaml.safe_dump = functools.partial(yaml.dump, Dumper=yaml.CSafeDumper)  # type: ignore[assignment]


def generate_and_load(task: tuple[str, tuple[str, ...]], fast_yaml: bool = True) -> list[tuple[str, Fixture]]:
    """Write one corpus (or part of it) into a temporary folder and load every fixture from it.

    Run in a worker process (`fast_yaml` patches that process's PyYAML): the fixtures come back
    pickled, the folder is removed."""
    if fast_yaml:
        _fast_yaml()
    name, incidents = task
    module = importlib.import_module(f"tools.{name}")
    out = Path(tempfile.mkdtemp(prefix=f"metamorphic-{name}-"))
    try:
        code = module.main(["--out", str(out), *incidents])
        if code != 0:
            raise RuntimeError(f"tools.{name} exited {code}")
        return [(path.stem, load_fixture(str(path))) for path in sorted(out.glob("*.yaml"))]
    finally:
        shutil.rmtree(out, ignore_errors=True)


def can_fork() -> bool:
    """Whether forking is safe here: on Linux, with no other thread that could hold a lock (a
    server left running by an earlier test) across the fork."""
    return sys.platform == "linux" and threading.active_count() == 1


T = TypeVar("T")


class GeneratedCorpora:
    """The generated corpora, each written, loaded and diagnosed once per session.

    `tests/test_generality.py` holds every incident to its expect block and
    `tests/test_metamorphic.py` transforms the same incidents; both read them from here
    (a session fixture of `tests/conftest.py`), so no corpus is written or diagnosed twice.
    """

    def __init__(self, graph: TriageGraph, warm: Callable[[], object] | None = None) -> None:
        """`warm`: other slow work of the session, run once while the first corpora are written
        (the raw replays, which wait mostly on other processes)."""
        self._graph = graph
        self._originals: dict[str, list[Original]] = {}
        self._warm = warm

    def originals(
        self, names: Sequence[str], meanwhile: Callable[[], T]
    ) -> tuple[dict[str, list[Original]], T]:
        """The originals of each corpus in `names`, generating the missing ones in two worker
        processes while `meanwhile` runs here (its result is returned beside them)."""
        missing = [name for name in names if name not in self._originals]
        context = multiprocessing.get_context("fork" if can_fork() else "spawn")
        with ProcessPoolExecutor(max_workers=2, mp_context=context) as pool:
            futures = [(task[0], pool.submit(generate_and_load, task)) for task in generation_tasks(missing)]
            result = meanwhile()
            if futures and self._warm is not None:
                self._warm()
                self._warm = None
            for corpus, future in futures:
                cases = [case_of(corpus, stem, fixture, self._graph) for stem, fixture in future.result()]
                self._originals.setdefault(corpus, []).extend(diagnose_case(self._graph, c) for c in cases)
        return {name: self._originals.get(name, []) for name in names}, result


# ------------------------------------------------------------------ helpers over frames


def _frame(frame: SignalFrame, series: Iterable[Series], times: FloatArray | None = None) -> SignalFrame:
    return build_frame(frame.times if times is None else times, series, frame.source)


def _with_values(frame: SignalFrame, change: Callable[[Series], FloatArray | None]) -> SignalFrame:
    """A new frame with each series' values replaced by `change(series)` (None: kept, copied)."""
    out = []
    for s in frame.series:
        values = change(s)
        out.append(Series(s.signal, s.labels, (s.values if values is None else values).copy()))
    return _frame(frame, out)


def _median(values: FloatArray) -> float:
    finite = values[np.isfinite(values)]
    return float(np.median(finite)) if finite.size else float("nan")


def _steps(frame: SignalFrame, seconds: float) -> int:
    return max(1, round(seconds / frame.step))


# ------------------------------------------------------------------ must not change the answer

REPLICA_LABELS = (REPLICA_LABEL, "pod", "exported_pod")
"""The labels that name a replica; their values are renamed, each value to one new name."""


def replica_alias(name: str, seed: int) -> str:
    return "r-" + hashlib.sha256(f"{seed}:{name}".encode()).hexdigest()[:10]


def rename_replicas(frame: SignalFrame, seed: int) -> SignalFrame:
    """Every replica renamed consistently (`instance`, `pod`, `exported_pod` values, each value to
    `r-<hash>` wherever it appears), and the series list shuffled (seeded)."""
    names = sorted({v for s in frame.series for k, v in s.labels if k in REPLICA_LABELS})
    alias = {n: replica_alias(n, seed) for n in names}
    if len(set(alias.values())) != len(alias):  # pragma: no cover - a 40-bit hash collision
        raise AssertionError(f"replica aliases collide: {alias}")
    renamed = [
        Series(
            s.signal,
            tuple(sorted((k, alias[v] if k in REPLICA_LABELS else v) for k, v in s.labels)),
            s.values.copy(),
        )
        for s in frame.series
    ]
    order = np.random.default_rng(seed).permutation(len(renamed))
    return _frame(frame, [renamed[i] for i in order])


SHIFT = 7 * 24 * HOUR + 3 * HOUR + 17 * MINUTE
"""How far `shift_time` moves an incident: a week, three hours and 17 minutes."""


def shift_time(frame: SignalFrame, seconds: float = SHIFT) -> SignalFrame:
    """The whole incident moved by `seconds` (the caller moves `at` with it)."""
    return _frame(
        frame, (Series(s.signal, s.labels, s.values.copy()) for s in frame.series), frame.times + seconds
    )


HEALTHY_MARGIN = 5 * MINUTE
MIN_HEALTHY = 10 * MINUTE
"""`history_earlier` applies where at least this much data precedes the incident."""


def first_event(frame: SignalFrame) -> float | None:
    """When the first event or label change of the frame happens: an event series (restarts, OOM,
    XID, throttle...) leaving its first value, or one that starts later at another value than 0,
    or an info series (build_info, config_info) that starts after the data does. None when none."""
    earliest: float | None = None
    for s in frame.series:
        spec = SIGNALS.get(s.signal)
        if spec is None or spec.kind == "gauge":
            continue
        finite = np.flatnonzero(np.isfinite(s.values))
        if not finite.size:
            continue
        values = s.values[finite]
        if spec.kind == "info":
            moved = [int(finite[0])] if finite[0] > 0 else []
        else:
            first = 0.0 if finite[0] > 0 else values[0]
            moved = [int(finite[i]) for i in np.flatnonzero(values != first)[:1]]
        if moved:
            t = float(frame.times[moved[0]])
            earliest = t if earliest is None else min(earliest, t)
    return earliest


def healthy_until(frame: SignalFrame, diagnosis: Diagnosis) -> float | None:
    """Where the data stops being healthy: `HEALTHY_MARGIN` before the onset, the first signal that
    moved or the first event (`first_event`), whichever is earliest; None when none of them is."""
    marks = [m.moved_at for m in diagnosis.first_movers]
    marks += [t for t in (diagnosis.onset, first_event(frame)) if t is not None]
    return min(marks) - HEALTHY_MARGIN if marks else None


def history_earlier(frame: SignalFrame, until: float | None, seconds: float = HOUR) -> SignalFrame | None:
    """The history starts `seconds` earlier: the first `seconds` of data, repeated before the start
    at the same step. Only data before `until` (`healthy_until`) is repeated, so that an incident,
    or an event that leads it, within the first hour is not copied into its own past: when less
    than `seconds` precedes it, that part is repeated end to end. None where less than
    `MIN_HEALTHY` precedes `until`."""
    n = _steps(frame, seconds)
    healthy = len(frame.times) if until is None else int(np.searchsorted(frame.times, until, side="left"))
    healthy = min(healthy, n)
    if healthy * frame.step < MIN_HEALTHY - 1e-6:
        return None
    source = np.arange(n) % healthy  # the healthy part, repeated to fill `seconds`
    times = np.concatenate([frame.times[0] - frame.step * np.arange(n, 0, -1), frame.times])
    series = [Series(s.signal, s.labels, np.concatenate([s.values[source], s.values])) for s in frame.series]
    return _frame(frame, series, times)


def keep_before_onset() -> float:
    """What the diagnosis reads before an onset, and so what a later history must keep: the
    lead where causing events are looked for, the baseline hour before it, the guard, and the
    warm-up at the start of the data (82 minutes with the bundled settings)."""
    return sum(_seconds(w) for w in ("lead", "baseline", "guard", "warmup"))


MIN_DROP = 5 * MINUTE
"""`history_later` applies where at least this much history can be dropped."""


def reads_long_baseline(diagnosis: Diagnosis) -> bool:
    """Whether the top cause compares with the first hour of the lookback (`baseline: long`):
    that baseline is where the history starts, so a later start moves it by definition."""
    if not diagnosis.causes:
        return False
    spec = knowledge().causes[diagnosis.causes[0].cause]
    return any(
        c.baseline == "long"
        for part in (spec.requires, spec.supports, spec.against)
        for c in iter_checks(part)
    )


def history_later(frame: SignalFrame, onset: float | None, keep: float | None = None) -> SignalFrame | None:
    """The history starts later: everything before `onset - keep` dropped, so that `keep`
    (`keep_before_onset()` by default) remains before the onset; None where there is no onset or
    less than `MIN_DROP` to drop."""
    keep = keep_before_onset() if keep is None else keep
    if onset is None:
        return None
    first = int(np.searchsorted(frame.times, onset - keep - 1e-6, side="left"))
    if first * frame.step < MIN_DROP - 1e-6 or first >= len(frame.times) - 1:
        return None
    series = [Series(s.signal, s.labels, s.values[first:].copy()) for s in frame.series]
    return _frame(frame, series, frame.times[first:].copy())


BLINK_EVERY = 8
BLINK_GPU = "7"
BLINK_FALLBACK_REPLICA = "gpu-node-x"
EVENT_SIGNALS = frozenset(n for n, spec in SIGNALS.items() if spec.kind == "event")


def _quiet_replicas(frame: SignalFrame) -> list[str]:
    """Replicas that report at every step and show no event (throttle, XID, ECC, restart, OOM...)."""
    names, present = frame.presence()
    loud = {
        s.replica
        for signal in EVENT_SIGNALS
        for s in frame.rows(signal)
        if s.replica is not None and np.nanmax(np.where(np.isfinite(s.values), s.values, 0.0)) > 0
    }
    return [n for n, row in zip(names, present, strict=True) if row.all() and n not in loud]


def blink_replica(frame: SignalFrame, seed: int) -> str:
    """The replica `blinking_flag` puts its GPU on: a quiet one (`_quiet_replicas`, seeded choice),
    else a node of its own, `gpu-node-x` (where no replica reports throughout, as when a rollout
    replaced every pod, a flag on one of them would blink only while that pod lived: on one born
    at the onset, only after it)."""
    names = _quiet_replicas(frame)
    if not names:
        return BLINK_FALLBACK_REPLICA
    return names[int(np.random.default_rng(seed).integers(len(names)))]


def blinking_flag(frame: SignalFrame, seed: int, every: int = BLINK_EVERY) -> SignalFrame:
    """A healthy GPU flag that blinks: `gpu_throttle{instance=<blink_replica>, gpu="7"}` is 1 one
    step in `every` (seeded phase) and 0 otherwise, over the whole window, before and after the
    onset alike."""
    replica = blink_replica(frame, seed)
    taken = {s.label_map.get("gpu") for s in frame.rows("gpu_throttle") if s.replica == replica}
    gpu = BLINK_GPU
    while gpu in taken:
        gpu = "1" + gpu
    phase = int(np.random.default_rng(seed + 1).integers(every))
    values = ((np.arange(len(frame.times)) + phase) % every == 0).astype(np.float64)
    flag = Series("gpu_throttle", ((REPLICA_LABEL, replica), ("gpu", gpu)), values)
    return _frame(frame, [*(Series(s.signal, s.labels, s.values.copy()) for s in frame.series), flag])


TENANT = "batch-jobs"
TENANT_PERIOD = 12 * MINUTE
TENANT_BURST = 3 * MINUTE


def tenant_wave(frame: SignalFrame, base: float) -> FloatArray:
    """A square wave: `2 * base` for `TENANT_BURST` of every `TENANT_PERIOD`, `base` otherwise."""
    period, burst = _steps(frame, TENANT_PERIOD), _steps(frame, TENANT_BURST)
    return np.where(np.arange(len(frame.times)) % period < burst, 2.0 * base, base)


def periodic_tenant(frame: SignalFrame) -> SignalFrame | None:
    """A healthy tenant beside the fleet: `request_rate{tenant="batch-jobs"}` (fleet-level) with its
    own bursts (`tenant_wave`, base 10% of the fleet's median request rate, at least 0.1), the
    same before and after the onset. None where the frame has no request rate.

    A fleet-level series is the fleet's own view (`SignalFrame.fleet`): where the request rate is
    only per replica, the replicas' sum is first written as a fleet-level series of its own
    (`request_rate{}`, as a gateway would report it), so the tenant adds to the fleet's traffic
    instead of hiding it."""
    if not frame.has("request_rate"):
        return None
    fleet = frame.fleet("request_rate")
    base = max(0.1, 0.1 * _median(fleet))
    series = [Series(s.signal, s.labels, s.values.copy()) for s in frame.series]
    if all(s.replica is not None for s in frame.rows("request_rate")):
        series.append(Series("request_rate", (), fleet.copy()))
    series.append(Series("request_rate", (("tenant", TENANT),), tenant_wave(frame, base)))
    return _frame(frame, series)


RATE_UNITS = frozenset({"req/s", "tokens/s", "1/s", "currency/h"})
RATE_SIGNALS = frozenset(n for n, spec in SIGNALS.items() if spec.unit in RATE_UNITS)
"""Signals that are rates; counts, latencies and ratios are not scaled."""


def scale_rates(frame: SignalFrame, factor: float = 100.0) -> SignalFrame:
    """Every rate signal (`RATE_SIGNALS`) multiplied by `factor`, nothing else."""
    return _with_values(frame, lambda s: s.values * factor if s.signal in RATE_SIGNALS else None)


# ------------------------------------------------------------------ must change the answer

BASELINE = HOUR

USER_VISIBLE: dict[str, tuple[str, ...]] = {
    "ttft_slow": ("ttft_p99_seconds", "ttft_p50_seconds", "e2e_p99_seconds", "gateway_latency_p99_seconds"),
    "tpot_slow": ("tpot_p99_seconds", "tpot_p50_seconds", "e2e_p99_seconds"),
    "errors": ("error_ratio", "timeout_ratio", "upstream_error_ratio"),
    "rejected": ("rejected_ratio", "queue_waiting"),
}
"""The signals by which each symptom is visible to users."""


def hold_after(
    frame: SignalFrame,
    signals: Iterable[str],
    onset: float,
    baseline: float = BASELINE,
    replicas: Iterable[str] = (),
) -> SignalFrame:
    """Every series of `signals` (and every series of `replicas`), from the onset on, held at its
    own median over the `baseline` before the onset (NaN where it had no sample there)."""
    chosen, whole = set(signals), set(replicas)
    before = (frame.times >= onset - baseline) & (frame.times < onset)
    after = frame.times >= onset

    def held(s: Series) -> FloatArray | None:
        if s.signal not in chosen and s.replica not in whole:
            return None
        return np.where(after, _median(s.values[before]), s.values)

    return _with_values(frame, held)


_WORD = re.compile(r"[a-z][a-z0-9_]*")
PRESENCE = "replicas reporting"
"""How a check that reads replica presence (which replicas report at all) says so."""


def _holding_required(diagnosis: Diagnosis) -> list[Evidence]:
    if not diagnosis.causes:
        return []
    return [e for e in diagnosis.causes[0].evidence if e.role == "requires" and e.holds and e.signal]


def required_evidence_signals(diagnosis: Diagnosis) -> tuple[str, ...]:
    """The signals the top cause's holding required evidence reads: each check's `signal`, and
    every other vocabulary signal its text names (a check of several alternatives names the one
    that held, and another may hold too once that one is held). Checks with no signal (the
    symptom itself, replica presence alone) are left out. Where a cause's required evidence is
    the symptom's own signal (decode slower for `prefill_interference`), that is held too."""
    names: set[str] = set()
    for e in _holding_required(diagnosis):
        names.add(e.signal)
        names.update(w for w in _WORD.findall(e.check) if w in SIGNALS)
    return tuple(sorted(names))


def vanished_replicas(
    frame: SignalFrame, onset: float, at: float, baseline: float = BASELINE
) -> tuple[str, ...]:
    """Replicas that reported in the `baseline` before the onset and miss a step between the
    onset and `at`."""
    names, present = frame.presence()
    before = (frame.times >= onset - baseline) & (frame.times < onset)
    after = (frame.times >= onset) & (frame.times <= at)
    rows = zip(names, present, strict=True)
    return tuple(n for n, row in rows if row[before].any() and not row[after].all())


_WITHIN = re.compile(r"within (\S+) of the onset")


def evidence_start(diagnosis: Diagnosis, onset: float) -> float:
    """Where the top cause's evidence may begin and still be its evidence: the lead before the
    onset (a causing event precedes its symptom), or a check's own `within` when it reaches
    further back. "Ended before the onset" means ended before that."""
    reach = _seconds("lead")
    for e in _holding_required(diagnosis):
        for within in _WITHIN.findall(e.check):
            reach = max(reach, parse_duration(within))
    return onset - reach


def evidence_ended(frame: SignalFrame, diagnosis: Diagnosis) -> SignalFrame | None:
    """The top cause's evidence ended before the onset: the signals its holding required checks
    read (`required_evidence_signals`) held at their baseline from where that evidence may
    begin (`evidence_start`), and where one of those checks reads replica presence, the replicas
    that stopped reporting back at their baseline from there. None where the verdict is not
    `cause`, there is no onset, or the required evidence reads no signal of the frame."""
    if diagnosis.verdict != "cause" or diagnosis.onset is None:
        return None
    signals = [s for s in required_evidence_signals(diagnosis) if frame.rows(s)]
    if not signals:
        return None
    start = evidence_start(diagnosis, diagnosis.onset)
    replicas: tuple[str, ...] = ()
    if any(PRESENCE in e.check for e in _holding_required(diagnosis)):
        replicas = vanished_replicas(frame, start, diagnosis.at)
    return hold_after(frame, signals, start, replicas=replicas)


_LINE = re.compile(r"([a-z][a-z0-9_]*) >= ([0-9.]+(?:e[-+]?[0-9]+)?)")


def breached_before(diagnosis: Diagnosis) -> tuple[str, ...]:
    """The symptom's absolute red lines (`ttft_p99_seconds >= 1`) its baseline already crossed:
    holding the user-visible signals at their baseline leaves those breached."""
    visible = set(USER_VISIBLE.get(diagnosis.symptom, ()))
    crossed = []
    for e in diagnosis.symptom_evidence:
        line = _LINE.fullmatch(e.check)
        if line and line[1] in visible and e.baseline is not None and e.baseline >= float(line[2]):
            crossed.append(e.check)
    return tuple(crossed)


def breach_signals(symptom: str) -> tuple[tuple[str, ...], bool, float]:
    """Every signal by which the server sees the symptom breached (its `detect` and `breach`
    checks, the user-visible ones of `USER_VISIBLE` besides), whether replica presence is one
    of them (engines gone silent fail their requests), and how far before the onset those
    checks reach (the lead, or a check's own `within`)."""
    spec = knowledge().symptoms[symptom]
    checks = [*spec.detect, *spec.breach]
    names = {s for c in checks for s in c.signals()} | set(USER_VISIBLE.get(symptom, ()))
    reach = max([_seconds("lead"), *(parse_duration(c.within) for c in checks if c.within)])
    return tuple(sorted(names)), any(c.kind == "replicas_lost" for c in checks), reach


def breach_removed(frame: SignalFrame, diagnosis: Diagnosis) -> SignalFrame | None:
    """Every signal of the symptom's breach (`breach_signals`) held at its baseline from as far
    before the onset as its checks reach, replicas gone silent brought back.
    None where the verdict is `no_incident`, the symptom is not one of `USER_VISIBLE`, there is no
    onset, or the baseline was already over one of the symptom's red lines (`breached_before`)."""
    if diagnosis.verdict == "no_incident" or diagnosis.onset is None or diagnosis.symptom not in USER_VISIBLE:
        return None
    if breached_before(diagnosis):
        return None
    signals, presence, reach = breach_signals(diagnosis.symptom)
    # never before the first minutes of data: a baseline to hold at must exist before the hold
    start = max(diagnosis.onset - reach, min(diagnosis.onset, frame.start + _seconds("warmup") + MIN_HEALTHY))
    replicas = vanished_replicas(frame, start, diagnosis.at) if presence else ()
    return hold_after(frame, signals, start, replicas=replicas)


RAMP = 30 * MINUTE


def step_to_ramp(
    frame: SignalFrame, onset: float, at: float, signal: str = "request_rate", ramp: float = RAMP
) -> SignalFrame | None:
    """A step stretched into a ramp: every series of `signal`, from `onset - ramp` to where its
    step completes (the onset, or later where the series is still climbing then: a rate over
    minutes read from raw counters lags the step), rises linearly from its median over the hour
    before the ramp to its median from the onset to `at`. None where the data does not reach
    back before the ramp."""
    t0 = onset - ramp
    if t0 <= frame.start or not frame.rows(signal):
        return None
    before = (frame.times >= t0 - BASELINE) & (frame.times < t0)
    after = (frame.times >= onset) & (frame.times <= at)

    def ramped(s: Series) -> FloatArray | None:
        if s.signal != signal:
            return None
        low, high = _median(s.values[before]), _median(s.values[after])
        if not (np.isfinite(low) and np.isfinite(high)):
            return None
        rising = high >= low
        reached = np.flatnonzero(after & ((s.values >= high) if rising else (s.values <= high)))
        end = max(float(frame.times[reached[0]]) if reached.size else onset, onset)
        inside = (frame.times >= t0) & (frame.times <= end)
        share = (frame.times - t0) / (end - t0)
        return np.where(inside, low + (high - low) * share, s.values)

    return _with_values(frame, ramped)


# ------------------------------------------------------------------ relations and the harness


@dataclass(frozen=True)
class Probe:
    """A transformed case, as it is diagnosed."""

    frame: SignalFrame
    at: float
    symptom: str
    source: str


Kind = Literal["unchanged", "changed"]


@dataclass(frozen=True)
class Relation:
    """A transformation (None where it does not apply) and what the new answer must be."""

    name: str
    kind: Kind
    transform: Callable[[Original], Probe | None]
    holds: Callable[[Original, Diagnosis], bool]
    expected: str = "the same answer"


def _same(original: Original, after: Diagnosis) -> bool:
    return answer_of(after) == original.answer


def _probe(original: Original, frame: SignalFrame | None, at: float | None = None) -> Probe | None:
    if frame is None:
        return None
    case = original.case
    return Probe(frame, case.at if at is None else at, case.symptom, case.source)


def _invariant(name: str, transform: Callable[[Original], Probe | None]) -> Relation:
    return Relation(name, "unchanged", transform, _same)


def _top_changed(original: Original, after: Diagnosis) -> bool:
    return (after.causes[0].cause if after.causes else None) != original.diagnosis.causes[0].cause


def _no_incident(original: Original, after: Diagnosis) -> bool:
    return after.verdict == "no_incident"


def _not_burst(original: Original, after: Diagnosis) -> bool:
    return not (after.causes and after.causes[0].cause == "traffic_burst")


def _breach_probe(original: Original) -> Probe | None:
    frame = breach_removed(original.case.frame, original.diagnosis)
    if frame is None:
        return None
    symptom = original.diagnosis.symptom
    return Probe(frame, original.case.at, symptom, original.case.source)


def _ramp_probe(original: Original) -> Probe | None:
    d = original.diagnosis
    if d.verdict != "cause" or d.onset is None or d.causes[0].cause != "traffic_burst":
        return None
    return _probe(original, step_to_ramp(original.case.frame, d.onset, original.case.at))


RELATIONS: tuple[Relation, ...] = (
    _invariant("rename_replicas", lambda o: _probe(o, rename_replicas(o.case.frame, o.case.seed))),
    _invariant("shift_time", lambda o: _probe(o, shift_time(o.case.frame), o.case.at + SHIFT)),
    _invariant(
        "history_earlier",
        lambda o: _probe(o, history_earlier(o.case.frame, healthy_until(o.case.frame, o.diagnosis))),
    ),
    _invariant(
        "history_later",
        lambda o: (
            None if reads_long_baseline(o.diagnosis) else _probe(o, history_later(o.case.frame, o.onset))
        ),
    ),
    _invariant("blinking_flag", lambda o: _probe(o, blinking_flag(o.case.frame, o.case.seed))),
    _invariant("periodic_tenant", lambda o: _probe(o, periodic_tenant(o.case.frame))),
    _invariant("scale_rates", lambda o: _probe(o, scale_rates(o.case.frame))),
    Relation(
        "evidence_ended",
        "changed",
        lambda o: _probe(o, evidence_ended(o.case.frame, o.diagnosis)),
        _top_changed,
        "another top cause",
    ),
    Relation("breach_removed", "changed", _breach_probe, _no_incident, "verdict no_incident"),
    Relation("step_to_ramp", "changed", _ramp_probe, _not_burst, "a top cause other than traffic_burst"),
)
BY_NAME = {r.name: r for r in RELATIONS}


@dataclass(frozen=True)
class Failure:
    case: str
    before: str
    after: str

    def __str__(self) -> str:
        return f"{self.case}: {self.before} -> {self.after}"


@dataclass(frozen=True)
class Outcome:
    """A relation over a set of cases: how many it applied to, held on, and where it broke."""

    relation: str
    kind: Kind
    expected: str
    applied: int
    held: int
    not_applicable: int
    failures: tuple[Failure, ...] = field(default=())

    @property
    def rate(self) -> float:
        return 100.0 * self.held / self.applied if self.applied else 100.0

    @property
    def passed(self) -> bool:
        return self.applied > 0 and self.held == self.applied

    def line(self) -> str:
        what = "unchanged" if self.kind == "unchanged" else "changed as expected"
        text = f"metamorphic {self.relation}: {self.held} of {self.applied} {what} ({self.rate:.1f}%)"
        if self.not_applicable:
            text += f", {self.not_applicable} not applicable"
        return text

    def report(self) -> str:
        """The line, and every case that broke with its answer before and after."""
        head = f"{self.line()}; expected {self.expected}"
        return "\n".join([head, *(f"  {f}" for f in self.failures)])


Checked = tuple[bool, Failure | None] | None
"""One case under one relation: None where it does not apply, else (held, the failure if not)."""


def check_case(relation: Relation, original: Original, graph: TriageGraph) -> Checked:
    """Transform one case, diagnose it, and judge the new answer."""
    probe = relation.transform(original)
    if probe is None:
        return None
    before = show(original.answer)
    try:
        after = diagnose(graph, probe.frame, probe.symptom, probe.at, source=probe.source)
    except Exception as exc:  # a transformed frame the walk cannot take is a failure too
        return False, Failure(original.case.name, before, f"error {exc!r}")
    if relation.holds(original, after):
        return True, None
    return False, Failure(original.case.name, before, show(answer_of(after)))


_SHARED: list[tuple[Sequence[Original], TriageGraph]] = []
"""What forked workers read the cases from (`share`): they inherit it rather than unpickle it."""


def share(originals: Sequence[Original], graph: TriageGraph) -> None:
    """Set the cases and graph a pool forked afterwards checks (`run_relation(..., pool=...)`)."""
    _SHARED[:] = [(originals, graph)]


def _check_shared(task: tuple[str, int]) -> Checked:
    originals, graph = _SHARED[0]
    return check_case(BY_NAME[task[0]], originals[task[1]], graph)


def run_relation(
    relation: Relation, originals: Sequence[Original], graph: TriageGraph, pool: Executor | None = None
) -> Outcome:
    """Apply the relation to every original and judge what the walk made of it; in `pool`'s forked
    workers when given (they must have been forked after `share(originals, graph)`)."""
    if pool is None:
        results = [check_case(relation, o, graph) for o in originals]
    else:
        if not _SHARED or _SHARED[0][0] is not originals:
            raise ValueError("share(originals, graph) before forking the pool")
        tasks = [(relation.name, i) for i in range(len(originals))]
        results = list(pool.map(_check_shared, tasks, chunksize=4))
    applied = [r for r in results if r is not None]
    return Outcome(
        relation.name,
        relation.kind,
        relation.expected,
        len(applied),
        sum(1 for held, _ in applied if held),
        len(results) - len(applied),
        tuple(failure for _, failure in applied if failure is not None),
    )


RECORDED: list[Outcome] = []
"""The outcomes of this session, in the order the tests ran: `tests/conftest.py` prints them."""


def record(outcome: Outcome) -> None:
    RECORDED[:] = [o for o in RECORDED if o.relation != outcome.relation]
    RECORDED.append(outcome)
    print(outcome.line())


def table(outcomes: Sequence[Outcome] | None = None) -> list[str]:
    """The recorded outcomes' lines, one per relation, aligned on the relation names."""
    rows = list(RECORDED if outcomes is None else outcomes)
    width = max((len(o.relation) for o in rows), default=0) + 1
    lines = []
    for o in rows:
        head, rest = o.line().split(": ", 1)
        failed = f"  FAILED {len(o.failures)}" if o.failures else ""
        lines.append(f"{head + ':':<{width + len('metamorphic ')}} {rest}{failed}")
    return lines
