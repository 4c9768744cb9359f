"""The rules of `triage rules` as a `PrometheusRule`, the object the Prometheus Operator loads.

A cluster run by the Prometheus Operator takes its rules from `PrometheusRule` objects
(`monitoring.coreos.com/v1`), not from files: `spec.groups` holds the groups of a rule
file as they are, and a Prometheus resource loads the objects its `ruleSelector` (and
`ruleNamespaceSelector`) match, by their labels. So the object is the rule file's two
groups, unchanged, under a name, an optional namespace (left out, `kubectl apply -n`
places it) and the labels the selector looks for. The rule file's header comment stays
at the top.

The API server checks what the CRD's schema cannot: the name is a DNS-1123 subdomain,
the namespace a DNS-1123 label, and each label a qualified name with a short value.
`ObjectMeta` holds the same rules, so a bad value is refused here, naming the field,
rather than by `kubectl apply`. Everything here is pure.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from triage.rules.render import RuleFile, dump_yaml

API_VERSION = "monitoring.coreos.com/v1"
KIND = "PrometheusRule"
DEFAULT_NAME = "llm-triage"

_DNS_LABEL = r"[a-z0-9](?:[-a-z0-9]*[a-z0-9])?"
DNS_LABEL = re.compile(_DNS_LABEL)
DNS_SUBDOMAIN = re.compile(rf"{_DNS_LABEL}(?:\.{_DNS_LABEL})*")
QUALIFIED_NAME = re.compile(r"[A-Za-z0-9](?:[-A-Za-z0-9_.]*[A-Za-z0-9])?")
SUBDOMAIN_MAX = 253
LABEL_MAX = 63

_SUBDOMAIN_RULE = (
    "lowercase letters, digits, '-' and '.', each part starting and ending with a letter or digit"
)
_LABEL_RULE = "lowercase letters, digits and '-', starting and ending with a letter or digit"
_QUALIFIED_RULE = "letters, digits, '-', '_' and '.', starting and ending with a letter or digit"


class MetadataError(ValueError):
    """A metadata field Kubernetes would refuse: `field` (name, namespace, labels) and why."""

    def __init__(self, field: str, problem: str) -> None:
        super().__init__(f"{field}: {problem}")
        self.field = field
        self.problem = problem


def _too_long(value: str, limit: int) -> str | None:
    return f"{len(value)} characters long, at most {limit}" if len(value) > limit else None


def subdomain_problem(value: str) -> str | None:
    """Why `value` is not a DNS-1123 subdomain (an object's name), or None."""
    if not value:
        return "empty"
    if too_long := _too_long(value, SUBDOMAIN_MAX):
        return too_long
    if not DNS_SUBDOMAIN.fullmatch(value):
        return f"{value!r} is not a DNS-1123 subdomain: {_SUBDOMAIN_RULE}"
    return None


def dns_label_problem(value: str) -> str | None:
    """Why `value` is not a DNS-1123 label (a namespace), or None."""
    if not value:
        return "empty"
    if too_long := _too_long(value, LABEL_MAX):
        return too_long
    if not DNS_LABEL.fullmatch(value):
        return f"{value!r} is not a DNS-1123 label: {_LABEL_RULE}"
    return None


def label_key_problem(key: str) -> str | None:
    """Why `key` is not a label key (`[prefix/]name`, the prefix a DNS subdomain), or None."""
    prefix, slash, name = key.rpartition("/")
    if slash:
        if "/" in prefix or not prefix:
            return f"key {key!r} is not [prefix/]name"
        if problem := subdomain_problem(prefix):
            return f"key {key!r}: prefix {problem}"
    if not name:
        return f"key {key!r} has no name"
    if len(name) > LABEL_MAX:
        return f"key {key!r}: name is {len(name)} characters, at most {LABEL_MAX}"
    if not QUALIFIED_NAME.fullmatch(name):
        return f"key {key!r}: name must be {_QUALIFIED_RULE}"
    return None


def label_value_problem(key: str, value: str) -> str | None:
    """Why `value` cannot be the value of label `key`, or None (an empty value is allowed)."""
    if len(value) > LABEL_MAX:
        return f"value of {key!r} is {len(value)} characters, at most {LABEL_MAX}"
    if value and not QUALIFIED_NAME.fullmatch(value):
        return f"value {value!r} of {key!r} must be empty or {_QUALIFIED_RULE}"
    return None


def parse_labels(text: str) -> dict[str, str]:
    """`k=v,k=v` as labels, in the order given; '' is none. A bad pair raises `MetadataError`."""
    labels: dict[str, str] = {}
    if not text.strip():
        return labels
    for item in text.split(","):
        pair = item.strip()
        if not pair:
            raise MetadataError("labels", f"{text!r} has an empty item")
        key, equals, value = pair.partition("=")
        key, value = key.strip(), value.strip()
        if not equals or not key:
            raise MetadataError("labels", f"{pair!r} is not key=value")
        if key in labels:
            raise MetadataError("labels", f"key {key!r} is given twice")
        labels[key] = value
    return labels


@dataclass(frozen=True)
class ObjectMeta:
    """The metadata of the object: checked as the API server checks it when made."""

    name: str = DEFAULT_NAME
    namespace: str | None = None
    labels: Mapping[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if problem := subdomain_problem(self.name):
            raise MetadataError("name", problem)
        if self.namespace is not None and (problem := dns_label_problem(self.namespace)):
            raise MetadataError("namespace", problem)
        for key, value in self.labels.items():
            if problem := label_key_problem(key) or label_value_problem(key, value):
                raise MetadataError("labels", problem)

    def document(self) -> dict[str, Any]:
        """As `metadata:` holds it: no namespace or labels when none were given."""
        metadata: dict[str, Any] = {"name": self.name}
        if self.namespace is not None:
            metadata["namespace"] = self.namespace
        if self.labels:
            metadata["labels"] = dict(self.labels)
        return metadata


def prometheus_rule(rules: RuleFile, meta: ObjectMeta) -> dict[str, Any]:
    """The `PrometheusRule` object: `spec.groups` are the rule file's groups, unchanged."""
    return {
        "apiVersion": API_VERSION,
        "kind": KIND,
        "metadata": meta.document(),
        "spec": {"groups": rules.groups},
    }


def render_prometheus_rule(rules: RuleFile, meta: ObjectMeta) -> str:
    """The object as YAML, under the rule file's header comment."""
    return rules.header + dump_yaml(prometheus_rule(rules, meta))


__all__ = [
    "API_VERSION",
    "DEFAULT_NAME",
    "KIND",
    "MetadataError",
    "ObjectMeta",
    "parse_labels",
    "prometheus_rule",
    "render_prometheus_rule",
]
