"""Loading playbooks: each document checked against the schema, then all of them together.

Every id referenced must exist (with a "did you mean"), every cause must be reachable
from a symptom and sit in its own layer, no action may be both advised and forbidden,
every signal must be in the vocabulary, and `explains` must have no cycle. Problems
read `file:line: key: message`; one checker, two modes: stop at the first problem or
collect them all.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from pydantic import ValidationError

from signals.errors import InputError, InputErrors
from signals.vocabulary import SIGNALS, suggest
from signals.yamldoc import Document
from triage.core.model import SYMPTOMS
from triage.core.playbook.schema import (
    SCHEMA_VERSION,
    ActionSpec,
    AnyOf,
    CauseSpec,
    CheckLike,
    CheckSpec,
    ForbiddenSpec,
    ForbiddenWhen,
    Knowledge,
    PlaybookFile,
    Settings,
    SymptomSpec,
    Windows,
)


def _pydantic_problems(doc: Document, exc: ValidationError) -> list[InputError]:
    problems = []
    for err in exc.errors():
        loc = _strip_tags(tuple(err["loc"]))
        path = tuple("for" if p == "for_" else p for p in loc)
        message = err["msg"].removeprefix("Value error, ")
        if err["type"] == "extra_forbidden":
            message = "unknown key" + suggest(str(path[-1]), _allowed_keys())
        elif err["type"] == "literal_error" and "expected" in err.get("ctx", {}):
            message = f"{message}"
        problems.append(doc.error(path, message))
    unique: dict[str, InputError] = {}
    for p in problems:
        unique.setdefault(str(p), p)
    return list(unique.values())


def _strip_tags(loc: tuple[Any, ...]) -> tuple[Any, ...]:
    """Drop the union tags pydantic puts in a location after `requires[i]` and the like."""
    out: list[Any] = []
    for i, part in enumerate(loc):
        if (
            part in ("check", "any")
            and i >= 2
            and isinstance(loc[i - 1], int)
            and loc[i - 2] in ("requires", "supports", "against")
        ):
            continue
        out.append(part)
    return tuple(out)


def _allowed_keys() -> list[str]:
    """Keys a misspelt key could have meant, for the hint."""
    names: set[str] = set()
    for model in (
        PlaybookFile,
        SymptomSpec,
        CauseSpec,
        CheckSpec,
        ActionSpec,
        ForbiddenSpec,
        ForbiddenWhen,
        Settings,
        Windows,
        AnyOf,
    ):
        for name, info in model.model_fields.items():
            names.add(info.alias or name)
    return sorted(names)


def _parse_file(doc: Document) -> PlaybookFile:
    data = doc.data
    if not isinstance(data, dict):
        raise InputErrors([doc.error((), "a playbook is a mapping with schema_version: 1")])
    if "schema_version" not in data:
        raise InputErrors(
            [
                doc.error(
                    ("schema_version",),
                    f"missing: every playbook file states schema_version: {SCHEMA_VERSION}",
                )
            ]
        )
    if data.get("schema_version") != SCHEMA_VERSION:
        raise InputErrors(
            [
                doc.error(
                    ("schema_version",),
                    f"this version reads schema_version {SCHEMA_VERSION}, got {data.get('schema_version')!r}",
                )
            ]
        )
    try:
        return PlaybookFile.model_validate(data)
    except ValidationError as exc:
        raise InputErrors(_pydantic_problems(doc, exc)) from None


def iter_checks(entries: Iterable[CheckLike]) -> Iterable[CheckSpec]:
    """Every plain check, opening `any` groups."""
    for entry in entries:
        if isinstance(entry, AnyOf):
            yield from entry.any
        else:
            yield entry


def signals_of(*sections: Iterable[CheckLike]) -> set[str]:
    """Every signal the checks of these sections read (`any` groups opened)."""
    return {s for entries in sections for check in iter_checks(entries) for s in check.signals()}


def load_knowledge(docs: Iterable[Document], stop_at_first: bool = False) -> Knowledge:
    """Validate playbook documents one by one, then together; raise InputErrors with every problem.

    With `stop_at_first`, the first problem found is raised alone.
    """
    problems: list[InputError] = []

    def problem(doc: Document, path: tuple[Any, ...], message: str) -> None:
        err = doc.error(path, message)
        if stop_at_first:
            raise InputErrors([err])
        problems.append(err)

    parsed: list[tuple[Document, PlaybookFile]] = []
    for doc in docs:
        try:
            parsed.append((doc, _parse_file(doc)))
        except InputErrors as exc:
            if stop_at_first:
                raise InputErrors(exc.problems[:1]) from None
            problems.extend(exc.problems)
    if problems:
        # A file that failed its schema contributes nothing, so cross-file checks would only
        # echo its ids back as "unknown": report the schema problems alone.
        raise InputErrors(problems)

    settings: Settings | None = None
    where_settings: Document | None = None
    symptoms: dict[str, SymptomSpec] = {}
    causes: dict[str, CauseSpec] = {}
    actions: dict[str, ActionSpec] = {}
    forbidden: dict[str, ForbiddenSpec] = {}
    origins: dict[str, tuple[str, int]] = {}
    where: dict[str, tuple[Document, tuple[Any, ...]]] = {}

    for doc, pb in parsed:
        if pb.settings is not None:
            if settings is not None:
                problem(doc, ("settings",), f"settings are already given in {origins['settings'][0]}")
            settings = pb.settings
            where_settings = doc
            origins["settings"] = (doc.source, doc.line(("settings",)))
        sections: tuple[tuple[str, dict[str, Any], Mapping[str, Any]], ...] = (
            ("symptoms", symptoms, pb.symptoms),
            ("causes", causes, pb.causes),
            ("actions", actions, pb.actions),
            ("forbidden", forbidden, pb.forbidden),
        )
        for section, target, items in sections:
            for key, spec in items.items():
                qualified = f"{section}.{key}"
                if key in target:
                    first = origins[qualified]
                    problem(doc, (section, key), f"already defined at {first[0]}:{first[1]}")
                    continue
                target[key] = spec
                origins[qualified] = (doc.source, doc.line((section, key)))
                where[qualified] = (doc, (section, key))

    def ref(qualified: str, path: tuple[Any, ...], message: str) -> None:
        doc, base = where[qualified]
        problem(doc, (*base, *path), message)

    def check_signals(qualified: str, path: tuple[Any, ...], entries: Iterable[CheckLike]) -> None:
        for i, entry in enumerate(entries):
            members = entry.any if isinstance(entry, AnyOf) else (entry,)
            for j, check in enumerate(members):
                sub = (*path, i, "any", j) if isinstance(entry, AnyOf) else (*path, i)
                named = [("signal", check.signal)] + [("of", name) for name in check.of_signals()]
                for key, name in named:
                    if name is not None and name not in SIGNALS:
                        ref(qualified, (*sub, key), f"unknown signal '{name}'{suggest(name, SIGNALS)}")
                if (
                    check.kind in ("change", "label_is")
                    and check.signal is not None
                    and check.signal in SIGNALS
                    and SIGNALS[check.signal].kind != "info"
                ):
                    ref(
                        qualified,
                        (*sub, "signal"),
                        f"a {check.kind} check reads an info signal (build_info, config_info)",
                    )

    for sid in SYMPTOMS:
        if sid not in symptoms and parsed:
            doc = parsed[0][0]
            problem(doc, ("symptoms",), f"symptom '{sid}' of the vocabulary has no playbook")

    if settings is not None and where_settings is not None:
        for i, rule in enumerate(settings.alert_symptoms):
            if rule.symptom not in symptoms:
                problem(
                    where_settings,
                    ("settings", "alert_symptoms", i, "symptom"),
                    f"unknown symptom '{rule.symptom}'{suggest(rule.symptom, symptoms)}",
                )

    if settings is not None and where_settings is not None:
        for name in settings.floors:
            if name not in SIGNALS:
                problem(
                    where_settings,
                    ("settings", "floors", name),
                    f"unknown signal '{name}'{suggest(name, SIGNALS)}",
                )

    for sid, s in symptoms.items():
        q = f"symptoms.{sid}"
        check_signals(q, ("detect",), s.detect)
        check_signals(q, ("breach",), s.breach)
        for i, name in enumerate(s.onset):
            if name not in SIGNALS:
                ref(q, ("onset", i), f"unknown signal '{name}'{suggest(name, SIGNALS)}")
        for layer, members in s.layers.items():
            for i, cid in enumerate(members):
                if cid not in causes:
                    ref(q, ("layers", layer, i), f"unknown cause '{cid}'{suggest(cid, causes)}")
                elif causes[cid].layer != layer:
                    ref(
                        q,
                        ("layers", layer, i),
                        f"cause '{cid}' belongs to layer {causes[cid].layer}, not {layer}",
                    )
        for i, aid in enumerate(s.first_look):
            if aid not in actions:
                ref(q, ("first_look", i), f"unknown action '{aid}'{suggest(aid, actions)}")

    reachable = {cid for s in symptoms.values() for members in s.layers.values() for cid in members}
    for cid, c in causes.items():
        q = f"causes.{cid}"
        if cid not in reachable:
            ref(q, (), "no symptom leads to this cause: list it under a symptom's layers")
        for section in ("requires", "supports", "against"):
            check_signals(q, (section,), getattr(c, section))
        for i, other in enumerate(c.explains):
            if other not in causes:
                ref(q, ("explains", i), f"unknown cause '{other}'{suggest(other, causes)}")
            elif other == cid:
                ref(q, ("explains", i), "a cause cannot explain itself")
        for i, aid in enumerate(c.first_actions):
            if aid in forbidden:
                ref(q, ("first_actions", i), f"'{aid}' is a forbidden action; it cannot be advised")
            elif aid not in actions:
                ref(q, ("first_actions", i), f"unknown action '{aid}'{suggest(aid, actions)}")

    for aid in actions:
        if aid in forbidden:
            ref(f"actions.{aid}", (), f"'{aid}' is both an advisable action and a forbidden one")

    for fid, f in forbidden.items():
        q = f"forbidden.{fid}"
        for i, sid in enumerate(f.when.symptoms):
            if sid not in symptoms:
                ref(q, ("when", "symptoms", i), f"unknown symptom '{sid}'{suggest(sid, symptoms)}")
        for key, ids in (("causes", f.when.causes), ("unless_top_cause", f.unless_top_cause)):
            path = ("when", key) if key == "causes" else (key,)
            for i, cid in enumerate(ids):
                if cid not in causes:
                    ref(q, (*path, i), f"unknown cause '{cid}'{suggest(cid, causes)}")
        for cid in f.because:
            if cid not in causes:
                ref(q, ("because", cid), f"unknown cause '{cid}'{suggest(cid, causes)}")
        check_signals(q, ("when", "checks"), f.when.checks)
        check_signals(q, ("tempting_when",), f.tempting_when)
        if not (f.when.always or f.when.symptoms or f.when.causes or f.when.checks):
            ref(q, ("when",), "a forbidden action needs a condition (always, symptoms, causes or checks)")

    cycle = _explains_cycle(causes)
    if cycle:
        ref(f"causes.{cycle[0]}", ("explains",), "explains forms a cycle: " + " -> ".join(cycle))

    if not parsed and not problems:
        raise InputErrors([InputError("(playbooks)", 0, "(directory)", "no playbook files found")])
    if problems:
        raise InputErrors(problems)
    return Knowledge(settings or Settings(), symptoms, causes, actions, forbidden, origins)


def _explains_cycle(causes: Mapping[str, CauseSpec]) -> list[str]:
    """A cycle in the explains relation as a list of ids, or []."""
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(cid: str) -> list[str]:
        state[cid] = 1
        stack.append(cid)
        for other in causes[cid].explains:
            if other not in causes:
                continue
            if state.get(other) == 1:
                return [*stack[stack.index(other) :], other]
            if other not in state:
                found = visit(other)
                if found:
                    return found
        stack.pop()
        state[cid] = 2
        return []

    for cid in sorted(causes):
        if cid not in state:
            found = visit(cid)
            if found:
                return found
    return []
