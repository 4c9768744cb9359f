"""Playbook validation: the bundled knowledge is clean, and each kind of mistake is located."""

from __future__ import annotations

from pathlib import Path

import pytest

from signals.errors import InputErrors
from signals.vocabulary import SIGNALS
from signals.yamldoc import parse_yaml
from triage.core.model import SYMPTOMS
from triage.core.playbook import iter_checks, load_knowledge
from triage.sources import read_playbook_documents

ROOT = Path(__file__).resolve().parents[2]
VOCABULARY_CAUSES = {
    "gateway_bottleneck",
    "stale_backend",
    "probe_restart_loop",
    "rate_limit_misconfigured",
    "long_prompt_surge",
    "traffic_burst",
    "long_output_shift",
    "prefix_cache_miss",
    "prefill_interference",
    "batch_oversized",
    "kv_pressure",
    "gpu_throttling",
    "gpu_fault",
    "engine_oom",
    "replica_down",
    "routing_imbalance",
    "capacity_shortage",
    "rollout_disruption",
    "token_volume_growth",
    "price_change",
    "version_change",
    "fallback_active",
    "length_truncation",
}
VOCABULARY_FORBIDDEN = {
    "scale_out",
    "tune_sampling",
    "raise_gpu_memory_utilization",
    "raise_max_num_seqs",
    "force_prefix_cache",
    "gateway_prompt_assembly",
    "average_latency_sla",
    "blind_retry_streaming",
}


def bundled() -> dict[str, str]:
    return {p.name: p.read_text() for p in sorted((ROOT / "playbooks").glob("*.yaml"))}


def load(files: dict[str, str], first: bool = False):  # type: ignore[no-untyped-def]
    return load_knowledge([parse_yaml(text, name) for name, text in files.items()], stop_at_first=first)


def problems(files: dict[str, str]) -> list[str]:
    with pytest.raises(InputErrors) as err:
        load(files)
    return [str(p) for p in err.value.problems]


def test_bundled_playbooks_cover_the_vocabulary() -> None:
    kb = load_knowledge(read_playbook_documents(ROOT / "playbooks"))
    assert set(kb.symptoms) >= set(SYMPTOMS)
    assert set(kb.causes) >= VOCABULARY_CAUSES
    assert set(kb.forbidden) >= VOCABULARY_FORBIDDEN
    assert kb.forbidden["scale_out"].unless_top_cause == ("capacity_shortage",)
    for cause in kb.causes.values():
        for section in (cause.requires, cause.supports, cause.against):
            for check in iter_checks(section):
                assert all(s in SIGNALS for s in check.signals())
        for action in cause.first_actions:
            assert kb.actions[action].confirm, f"{action} has nothing that confirms it"


def edit(name: str, old: str, new: str) -> dict[str, str]:
    files = bundled()
    assert old in files[name], old
    files[name] = files[name].replace(old, new, 1)
    return files


def test_unknown_key_with_line_and_hint() -> None:
    files = edit(
        "causes-resource.yaml", "    mechanism: >-\n      KV blocks", "    mechanisn: >-\n      KV blocks"
    )
    found = problems(files)
    assert len(found) == 1
    line = files["causes-resource.yaml"].splitlines().index("    mechanisn: >-") + 1
    assert found[0] == (
        f"causes-resource.yaml:{line}: causes.kv_pressure.mechanisn: unknown key (did you mean mechanism?)"
    )


def test_unknown_check_kind_is_a_closed_set() -> None:
    found = problems(
        edit(
            "causes-request.yaml",
            "{kind: rise, signal: truncated_ratio",
            "{kind: grows, signal: truncated_ratio",
        )
    )
    assert any("causes.length_truncation.requires[0].kind: Input should be" in p for p in found), found


def test_check_parameters_fit_their_kind() -> None:
    found = problems(
        edit(
            "causes-request.yaml",
            "{kind: rise, signal: truncated_ratio, factor: 2.0, min_delta: 0.02}",
            "{kind: rise, signal: truncated_ratio, threshold: 3}",
        )
    )
    assert any("a rise check takes no threshold" in p for p in found), found


def test_unknown_signal_with_hint() -> None:
    found = problems(
        edit(
            "causes-request.yaml",
            "signal: truncated_ratio, factor: 2.0",
            "signal: truncated_rato, factor: 2.0",
        )
    )
    assert any(
        "requires[0].signal: unknown signal 'truncated_rato' (did you mean truncated_ratio?)" in p
        for p in found
    ), found


def test_unknown_cause_referenced_by_a_symptom() -> None:
    found = problems(
        edit(
            "symptoms.yaml",
            "engine: [prefix_cache_miss, batch_oversized, engine_stalled",
            "engine: [prefix_cache_mis, batch_oversized, engine_stalled",
        )
    )
    assert any(
        "symptoms.ttft_slow.layers.engine[0]: unknown cause 'prefix_cache_mis' "
        "(did you mean prefix_cache_miss?)" in p
        for p in found
    ), found


def test_cause_listed_under_the_wrong_layer() -> None:
    found = problems(
        edit(
            "symptoms.yaml",
            "request: [length_truncation]\n      supply: [version_change, fallback_active, replica_down]",
            "request: [length_truncation, version_change]\n      supply: [fallback_active, replica_down]",
        )
    )
    assert any("belongs to layer supply, not request" in p for p in found), found


def test_unreachable_cause() -> None:
    found = problems(
        edit(
            "symptoms.yaml",
            "      engine: [prefix_cache_miss]\n      supply: [price_change]\n",
            "      engine: [prefix_cache_miss]\n",
        )
    )
    assert any("causes.price_change: no symptom leads to this cause" in p for p in found), found


