"""The serving stacks as discovery reads them: which series mark an engine's replica, and
what names a fleet on each orchestrator (KServe, Dynamo, Ray Serve), from signals/stacks.yaml.

A plain Deployment of vLLM is a fleet of its namespace, model and workload. A stack adds its
own key: KServe serves every InferenceService under `model_name=/mnt/models`, so the service
is the fleet; Dynamo runs one model as a prefill pool and a decode pool behind a frontend, one
fleet of two pools; Ray Serve's engine series name no deployment at all, and the application
is found through the Serve replica that runs the engine (`WorkerId`). Knowledge users extend
(a new stack's labels) lives in the YAML; this module reads it and applies it to one row.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from signals.yamldoc import read_yaml

BUNDLED = Path(__file__).resolve().parent.parent / "stacks.yaml"
SERVE_REPLICA = "ray_serve_replica_processing_queries"
"""A series every Ray Serve replica actor exports, carrying its `application` and `WorkerId`."""
SERVE_BY = ("WorkerId", "application", "deployment", "replica")
POD_LABELS = "kube_pod_labels"

Row = Mapping[str, str]


class EngineSpec(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    metric: str = Field(min_length=1)
    engine: str = Field(min_length=1)
    title: str = Field(min_length=1)
    model_label: str | None = "model_name"
    replica_labels: tuple[str, ...] = ()


class NameFrom(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    label: str = Field(min_length=1)
    suffix: str = ""


class OrchestratorSpec(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    kind: str = Field(min_length=1)
    orchestrator: str = Field(min_length=1)
    name: tuple[str | NameFrom, ...] = Field(min_length=1)
    when: str | None = None
    pool: str | None = None
    pools: dict[str, str] = Field(default_factory=dict)
    revision: tuple[str, ...] = ()
    scope: dict[str, str] = Field(default_factory=dict)
    join: str | None = None
    rules_key: tuple[str, ...] = ()

    def labels(self) -> set[str]:
        """Every label this rule reads from a row."""
        out = {n if isinstance(n, str) else n.label for n in self.name}
        out |= {x for x in (self.when, self.pool) if x}
        return out | set(self.revision)


class StacksFile(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    schema_version: int
    engines: tuple[EngineSpec, ...]
    orchestrators: tuple[OrchestratorSpec, ...] = ()


@dataclass(frozen=True)
class Identity:
    """What an orchestrator says of one replica: the fleet's kind and name, its pool and revision."""

    kind: str
    name: str
    orchestrator: str
    pool: str = ""
    revision: str = ""
    how: str = ""
    """How the name was found, for `triage fleets` (e.g. `label service_name`)."""
    scope: tuple[tuple[str, str], ...] = field(default=(), compare=False)
    """Label -> which of the fleet's values matches its orchestrator's series: `name`,
    `model_or_none`, or `=value`."""


@cache
def stacks() -> StacksFile:
    """The bundled stacks file, validated (a broken file names its line and field)."""
    doc = read_yaml(str(BUNDLED))
    try:
        return StacksFile.model_validate(doc.data)
    except ValidationError as exc:
        first = exc.errors()[0]
        raise doc.error(tuple(first["loc"]), first["msg"]) from None


def engine_specs() -> dict[str, EngineSpec]:
    """Marker metric -> its engine."""
    return {e.metric: e for e in stacks().engines}


def engine_labels() -> tuple[str, ...]:
    """Every label an engine row keeps for discovery beyond the namespace, pod and instance."""
    found: set[str] = set()
    for e in stacks().engines:
        found |= {e.model_label} if e.model_label else set()
        found |= set(e.replica_labels)
    for o in stacks().orchestrators:
        found |= o.labels()
    return tuple(sorted(found))


def pod_label_names() -> tuple[str, ...]:
    """The `label_*` names of kube_pod_labels that orchestrator rules read."""
    found: set[str] = set()
    for o in stacks().orchestrators:
        found |= o.labels()
    return tuple(sorted(f"label_{_sanitised(n)}" for n in found))


def _sanitised(label: str) -> str:
    return re.sub(r"[^a-zA-Z0-9_]", "_", label)


def pod_labels(row: Row) -> dict[str, str]:
    """A kube_pod_labels row's pod labels under the names an engine series would carry them."""
    return {k.removeprefix("label_"): v for k, v in row.items() if k.startswith("label_") and v}


def _name(spec: OrchestratorSpec, labels: Row) -> tuple[str, str] | None:
    for entry in spec.name:
        label, suffix = (entry, "") if isinstance(entry, str) else (entry.label, entry.suffix)
        value = labels.get(label, "")
        if not value:
            continue
        if suffix:
            if not value.endswith(suffix) or value == suffix:
                continue
            value = value.removesuffix(suffix)
        return value, f"label {label}"
    return None


def identify(labels: Row, serve: Mapping[str, Row]) -> Identity | None:
    """The orchestrator identity of a replica whose series and pod carry `labels`, or None
    for a plain workload. `serve` maps a Ray worker to its Serve replica row."""
    for spec in stacks().orchestrators:
        if spec.when and not labels.get(spec.when):
            continue
        named = _name(spec, labels)
        if named is None:
            continue
        name, how = named
        if spec.join == "ray_serve":
            replica = serve.get(labels.get("WorkerId", ""))
            if replica is None or not replica.get("application"):
                continue
            application = replica["application"]
            label = how.removeprefix("label ")
            return Identity(
                spec.kind,
                f"{name}/{application}",
                spec.orchestrator,
                how=f"{how}, application from {SERVE_REPLICA} by WorkerId",
                scope=((label, "=" + name), ("application", "=" + application)),
            )
        pool = labels.get(spec.pool, "") if spec.pool else ""
        revision = next((labels[r] for r in spec.revision if labels.get(r)), "")
        scope = tuple(sorted((label, which) for label, which in spec.scope.items()))
        return Identity(
            spec.kind,
            name,
            spec.orchestrator,
            spec.pools.get(pool, pool),
            revision,
            how,
            scope,
        )
    return None


def orchestrator_selector(identity: Identity, model: str) -> str:
    """PromQL matchers for the orchestrator's own series of one fleet (Dynamo's frontend, Ray
    Serve's proxy): a Dynamo namespace matches dashed or underscored (its PodMonitor and its
    runtime spell it apart), the frontend's `model` case-insensitively (it lower-cases it) or
    absent (its planner names no model)."""
    parts: list[str] = []
    for label, which in identity.scope:
        if which == "name":
            pattern = "[-_]".join(re.escape(p) for p in re.split(r"[-_]", identity.name))
            parts.append(f'{label}=~"{_quoted(pattern)}"')
        elif which == "model_or_none":
            parts.append(f'{label}=~"(?i)({_quoted(re.escape(model))})?"')
        elif which.startswith("="):
            parts.append(f'{label}="{_quoted(which[1:])}"')
    return ",".join(parts)


def _quoted(text: str) -> str:
    return text.replace("\\", "\\\\").replace('"', '\\"')


def rows_by_worker(rows: Sequence[Row]) -> dict[str, Row]:
    """Ray Serve replica rows by their `WorkerId` (the engine running in that actor shares it)."""
    return {r["WorkerId"]: r for r in rows if r.get("WorkerId")}
