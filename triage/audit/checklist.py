"""The deployment checklist (seeds, 推理部署检查清单) as data: `checklist.yaml`, checked when read.

The checklist is written by people and read by the audit, so it is validated the way
playbooks are: unknown keys, missing keys, wrong types, duplicate ids and items in a
section that does not exist are refused, each as `file:line: key: message`. It is also
held against the checks registered in `triage.audit.checks`, both ways: an item nobody
checks would be reported with nothing behind it, and a check without an item would
run for nothing (usually a renamed id).

The bundled file is static package data: `bundled_checklist` reads and validates it
once, on first use rather than at import, so that commands other than `triage audit`
never pay for it.
"""

from __future__ import annotations

import functools
from collections.abc import Collection
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, StringConstraints, ValidationError

from signals.errors import InputError, InputErrors
from signals.vocabulary import suggest
from signals.yamldoc import Document, read_yaml
from triage.audit.checks import CHECKS
from triage.audit.model import Checklist, ChecklistItem, Section

SCHEMA_VERSION = 1
BUNDLED = Path(__file__).resolve().parent / "checklist.yaml"

_Text = Annotated[str, StringConstraints(min_length=1)]
_Id = Annotated[str, StringConstraints(pattern=r"^[a-z][a-z0-9_]*$")]
_ItemId = Annotated[str, StringConstraints(pattern=r"^[a-z][a-z0-9_]*\.[a-z][a-z0-9_]*$")]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class _SectionSpec(_Strict):
    """A section: its id, its English title and the checklist's own heading."""

    id: _Id
    title: _Text
    original: _Text


class _ItemSpec(_Strict):
    """An item: `<section>.<name>`, its words in English and in the original, how to settle and fix it."""

    id: _ItemId
    section: _Id
    title: _Text
    original: _Text
    settle: _Text
    fix: _Text


class _ChecklistFile(_Strict):
    schema_version: Literal[1]
    sections: tuple[_SectionSpec, ...]
    items: tuple[_ItemSpec, ...]


_KEYS = sorted({name for model in (_ChecklistFile, _SectionSpec, _ItemSpec) for name in model.model_fields})


def _schema_problems(doc: Document, exc: ValidationError) -> list[InputError]:
    problems: dict[str, InputError] = {}
    for err in exc.errors():
        path = tuple(err["loc"])
        message = err["msg"]
        if err["type"] == "extra_forbidden":
            message = "unknown key" + suggest(str(path[-1]), _KEYS)
        elif err["type"] == "string_pattern_mismatch":
            message = (
                "an item id is <section>.<name> in lower case, like capacity.memory_budget"
                if path[-1] == "id" and path[0] == "items"
                else "an id is lower case letters, digits and _, like red_lines"
            )
        elif err["type"] == "tuple_type":
            message = f"expected a list of {path[-1]}"
        elif err["type"] == "model_type":
            spec = _SectionSpec if path[0] == "sections" else _ItemSpec
            message = f"expected a mapping of {', '.join(spec.model_fields)}"
        problem = doc.error(path, message)
        problems.setdefault(str(problem), problem)
    return list(problems.values())


def _parse(doc: Document) -> _ChecklistFile:
    data = doc.data
    if not isinstance(data, dict):
        raise InputErrors([doc.error((), "a checklist is a mapping with schema_version, sections and items")])
    if data.get("schema_version") != SCHEMA_VERSION:
        message = (
            f"missing: the checklist states schema_version: {SCHEMA_VERSION}"
            if "schema_version" not in data
            else f"this version reads schema_version {SCHEMA_VERSION}, got {data['schema_version']!r}"
        )
        raise InputErrors([doc.error(("schema_version",), message)])
    try:
        return _ChecklistFile.model_validate(data)
    except ValidationError as exc:
        raise InputErrors(_schema_problems(doc, exc)) from None


def load_checklist(doc: Document, checks: Collection[str], stop_at_first: bool = False) -> Checklist:
    """The checklist in `doc`, held against the registered `checks` (item ids); InputErrors lists all.

    With `stop_at_first`, the first problem found is raised alone.
    """
    try:
        parsed = _parse(doc)
    except InputErrors as exc:
        # A file that failed its schema has no trustworthy ids: cross-checks would only echo it.
        raise InputErrors(exc.problems[:1] if stop_at_first else exc.problems) from None
    problems: list[InputError] = []

    def problem(path: tuple[Any, ...], message: str) -> None:
        err = doc.error(path, message)
        if stop_at_first:
            raise InputErrors([err])
        problems.append(err)

    def seen_at(kind: str, index: int) -> str:
        return f"already defined at {doc.source}:{doc.line((kind, index))}"

    sections: dict[str, int] = {}
    for i, section in enumerate(parsed.sections):
        first = sections.setdefault(section.id, i)
        if first != i:
            problem(("sections", i, "id"), f"duplicate id '{section.id}', {seen_at('sections', first)}")
    items: dict[str, int] = {}
    for i, item in enumerate(parsed.items):
        first = items.setdefault(item.id, i)
        if first != i:
            problem(("items", i, "id"), f"duplicate id '{item.id}', {seen_at('items', first)}")
            continue
        if item.section not in sections:
            hint = suggest(item.section, sorted(sections))
            problem(("items", i, "section"), f"unknown section '{item.section}'{hint}")
        elif not item.id.startswith(f"{item.section}."):
            expected = f"'{item.section}.'"
            problem(("items", i, "id"), f"an item in section '{item.section}' has an id starting {expected}")
        if item.id not in checks:
            problem(("items", i, "id"), f"no check is registered for '{item.id}' (in triage/audit/checks/)")
    for check_id in sorted(set(checks) - set(items)):
        problem(("items",), f"the registered check '{check_id}' has no item")
    if problems:
        raise InputErrors(problems)
    return Checklist(
        tuple(Section(s.id, s.title, s.original) for s in parsed.sections),
        tuple(ChecklistItem(i.id, i.section, i.title, i.original, i.settle, i.fix) for i in parsed.items),
    )


@functools.cache
def bundled_checklist() -> Checklist:
    """The checklist shipped with the package, read and validated once."""
    return load_checklist(read_yaml(str(BUNDLED)), CHECKS)


def __getattr__(name: str) -> tuple[Section, ...] | tuple[ChecklistItem, ...]:
    """`SECTIONS` and `ITEMS`: the bundled checklist's, read on first use like `bundled_checklist`."""
    if name == "SECTIONS":
        return bundled_checklist().sections
    if name == "ITEMS":
        return bundled_checklist().items
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = ["BUNDLED", "bundled_checklist", "load_checklist"]
