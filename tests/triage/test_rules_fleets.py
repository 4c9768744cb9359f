"""`triage rules` per fleet: every aggregation keeps the fleet labels, and the joins give them to
the exporters that lack them.

The printer that writes a catalog query back must say what the query said (every bundled
query round-trips to the same syntax tree, escapes included). The rule file passes
`promtool check rules` with any replica label and fleet labels, and `promtool test rules`
on two fleets' raw series shows each recorded series under its own fleet: engine series
grouped, an engine info series without `model_name` completed from its pod, a GPU named
by `exported_pod` joined, and a GPU whose exporter names no pod kept without fleet labels.
The rules of the scraped multi-fleet cluster are tested in tests/fleets/test_cluster_rules.py.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import promql_parser
import pytest
import yaml
from test_rules import promtool, run_promtool

from signals.catalog import QueryOptions, load_catalog, render
from triage.cli.main import main
from triage.rules import load_slo
from triage.rules.promql import PromQLRewriteError, per_fleet, printed
from triage.rules.render import ALERT_GROUP, SIGNAL_GROUP, render_rules

GROUPING = re.compile(r"\bby \(([^)]*)\)")


def _groups(text: str) -> dict[str, list[dict[str, Any]]]:
    return {g["name"]: g["rules"] for g in yaml.safe_load(text)["groups"]}


def _check(tmp_path: Path, text: str) -> None:
    path = tmp_path / "rules.yml"
    path.write_text(text, encoding="utf-8")
    result = run_promtool("check", "rules", str(path))
    assert result.returncode == 0, result.stdout + result.stderr


def test_every_catalog_query_prints_back_to_the_same_syntax_tree() -> None:
    options = QueryOptions(selector='namespace="llm",pod=~"vllm-\\\\d+\\\\.x",model_name!="a\\"b"')
    for signal, sources in load_catalog().sources.items():
        for source in sources:
            for template in (source.fleet, source.replica):
                if template is None:
                    continue
                query = render(template, options, source.exporter)
                assert str(promql_parser.parse(printed(query))) == str(promql_parser.parse(query)), signal


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ("sum(rate(x[5m]))", "sum by (namespace, model_name) (rate(x[5m]))"),
        ("sum by (le) (x)", "sum by (le, namespace, model_name) (x)"),
        ("sum by (namespace) (x)", "sum by (namespace, model_name) (x)"),
        ("sum without (pod) (x)", "sum without (pod) (x)"),
        ("topk(3, x)", "topk by (namespace, model_name) (3, x)"),
        ("x / 100", "x / 100"),
        ('label_replace(x, "t", "$1", "team", "(.*)")', 'label_replace(x, "t", "$1", "team", "(.*)")'),
        ("x offset 1h > bool 0", "x offset 1h > bool 0"),
    ],
)
def test_aggregations_get_the_fleet_labels(query: str, expected: str) -> None:
    assert per_fleet(query, ["namespace", "model_name"]) == expected


def test_the_innermost_aggregation_is_joined_and_a_bare_query_whole() -> None:
    def join(series: Any) -> str:
        return f"({series(())}) or ({series(['pod=' + chr(34) * 2])})"

    nested = per_fleet("avg(max by (gpu) (a / b))", ["m"], join)
    assert nested == 'avg by (m) (max by (gpu, m) ((a / b) or (a{pod=""} / b{pod=""})))'
    assert per_fleet("x{a='1'}", ["m"], join) == '(x{a="1"}) or (x{a="1",pod=""})'
    with pytest.raises(PromQLRewriteError, match="does not parse"):
        per_fleet("sum(", ["m"])


def test_raw_series_beside_an_aggregation_are_joined_whole_and_matched_within_the_fleet() -> None:
    """DCGM's inferred throttle compares a GPU's clock with its peers' median: the raw side is
    joined as a whole (in parentheses, as an `or` of branches binds looser than `<` or `and`), the
    `on` matching gets the fleet labels, and a part that reads no series is left alone."""

    def join(series: Any) -> str:
        return f"({series(())}) or ({series(['pod=' + chr(34) * 2])})"

    query = (
        "max((c > 0.8 * max_over_time(c[1h:1m])) < on (model) group_left 0.8 * quantile by (model) (0.5, c))"
        " or 0 * c"
    )
    assert per_fleet(query, ["m"], join) == (
        "max by (m) ((((c > 0.8 * max_over_time(c[1h:1m]))) "
        'or ((c{pod=""} > 0.8 * max_over_time(c{pod=""}[1h:1m])))) '
        '< on (model, m) group_left () 0.8 * quantile by (model, m) (0.5, (c) or (c{pod=""}))) '
        'or ((0 * c) or (0 * c{pod=""}))'
    )
    # the argument of `and` is joined before the filter applies, not only the join's last branch
    filtered = per_fleet("sum(rate(x[5m]) and on (model) group by (model) (y))", ["m"], join)
    assert filtered.startswith('sum by (m) (((rate(x[5m])) or (rate(x{pod=""}[5m]))) and on (model, m) ')


def test_per_fleet_rules_keep_the_fleet_labels_beside_the_replica_label(tmp_path: Path) -> None:
    options = QueryOptions(replica_label="pod", selector='namespace="llm"')
    text = render_rules(load_catalog(), load_slo(), options)
    groups = _groups(text)
    records = {r["record"]: r["expr"] for r in groups[SIGNAL_GROUP]}
    for name, expr in records.items():
        if name.startswith("triage:fleet_"):
            continue
        for grouping in GROUPING.findall(expr):
            labels = [label.strip() for label in grouping.split(",")]
            assert {"namespace", "model_name"} <= set(labels), f"{name}: by ({grouping})"
    # ...and by the name an orchestrator gives a fleet on the engines' series (KServe's service_name)
    assert "by (le, pod, namespace, model_name, service_name)" in records["triage:ttft_p99_seconds:replica"]
    # The user's selector scopes the engines (and so the fleets); routers' re-exports are left out.
    assert 'vllm:num_requests_waiting{namespace="llm",server="",' in records["triage:queue_waiting"]
    assert 'namespace="llm"' in records["triage:fleet_engine_pods"]
    # DCGM and kube-state-metrics are scoped by their join, not by a selector that names another namespace.
    for name in ("triage:gpu_xid:replica", "triage:restarts", "triage:replicas_ready"):
        assert 'namespace="llm"' not in records[name] and "triage:fleet_" in records[name]
    alerts = {r["alert"]: r for r in groups[ALERT_GROUP]}
    assert "on(pod, namespace, model_name, service_name)" in alerts["KVCacheNearFull"]["expr"]
    assert alerts["TPOTP99High"]["expr"] == "triage:tpot_p99_seconds > 0.05"
    assert "# fleet labels: namespace, model_name" in text
    _check(tmp_path, text)


def test_the_fleet_labels_are_configurable_and_none_means_one_fleet(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["rules", "--fleet-labels", "cluster,model"]) == 0
    text = capsys.readouterr().out
    records = {r["record"]: r["expr"] for r in _groups(text)[SIGNAL_GROUP]}
    assert "sum by (le, cluster, model, service_name)" in records["triage:ttft_p99_seconds"]
    assert records["triage:fleet_engine_pods"].startswith(
        "group by (namespace, pod, cluster, model, service_name) ("
    )
    _check(tmp_path, text)
    assert main(["rules", "--fleet-labels", ""]) == 0
    single = capsys.readouterr().out
    assert "triage:fleet_" not in single and "fleet labels" not in single
    assert single == render_rules(load_catalog(), load_slo(), QueryOptions(), ())
    assert main(["rules", "--fleet-labels", "model name"]) == 2
    assert "--fleet-labels: 'model name' is not a label name" in capsys.readouterr().err


def _series(name: str, **labels: str) -> str:
    return name + "{" + ",".join(f'{k}="{v}"' for k, v in sorted(labels.items())) + "}"


def _sample(name: str, value: float, **labels: str) -> dict[str, Any]:
    return {"labels": _series(name, **labels), "value": value}


def test_two_fleets_are_recorded_apart_and_joined_exporters_follow_their_pods(tmp_path: Path) -> None:
    promtool()
    a = {"namespace": "llm", "model_name": "a"}
    b = {"namespace": "llm", "model_name": "b"}
    pods = {"a-0": a, "a-1": a, "b-0": b}
    inputs = []
    for pod, fleet in pods.items():
        engine = {**fleet, "pod": pod, "instance": f"{pod}:8000"}
        inputs.append({"series": _series("vllm:num_requests_running", **engine), "values": "3x80"})
        inputs.append({"series": _series("vllm:request_success_total", **engine), "values": "0+30x80"})
    # vLLM's cache_config_info carries no model_name: its pod's fleet completes it.
    info = {"namespace": "llm", "pod": "a-0", "instance": "a-0:8000", "block_size": "16"}
    inputs.append({"series": _series("vllm:cache_config_info", **info), "values": "1x80"})
    # A GPU Operator exporter names the workload's pod exported_pod; a bare-metal one names none.
    operator = {"namespace": "gpu-operator", "pod": "dcgm-1", "instance": "n1:9400", "Hostname": "n1"}
    inputs.append(
        {
            "series": _series(
                "DCGM_FI_DEV_GPU_TEMP", **operator, gpu="0", exported_pod="b-0", exported_namespace="llm"
            ),
            "values": "70x80",
        }
    )
    inputs.append({"series": _series("DCGM_FI_DEV_GPU_TEMP", **operator, gpu="1"), "values": "40x80"})
    inputs.append(
        {
            "series": _series("DCGM_FI_DEV_GPU_TEMP", instance="n2:9400", Hostname="n2", gpu="0"),
            "values": "50x80",
        }
    )
    cases = [
        {
            "expr": "triage:request_rate",
            "eval_time": "10m",
            "exp_samples": [
                _sample("triage:request_rate", 4, **a),
                _sample("triage:request_rate", 2, **b),
            ],
        },
        {
            "expr": "triage:config_info:replica",
            "eval_time": "10m",
            "exp_samples": [
                _sample("triage:config_info:replica", 1, instance="a-0:8000", block_size="16", **a)
            ],
        },
        {
            "expr": "triage:gpu_temp_celsius:replica",
            "eval_time": "10m",
            "exp_samples": [
                _sample("triage:gpu_temp_celsius:replica", 70, instance="n1:9400", gpu="0", **b),
                _sample("triage:gpu_temp_celsius:replica", 50, instance="n2:9400", gpu="0"),
            ],
        },
    ]
    rules = tmp_path / "rules.yml"
    rules.write_text(render_rules(load_catalog(), load_slo(), QueryOptions()), encoding="utf-8")
    test = {
        "rule_files": [str(rules)],
        "evaluation_interval": "15s",
        "tests": [{"interval": "15s", "input_series": inputs, "promql_expr_test": cases}],
    }
    path = tmp_path / "fleets.yml"
    with open(path, "w", encoding="utf-8") as handle:
        yaml.safe_dump(test, handle, sort_keys=False, width=1 << 30)
    result = run_promtool("test", "rules", str(path))
    assert result.returncode == 0, result.stdout + result.stderr
