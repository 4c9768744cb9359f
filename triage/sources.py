"""Reading knowledge and incidents from disk: the edge between files and the pure core."""

from __future__ import annotations

import os
from pathlib import Path

from signals.errors import InputError, InputErrors
from signals.yamldoc import Document, read_yaml
from triage.core.graph import TriageGraph, build_graph
from triage.core.playbook import Knowledge, load_knowledge

PLAYBOOKS_ENV = "TRIAGE_PLAYBOOKS"


def default_playbook_dir() -> Path:
    """`$TRIAGE_PLAYBOOKS`, else `./playbooks`, else the playbooks shipped beside the package."""
    env = os.environ.get(PLAYBOOKS_ENV)
    if env:
        return Path(env)
    here = Path.cwd() / "playbooks"
    if here.is_dir():
        return here
    return Path(__file__).resolve().parent.parent / "playbooks"


def read_playbook_documents(directory: Path, stop_at_first: bool = False) -> list[Document]:
    """Every `*.yaml`/`*.yml` file of a playbook folder, parsed, in name order."""
    if not directory.is_dir():
        raise InputErrors([InputError(str(directory), 0, "(directory)", "no such playbook folder")])
    docs: list[Document] = []
    problems: list[InputError] = []
    for path in sorted(p for p in directory.iterdir() if p.suffix in (".yaml", ".yml") and p.is_file()):
        try:
            docs.append(read_yaml(str(path)))
        except InputError as exc:
            if stop_at_first:
                raise InputErrors([exc]) from None
            problems.append(exc)
    if problems:
        raise InputErrors(problems)
    if not docs:
        raise InputErrors([InputError(str(directory), 0, "(directory)", "no playbook files (*.yaml) found")])
    return docs


def load_playbooks(directory: Path | None = None, stop_at_first: bool = False) -> Knowledge:
    """Read and validate a playbook folder; InputErrors lists every problem."""
    docs = read_playbook_documents(directory or default_playbook_dir(), stop_at_first)
    return load_knowledge(docs, stop_at_first=stop_at_first)


def load_graph(directory: Path | None = None) -> TriageGraph:
    return build_graph(load_playbooks(directory))