def test_action_both_advised_and_forbidden() -> None:
    found = problems(
        edit(
            "causes-supply.yaml",
            "first_actions: [confirm_capacity_at_slo, add_replicas_by_capacity_math]",
            "first_actions: [confirm_capacity_at_slo, scale_out]",
        )
    )
    assert any(
        "first_actions[1]: 'scale_out' is a forbidden action; it cannot be advised" in p for p in found
    ), found


def test_unknown_action() -> None:
    found = problems(
        edit(
            "causes-supply.yaml",
            "first_actions: [pause_rollout, check_graceful_shutdown]",
            "first_actions: [pause_rollout, check_graceful_shutdwn]",
        )
    )
    assert any(
        "unknown action 'check_graceful_shutdwn' (did you mean check_graceful_shutdown?)" in p for p in found
    )


def test_explains_cycle() -> None:
    found = problems(
        edit(
            "causes-resource.yaml",
            "    first_actions: [find_kv_consumer",
            "    explains: [batch_oversized]\n    first_actions: [find_kv_consumer",
        )
    )
    assert any("explains forms a cycle: " in p for p in found), found


def test_duplicate_id_across_files() -> None:
    files = bundled()
    files["zz-extra.yaml"] = "schema_version: 1\nactions:\n  compare_replicas: {text: again}\n"
    found = problems(files)
    assert found == [
        f"zz-extra.yaml:3: actions.compare_replicas: already defined at actions.yaml:"
        f"{files['actions.yaml'].splitlines().index('  compare_replicas:') + 1}"
    ]


def test_schema_version_is_required_and_checked() -> None:
    files = bundled()
    files["zz.yaml"] = "actions: {}\n"
    assert any("zz.yaml:1: schema_version: missing" in p for p in problems(files))
    files["zz.yaml"] = "schema_version: 2\n"
    assert any("this version reads schema_version 1, got 2" in p for p in problems(files))


def test_missing_symptom_of_the_vocabulary() -> None:
    files = bundled()
    text = files["symptoms.yaml"]
    files["symptoms.yaml"] = text[: text.index("  quality_down:")]
    found = problems(files)
    assert any("symptom 'quality_down' of the vocabulary has no playbook" in p for p in found)


def test_collect_all_or_stop_at_first() -> None:
    files = edit(
        "causes-request.yaml", "signal: output_tokens_p95, factor: 1.4", "signal: nope_a, factor: 1.4"
    )
    files["causes-engine.yaml"] = files["causes-engine.yaml"].replace(
        "signal: prefix_hit_ratio, factor: 0.75", "signal: nope_b, factor: 0.75", 1
    )
    assert len(problems(files)) == 2
    with pytest.raises(InputErrors) as err:
        load(files, first=True)
    assert len(err.value.problems) == 1


def test_change_checks_read_info_signals_only() -> None:
    found = problems(
        edit(
            "causes-supply.yaml",
            "- {kind: change, signal: build_info, key: true}",
            "- {kind: change, signal: request_rate, key: true}",
        )
    )
    assert any("a change check reads an info signal" in p for p in found), found


def test_alert_symptom_patterns_are_validated() -> None:
    found = problems(edit("settings.yaml", "symptom: cost_up}", "symptom: cost_upp}"))
    assert any("settings.alert_symptoms[2].symptom: unknown symptom 'cost_upp'" in p for p in found), found
    found = problems(edit("settings.yaml", "{match: 'spend|cost", "{match: '(spend|cost"))
    assert any("settings.alert_symptoms[2]: match is not a valid regular expression" in p for p in found), (
        found
    )


def test_a_forbidden_reason_per_cause_names_a_known_cause() -> None:
    found = problems(edit("forbidden.yaml", "      gateway_bottleneck: >-", "      gateway_bottlenek: >-"))
    assert any(
        "forbidden.scale_out.because.gateway_bottlenek: unknown cause 'gateway_bottlenek' "
        "(did you mean gateway_bottleneck?)" in p
        for p in found
    ), found


def test_shortfall_of_several_signals_are_each_checked() -> None:
    found = problems(
        edit(
            "causes-edge.yaml",
            "of: [requests_running, queue_waiting], factor: 0.8, note",
            "of: [requests_running, queue_wating], factor: 0.8, note",
        )
    )
    assert any("unknown signal 'queue_wating' (did you mean queue_waiting?)" in p for p in found), found


def test_not_and_key_are_check_options_any_kind_takes() -> None:
    kb = load(bundled())
    probe = kb.causes["probe_restart_loop"]
    assert [c.key for c in probe.requires][:1] == [True]
    assert any(getattr(c, "not_", False) for c in probe.requires)
    found = problems(
        edit("causes-edge.yaml", "signal: probe_failures, key: true", "signal: probe_failures, key: maybe")
    )
    assert any("key" in p for p in found), found


def test_floors_name_known_signals() -> None:
    found = problems(edit("settings.yaml", "    request_rate: 0.5", "    request_rat: 0.5"))
    assert any(
        "settings.floors.request_rat: unknown signal 'request_rat' (did you mean request_rate?)" in p
        for p in found
    ), found


def test_symptom_is_takes_values_only() -> None:
    found = problems(
        edit("causes-supply.yaml", "{kind: symptom_is, values: [quality_down]}", "{kind: symptom_is}")
    )
    assert any("a symptom_is check needs values" in p for p in found), found
