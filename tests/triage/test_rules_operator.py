"""`triage rules --format prometheusrule`: an object the Prometheus Operator's CRD accepts, holding the
rule file's groups unchanged.

The object is validated against the real CRD (prometheus-operator 0.93.0, in `shared/real` beside
the repository) with jsonschema, read as the API server reads it: unknown fields refused (kubectl's
strict field validation), list-map keys unique, Go's regular expressions read as Go reads them. The
CRD leaves `metadata` open (the API server checks it itself), so the name, namespace and labels are
checked against Kubernetes' rules written out here, apart from the code's. The same validation must
refuse objects that Kubernetes refuses. The groups inside pass `promtool check rules` and equal the
rule file's; the flags' errors are one line and exit 2.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Iterator, Mapping
from functools import cache
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml
from jsonschema import Draft7Validator
from jsonschema.exceptions import ValidationError
from test_rules import run_promtool

from triage.cli.common import EXIT_OK, EXIT_USAGE
from triage.cli.main import main
from triage.rules.operator import API_VERSION, KIND, MetadataError, ObjectMeta, parse_labels

REAL = Path(__file__).resolve().parents[2].parent / "shared" / "real"
CRD = REAL / "crd-prometheus-operator-prometheusrules.yaml"

# --- the CRD's schema as JSON Schema ------------------------------------------------------------

_LABEL = r"[a-z0-9]([-a-z0-9]*[a-z0-9])?"
_SUBDOMAIN = rf"{_LABEL}(\.{_LABEL})*"
_NAME = r"[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?"
OBJECT_META: dict[str, Any] = {
    "type": "object",
    "required": ["name"],
    "additionalProperties": False,
    "properties": {
        "name": {"type": "string", "maxLength": 253, "pattern": rf"^{_SUBDOMAIN}\Z"},
        "namespace": {"type": "string", "maxLength": 63, "pattern": rf"^{_LABEL}\Z"},
        "labels": {
            "type": "object",
            "propertyNames": {"pattern": rf"^((?=[^/]{{1,253}}/){_SUBDOMAIN}/)?(?=[^/]{{1,63}}\Z){_NAME}\Z"},
            "additionalProperties": {"type": "string", "maxLength": 63, "pattern": rf"^({_NAME})?\Z"},
        },
    },
}
"""What the API server checks of the metadata this command writes (Kubernetes' object names and
labels: a DNS-1123 subdomain, a DNS-1123 label, `[prefix/]name` keys and short values)."""


def _go_pattern(pattern: str) -> str:
    """A Go (RE2) pattern as Python's `re` reads it the same way: Go allows flags after `^`
    (`^(?i)(abort|warn)?$`), Python only at the start; Go's `$` is the end of the text, Python's
    also matches before a final newline."""
    pattern = re.sub(r"^\^\(\?([a-zA-Z]+)\)", r"(?\1)^", pattern)
    if pattern.endswith("$") and not pattern.endswith("\\$"):
        pattern = pattern[:-1] + r"\Z"
    return pattern


def _json_schema(node: Mapping[str, Any]) -> dict[str, Any]:
    """One OpenAPI v3 schema node of a CRD as JSON Schema, with Kubernetes' meaning:
    `nullable` admits null, `x-kubernetes-int-or-string` an integer or a string, and an object
    with declared properties refuses others unless it preserves unknown fields."""
    schema = dict(node)
    if "properties" in schema:
        schema["properties"] = {k: _json_schema(v) for k, v in schema["properties"].items()}
    for key in ("items", "additionalProperties", "not"):
        if isinstance(schema.get(key), Mapping):
            schema[key] = _json_schema(schema[key])
    for key in ("anyOf", "allOf", "oneOf"):
        if key in schema:
            schema[key] = [_json_schema(s) for s in schema[key]]
    if schema.pop("nullable", False) and "type" in schema:
        schema["type"] = [schema["type"], "null"]
    if schema.get("x-kubernetes-int-or-string") and "anyOf" not in schema:
        schema["anyOf"] = [{"type": "integer"}, {"type": "string"}]
    if "pattern" in schema:
        schema["pattern"] = _go_pattern(schema["pattern"])
    preserves = schema.get("x-kubernetes-preserve-unknown-fields")
    if "properties" in schema and "additionalProperties" not in schema and not preserves:
        schema["additionalProperties"] = False
    return schema


def _list_map_keys(
    validator: Any, keys: list[str], instance: Any, schema: Mapping[str, Any]
) -> Iterator[ValidationError]:
    """`x-kubernetes-list-type: map`: every item has the keys, and no two items the same keys."""
    if schema.get("x-kubernetes-list-type") != "map" or not validator.is_type(instance, "array"):
        return
    seen: dict[tuple[Any, ...], int] = {}
    for index, item in enumerate(instance):
        if not isinstance(item, dict):
            continue
        if missing := [k for k in keys if k not in item]:
            yield ValidationError(f"item {index} lacks the list-map key(s) {missing}")
            continue
        key = tuple(item[k] for k in keys)
        if key in seen:
            yield ValidationError(
                f"items {seen[key]} and {index} have the same {dict(zip(keys, key, strict=True))}"
            )
        seen[key] = index


KubernetesValidator = jsonschema.validators.extend(
    Draft7Validator, {"x-kubernetes-list-map-keys": _list_map_keys}
)


@cache
def _validator() -> Any:
    if not CRD.is_file():
        pytest.skip(f"the PrometheusRule CRD is not at {CRD} (the steering repo's shared/real)")
    crd = yaml.safe_load(CRD.read_text(encoding="utf-8"))
    assert crd["kind"] == "CustomResourceDefinition" and crd["spec"]["names"]["kind"] == KIND
    (v1,) = [v for v in crd["spec"]["versions"] if v["name"] == "v1"]
    assert f"{crd['spec']['group']}/{v1['name']}" == API_VERSION
    schema = _json_schema(v1["schema"]["openAPIV3Schema"])
    schema["properties"]["metadata"] = OBJECT_META
    KubernetesValidator.check_schema(schema)
    return KubernetesValidator(schema)


def problems(document: Any) -> list[str]:
    """Every reason the API server would refuse `document` as a PrometheusRule, path first."""
    errors = sorted(_validator().iter_errors(document), key=lambda e: list(map(str, e.absolute_path)))
    found = [f"{'.'.join(map(str, e.absolute_path)) or '<root>'}: {e.message}" for e in errors]
    if isinstance(document, dict):
        if document.get("apiVersion") != API_VERSION:
            found.append(f"apiVersion: {document.get('apiVersion')!r} is not {API_VERSION}")
        if document.get("kind") != KIND:
            found.append(f"kind: {document.get('kind')!r} is not {KIND}")
    return found


# --- the command ----------------------------------------------------------------------------------


def run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(["rules", *args])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def generated(capsys: pytest.CaptureFixture[str], *args: str) -> str:
    code, out, err = run(capsys, *args)
    assert code == EXIT_OK, err
    return out


def header(text: str) -> list[str]:
    lines = text.splitlines()
    return lines[: next(i for i, line in enumerate(lines) if not line.startswith("# "))]


CASES = {
    "default": (),
    "single-fleet": ("--fleet-labels", ""),
    "named": (
        "--name",
        "llm-triage.rules",
        "--namespace",
        "monitoring",
        "--labels",
        "release=prometheus,app.kubernetes.io/part-of=llm-triage,empty=",
    ),
    "pod-replicas": ("--selector", '{namespace="llm"}', "--replica-label", "pod"),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_the_object_passes_the_crd_schema(case: str, capsys: pytest.CaptureFixture[str]) -> None:
    text = generated(capsys, "--format", "prometheusrule", *CASES[case])
    document = yaml.safe_load(text)
    assert problems(document) == []
    metadata = document["metadata"]
    if case == "named":
        assert metadata == {
            "name": "llm-triage.rules",
            "namespace": "monitoring",
            "labels": {"release": "prometheus", "app.kubernetes.io/part-of": "llm-triage", "empty": ""},
        }
    else:
        assert metadata == {"name": "llm-triage"}
    assert [g["name"] for g in document["spec"]["groups"]] == ["triage-signals", "triage-alerts"]
    assert all(g["rules"] for g in document["spec"]["groups"])


MUTATIONS = {
    "for in words": (lambda d: _alert(d).update({"for": "5 minutes"}), "'5 minutes' does not match"),
    "group without a name": (lambda d: d["spec"]["groups"][0].pop("name"), "'name' is a required property"),
    "rule of an unknown type": (
        lambda d: d["spec"]["groups"][0]["rules"].__setitem__(0, "up == 0"),
        "spec.groups.0.rules.0: 'up == 0' is not of type 'object'",
    ),
    "rule without expr": (
        lambda d: d["spec"]["groups"][0]["rules"][0].update(
            {"expression": d["spec"]["groups"][0]["rules"][0].pop("expr")}
        ),
        "'expr' is a required property",
    ),
    "expr a list": (
        lambda d: _alert(d).update({"expr": ["up"]}),
        "is not valid under any of the given schemas",
    ),
    "label value a number": (
        lambda d: _alert(d)["labels"].update({"priority": 1}),
        "1 is not of type 'string'",
    ),
    "unknown group field": (
        lambda d: d["spec"]["groups"][0].update({"evaluation_interval": "1m"}),
        "evaluation_interval",
    ),
    "two groups of one name": (
        lambda d: d["spec"]["groups"][1].update({"name": "triage-signals"}),
        "spec.groups: items 0 and 1 have the same {'name': 'triage-signals'}",
    ),
    "no spec": (lambda d: d.pop("spec"), "'spec' is a required property"),
    "name in capitals": (
        lambda d: d["metadata"].update({"name": "LLM-Triage"}),
        "metadata.name: 'LLM-Triage' does not match",
    ),
    "no name": (lambda d: d["metadata"].pop("name"), "metadata: 'name' is a required property"),
    "namespace with a dot": (
        lambda d: d["metadata"].update({"namespace": "a.b"}),
        "metadata.namespace: 'a.b' does not match",
    ),
    "label key with two slashes": (
        lambda d: d["metadata"].update({"labels": {"a/b/c": "x"}}),
        "metadata.labels: 'a/b/c' does not match",
    ),
    "label value too long": (
        lambda d: d["metadata"].update({"labels": {"release": "x" * 64}}),
        "is too long",
    ),
    "wrong kind": (
        lambda d: d.update({"kind": "PrometheusRules"}),
        "kind: 'PrometheusRules' is not PrometheusRule",
    ),
}


def _alert(document: dict[str, Any]) -> dict[str, Any]:
    rule: dict[str, Any] = document["spec"]["groups"][1]["rules"][0]
    assert "alert" in rule and "for" in rule and "labels" in rule
    return rule


@pytest.fixture(scope="module")
def valid_object() -> dict[str, Any]:
    document: dict[str, Any] = yaml.safe_load(
        _cli_text("--format", "prometheusrule", "--namespace", "monitoring", "--labels", "release=prometheus")
    )
    return document


def _cli_text(*args: str) -> str:
    import contextlib
    import io

    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert main(["rules", *args]) == EXIT_OK
    return out.getvalue()


@pytest.mark.parametrize("mutation", sorted(MUTATIONS))
def test_the_validation_refuses_what_kubernetes_refuses(mutation: str, valid_object: dict[str, Any]) -> None:
    assert problems(valid_object) == []
    document = copy.deepcopy(valid_object)
    mutate, expected = MUTATIONS[mutation]
    mutate(document)
    found = problems(document)
    assert found, f"{mutation}: accepted"
    assert any(expected in problem for problem in found), found


def test_for_in_words_is_refused_by_its_pattern(valid_object: dict[str, Any]) -> None:
    document = copy.deepcopy(valid_object)
    _alert(document)["for"] = "5 minutes"
    (problem,) = problems(document)
    assert problem.startswith("spec.groups.1.rules.0.for: '5 minutes' does not match"), problem


def test_go_patterns_read_as_go_reads_them() -> None:
    assert _go_pattern("^(?i)(abort|warn)?$") == r"(?i)^(abort|warn)?\Z"
    assert re.search(_go_pattern("^(?i)(abort|warn)?$"), "WARN")
    assert not re.search(_go_pattern("^(0|([0-9]+)m)$"), "5m\n")
    assert _go_pattern(r"^a\$") == r"^a\$"


# --- the groups inside ----------------------------------------------------------------------------


@pytest.mark.parametrize("case", sorted(CASES))
def test_the_groups_are_the_rule_files_groups(case: str, capsys: pytest.CaptureFixture[str]) -> None:
    plain = generated(capsys, *(() if case == "named" else CASES[case]))
    wrapped = generated(capsys, "--format", "prometheusrule", *CASES[case])
    assert yaml.safe_load(wrapped)["spec"]["groups"] == yaml.safe_load(plain)["groups"]
    assert header(wrapped) == header(plain) and len(header(plain)) >= 6
    assert wrapped.startswith("# Prometheus rules generated by `triage rules`")


@pytest.mark.parametrize("case", ["default", "single-fleet"])
def test_the_groups_inside_pass_promtool_check(
    case: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    document = yaml.safe_load(generated(capsys, "--format", "prometheusrule", *CASES[case]))
    groups = document["spec"]["groups"]
    path = tmp_path / "spec-groups.yml"
    path.write_text(yaml.safe_dump({"groups": groups}, sort_keys=False, width=1 << 30), encoding="utf-8")
    result = run_promtool("check", "rules", str(path))
    assert result.returncode == 0, result.stdout + result.stderr
    assert f"SUCCESS: {sum(len(g['rules']) for g in groups)} rules found" in result.stdout


# --- the metadata's rules, the same as the schema's -----------------------------------------------

NAMES = {
    "llm-triage": (True, True),
    "a": (True, True),
    "0": (True, True),
    "a" * 63: (True, True),
    "a" * 64: (True, False),
    "llm.triage-rules.v1": (True, False),
    ".".join(["a" * 63] * 4)[:253]: (True, False),
    "a" * 254: (False, False),
    "": (False, False),
    "LLM": (False, False),
    "-a": (False, False),
    "a-": (False, False),
    "a..b": (False, False),
    "a.-b": (False, False),
    "a_b": (False, False),
    "a b": (False, False),
}
"""Each value: whether it is a valid name (DNS-1123 subdomain) and a valid namespace (DNS-1123 label)."""
LABELS = {
    "release=prometheus": True,
    "app.kubernetes.io/name=llm-triage": True,
    "team=": True,
    "Role=On_Call.1": True,
    f"{'k' * 63}={'v' * 63}": True,
    f"{'k' * 64}=v": False,
    f"k={'v' * 64}": False,
    f"{'p' * 254}/k=v": False,
    "/k=v": False,
    "p/=v": False,
    "Example.com/k=v": False,
    "a/b/c=v": False,
    "_k=v": False,
    "k=-v": False,
    "k=v w": False,
}


@pytest.mark.parametrize("value", sorted(NAMES))
@pytest.mark.parametrize("key", ["name", "namespace"])
def test_names_are_checked_as_kubernetes_checks_them(key: str, value: str) -> None:
    valid = NAMES[value][key == "namespace"]
    meta = {"name": value} if key == "name" else {"name": "x", "namespace": value}
    assert jsonschema.Draft7Validator(OBJECT_META).is_valid(meta) is valid
    if valid:
        assert ObjectMeta(**meta).document() == meta
    else:
        with pytest.raises(MetadataError) as refused:
            ObjectMeta(**meta)
        assert refused.value.field == key


@pytest.mark.parametrize(("pair", "valid"), sorted(LABELS.items()))
def test_labels_are_checked_as_kubernetes_checks_them(pair: str, valid: bool) -> None:
    key, _, value = pair.partition("=")
    assert jsonschema.Draft7Validator(OBJECT_META).is_valid({"name": "x", "labels": {key: value}}) is valid
    if valid:
        assert ObjectMeta(labels=parse_labels(pair)).labels == {key: value}
    else:
        with pytest.raises(MetadataError) as refused:
            ObjectMeta(labels=parse_labels(pair))
        assert refused.value.field == "labels"


def test_labels_parse_in_order_and_empty_is_none() -> None:
    assert list(parse_labels(" release=prometheus , team=llm")) == ["release", "team"]
    assert parse_labels("") == {} and parse_labels("  ") == {}
    assert "labels" not in ObjectMeta().document() and "namespace" not in ObjectMeta().document()


# --- the command line -----------------------------------------------------------------------------

USAGE_ERRORS = {
    "name in capitals": (
        ("--format", "prometheusrule", "--name", "LLM"),
        "--name: 'LLM' is not a DNS-1123 subdomain",
    ),
    "name too long": (
        ("--format", "prometheusrule", "--name", "a" * 254),
        "--name: 254 characters long, at most 253",
    ),
    "empty name": (("--format", "prometheusrule", "--name", ""), "--name: empty"),
    "namespace with a dot": (
        ("--format", "prometheusrule", "--namespace", "mon.itoring"),
        "--namespace: 'mon.itoring' is not a DNS-1123 label",
    ),
    "label without a value": (
        ("--format", "prometheusrule", "--labels", "release"),
        "--labels: 'release' is not key=value",
    ),
    "label key twice": (
        ("--format", "prometheusrule", "--labels", "a=1,a=2"),
        "--labels: key 'a' is given twice",
    ),
    "empty label item": (
        ("--format", "prometheusrule", "--labels", "a=1,,b=2"),
        "--labels: 'a=1,,b=2' has an empty item",
    ),
    "bad label value": (
        ("--format", "prometheusrule", "--labels", "a=-1"),
        "--labels: value '-1' of 'a' must be empty or",
    ),
    "name with a rule file": (("--name", "llm-triage"), "--name: only with --format prometheusrule"),
    "namespace with a rule file": (
        ("--namespace", "monitoring"),
        "--namespace: only with --format prometheusrule",
    ),
    "labels with a rule file": (
        ("--format", "rules", "--labels", "release=prometheus", "--name", "x"),
        "--name, --labels: only with --format prometheusrule",
    ),
}


@pytest.mark.parametrize("case", sorted(USAGE_ERRORS))
def test_bad_flags_are_one_line_and_exit_2(case: str, capsys: pytest.CaptureFixture[str]) -> None:
    args, message = USAGE_ERRORS[case]
    code, out, err = run(capsys, *args)
    assert code == EXIT_USAGE
    assert out == ""
    assert err.startswith(f"triage: {message}"), err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err


def test_an_unknown_format_is_refused_by_argparse(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as done:
        main(["rules", "--format", "yaml"])
    assert done.value.code == EXIT_USAGE
    err = capsys.readouterr().err
    assert "--format" in err and "prometheusrule" in err and "Traceback" not in err


@pytest.mark.parametrize(
    ("args", "summary"),
    [
        ((), "(check with: promtool check rules {path})"),
        (
            ("--format", "prometheusrule", "--namespace", "monitoring"),
            "as PrometheusRule monitoring/llm-triage (check with: kubectl apply --dry-run=server -f {path})",
        ),
        (
            ("--format", "prometheusrule"),
            "as PrometheusRule llm-triage (check with: kubectl apply --dry-run=server -f {path})",
        ),
    ],
)
def test_output_file_is_what_stdout_gets(
    args: tuple[str, ...], summary: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    target = tmp_path / "triage-rules.yaml"
    code, out, err = run(capsys, *args, "-o", str(target))
    assert code == EXIT_OK and out == ""
    text = target.read_text(encoding="utf-8")
    assert text == generated(capsys, *args)
    count = sum(len(g["rules"]) for g in (yaml.safe_load(text).get("spec") or yaml.safe_load(text))["groups"])
    assert err == f"triage: wrote {count} rules to {target} {summary.format(path=target)}\n"
    assert not list(tmp_path.glob(".*.partial"))


def test_help_teaches_the_operator_format(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as done:
        main(["rules", "--help"])
    assert done.value.code == 0
    help_text = capsys.readouterr().out
    assert "--format {rules,prometheusrule}" in help_text
    assert (
        "triage rules --format prometheusrule --name llm-triage --namespace monitoring \\\n"
        "      --labels release=prometheus" in help_text
    )
    assert "ruleSelector" in help_text and "kubectl apply --dry-run=server -f" in help_text
