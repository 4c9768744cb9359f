"""Playbooks: the triage knowledge as YAML, validated strictly and across files.

A playbook file holds any of `settings`, `symptoms`, `causes`, `actions` and
`forbidden`, under `schema_version: 1`. Each file is checked against a strict schema
(unknown keys rejected, closed sets as literals), then all files together: every id
referenced exists (with a "did you mean"), every cause is reachable from a symptom, a
cause sits in its own layer, no action is both advised and forbidden, every signal is
in the vocabulary, and `explains` has no cycle. Problems read `file:line: key: message`.

The package is split in two: `schema` holds the pydantic models of one file (the
shape a playbook must have) and `Knowledge`, what all files merge into; `load` holds the
validation of documents against that schema and across files. This module is its
public face.

This package does no IO: it takes parsed documents. `triage.sources` reads the files.
"""

from triage.core.playbook.load import iter_checks, load_knowledge, signals_of
from triage.core.playbook.schema import CHECK_PARAMS, AnyOf, CheckSpec, Knowledge, Settings

__all__ = [
    "CHECK_PARAMS",
    "AnyOf",
    "CheckSpec",
    "Knowledge",
    "Settings",
    "iter_checks",
    "load_knowledge",
    "signals_of",
]
