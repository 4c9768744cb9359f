"""`triage capacity`: the chapter's capacity-planning method, number by number.

The expected values are worked out by hand here (layers × KV heads × head dim × 2 × bytes;
params × bytes ÷ tp; the chapter's 30 ÷ 4 example), never read back from the module.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from signals.errors import InputError, InputErrors
from signals.frame import Series, SignalFrame, build_frame, labels_of
from signals.yamldoc import parse_yaml
from triage.capacity.calculator import CapacityInputs, plan, replicas_needed
from triage.capacity.inputs import load_inputs, parse_inputs
from triage.capacity.measure import measure_rate_at_slo, measured_rate_at_slo
from triage.capacity.memory import concurrency_ceiling, kv_bytes_per_token, memory_budget
from triage.capacity.presets import GPU_PRESETS, MODEL_PRESETS
from triage.capacity.render import render_presets, render_text
from triage.capacity.specs import GIB, MIB, CapacityError, ModelSpec
from triage.cli.capacity import CAPACITY_EXAMPLE

LLAMA_8B = MODEL_PRESETS["llama-3.1-8b"]
LLAMA_70B = MODEL_PRESETS["llama-3.1-70b"]
H100 = GPU_PRESETS["h100-80gb"]


def _dense(name: str, layers: int, heads: int, kv_heads: int, head_dim: int = 128) -> ModelSpec:
    return ModelSpec(name, layers, heads * head_dim, heads, kv_heads, head_dim, 7_000_000_000)


# --- the chapter's worked example ----------------------------------------------------------------


def test_chapter_example_30_rps_at_4_per_replica_needs_8_then_9_or_10() -> None:
    one = replicas_needed(30, 4)
    assert (one.ratio, one.base, one.redundancy, one.replicas) == (7.5, 8, 1, 9)
    two = replicas_needed(30, 4, redundancy=2)
    assert (two.base, two.replicas) == (8, 10)
    assert replicas_needed(30, 4, redundancy=0).replicas == 8


def test_chapter_example_through_the_plan_counts_gpus_per_tp_group() -> None:
    inputs = CapacityInputs(LLAMA_8B, H100, peak_rate=30, per_replica_rate=4)
    result = plan(inputs)
    assert result.replicas is not None and result.replicas.replicas == 9 and result.gpus == 9
    text = render_text(result)
    assert "30 req/s peak ÷ 4 req/s per replica at SLO = 7.5 → 8, + 1 redundancy = 9 replicas" in text
    wide = plan(CapacityInputs(LLAMA_70B, H100, tp=4, peak_rate=30, per_replica_rate=4, redundancy=2))
    assert wide.gpus == 10 * 4


def test_replicas_round_up_exact_ratios_without_float_noise() -> None:
    assert 0.9 / 0.03 > 30  # the float noise the rounding guards against
    assert replicas_needed(0.9, 0.03, redundancy=0).base == 30
    assert replicas_needed(8, 4, redundancy=0).base == 2
    assert replicas_needed(8.01, 4, redundancy=0).base == 3
    assert replicas_needed(0.5, 4, redundancy=0).base == 1


def test_replica_inputs_must_be_positive() -> None:
    with pytest.raises(CapacityError) as caught:
        replicas_needed(30, 0, redundancy=-1)
    assert {key for key, _ in caught.value.problems} == {"per_replica_rate", "redundancy"}


# --- KV bytes per token --------------------------------------------------------------------------


def test_kv_bytes_per_token_llama_3_1_by_hand() -> None:
    assert kv_bytes_per_token(LLAMA_8B, "fp16") == 32 * 8 * 128 * 2 * 2 == 131072
    assert kv_bytes_per_token(LLAMA_70B, "bf16") == 80 * 8 * 128 * 2 * 2 == 327680


def test_kv_quantisation_scales_the_bytes() -> None:
    assert kv_bytes_per_token(LLAMA_8B, "fp8") == 131072 // 2
    assert kv_bytes_per_token(LLAMA_70B, "int8") == 327680 // 2
    assert kv_bytes_per_token(LLAMA_8B, "int4") == 131072 // 4
    assert kv_bytes_per_token(LLAMA_8B, "auto") == 131072
    assert kv_bytes_per_token(LLAMA_8B, "auto", weight_dtype="fp32") == 131072 * 2
    assert kv_bytes_per_token(LLAMA_8B, "auto", weight_dtype="int4") == 131072  # AWQ computes in fp16
    with pytest.raises(CapacityError, match="kv_dtype: unknown 'fp9'"):
        kv_bytes_per_token(LLAMA_8B, "fp9")


def test_fp8_kv_doubles_the_concurrency_ceiling() -> None:
    base = plan(CapacityInputs(LLAMA_8B, H100, kv_dtype="bf16"))
    fp8 = plan(CapacityInputs(LLAMA_8B, H100, kv_dtype="fp8"))
    assert fp8.kv_bytes_per_token * 2 == base.kv_bytes_per_token
    assert fp8.concurrency in (2 * base.concurrency, 2 * base.concurrency + 1)
    assert any("golden set" in note for note in fp8.notes)


def test_mqa_gqa_mha_differ_by_their_kv_heads() -> None:
    mha = _dense("mha", 32, 32, 32)  # Llama-2-7B's shape
    gqa = _dense("gqa", 32, 32, 8)
    mqa = _dense("mqa", 32, 32, 1)
    assert kv_bytes_per_token(mha, "fp16") == 32 * 32 * 128 * 2 * 2 == 524288
    assert kv_bytes_per_token(gqa, "fp16") == 524288 // 4
    assert kv_bytes_per_token(mqa, "fp16") == 524288 // 32 == 16384
    assert (mha.attention, gqa.attention, mqa.attention) == ("MHA", "GQA", "MQA")


# --- memory budget -------------------------------------------------------------------------------


def test_budget_splits_into_the_four_parts() -> None:
    b = memory_budget(LLAMA_8B, H100)
    assert b.total_bytes == 81559 * MIB
    assert b.budget_bytes == math.floor(81559 * MIB * 0.90)
    assert b.weights_bytes == 8_030_261_248 * 2
    assert b.overhead_bytes == 2 * GIB
    assert b.activation_bytes == math.floor(b.budget_bytes * 0.05)
    assert b.weights_bytes + b.activation_bytes + b.overhead_bytes + b.kv_bytes == b.budget_bytes
    assert b.shortfall_bytes == 0


def test_llama_8b_on_h100_at_4k_context() -> None:
    result = plan(CapacityInputs(LLAMA_8B, H100, context_tokens=4096))
    kv = (
        math.floor(81559 * MIB * 0.9)
        - 16_060_522_496
        - math.floor(math.floor(81559 * MIB * 0.9) * 0.05)
        - 2 * GIB
    )
    assert result.budget.kv_bytes == kv
    assert result.kv_bytes_per_request_per_gpu == 4096 * 131072 == 512 * MIB
    assert result.concurrency == kv // (512 * MIB) == 102
    assert result.fits and result.warnings == ()


def test_tensor_parallel_divides_weights_and_shards_kv_heads() -> None:
    one = memory_budget(LLAMA_70B, H100, tp=1)
    two = memory_budget(LLAMA_70B, H100, tp=2)
    four = memory_budget(LLAMA_70B, H100, tp=4)
    assert one.weights_bytes == 70_553_706_496 * 2
    assert two.weights_bytes == 70_553_706_496
    assert four.weights_bytes == 70_553_706_496 // 2
    assert kv_bytes_per_token(LLAMA_70B, "bf16", tp=4) == 327680 // 4
    assert kv_bytes_per_token(LLAMA_70B, "bf16", tp=8) == 327680 // 8


def test_mqa_under_tensor_parallel_replicates_its_head() -> None:
    mqa = _dense("mqa", 32, 32, 1)
    assert kv_bytes_per_token(mqa, "fp16", tp=4) == kv_bytes_per_token(mqa, "fp16")
    result = plan(CapacityInputs(mqa, H100, tp=4))
    assert any("replica" in w for w in result.warnings)


def test_tp_must_split_the_heads() -> None:
    with pytest.raises(CapacityError, match="tp: 3 does not divide"):
        CapacityInputs(LLAMA_8B, H100, tp=3)


def test_model_that_does_not_fit_is_reported_not_negative() -> None:
    result = plan(CapacityInputs(LLAMA_70B, H100, peak_rate=30, per_replica_rate=4))
    assert not result.fits and result.concurrency == 0
    assert result.budget.kv_bytes == 0 and result.budget.shortfall_bytes > 0
    assert (result.smallest_tp, result.smallest_tp_fp8) == (4, 2)
    assert result.replicas is None and result.gpus is None
    why = result.why_not()
    assert "exceed the 71.68 GiB budget per GPU" in why and "fp8 weights at tp 2 or tp 4 at bf16" in why
    text = render_text(result)
    assert "DOES NOT FIT" in text and "REPLICAS  not planned" in text
    assert not any(part.startswith("-") and part[1:2].isdigit() for part in text.split())
    assert json.loads(json.dumps(result.to_json()))["fits"] is False


def test_context_too_long_for_the_kv_left_is_reported() -> None:
    l40s = GPU_PRESETS["l40s-48gb"]
    assert plan(CapacityInputs(LLAMA_8B, l40s, context_tokens=131072)).concurrency >= 1
    result = plan(CapacityInputs(LLAMA_8B, l40s, context_tokens=262144))
    assert not result.fits and result.budget.kv_bytes > 0
    assert "less than one request of 262,144 tokens" in result.why_not()


def test_mixtral_keeps_every_expert_resident() -> None:
    mixtral = MODEL_PRESETS["mixtral-8x7b"]
    assert (mixtral.experts, mixtral.experts_per_token) == (8, 2)
    one = plan(CapacityInputs(mixtral, H100))
    assert one.budget.weights_bytes == 46_702_792_704 * 2  # all 8 experts, not the 12.9B active
    assert not one.fits and one.smallest_tp == 2
    assert any("all 8 experts are resident" in n for n in plan(CapacityInputs(mixtral, H100, tp=2)).notes)


# --- the red line --------------------------------------------------------------------------------


@pytest.mark.parametrize(("utilization", "warned"), [(0.90, False), (0.95, False), (0.96, True), (1.0, True)])
def test_utilization_above_the_red_line_warns(utilization: float, warned: bool) -> None:
    result = plan(CapacityInputs(LLAMA_8B, H100, gpu_memory_utilization=utilization))
    assert any("red line" in w for w in result.warnings) is warned
    assert ("! gpu_memory_utilization" in render_text(result)) is warned


def test_utilization_above_one_is_an_error() -> None:
    with pytest.raises(CapacityError, match="gpu_memory_utilization"):
        CapacityInputs(LLAMA_8B, H100, gpu_memory_utilization=1.2)


# --- presets -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "vocab", "intermediate", "qkv_bias", "experts"),
    [
        ("llama-3.1-8b", 128256, 14336, False, 1),
        ("llama-3.1-70b", 128256, 28672, False, 1),
        ("qwen2.5-7b", 152064, 18944, True, 1),
        ("qwen2.5-72b", 152064, 29568, True, 1),
        ("mixtral-8x7b", 32000, 14336, False, 8),
    ],
)
def test_preset_params_follow_from_the_published_config(
    name: str, vocab: int, intermediate: int, qkv_bias: bool, experts: int
) -> None:
    m = MODEL_PRESETS[name]
    kv = m.kv_heads * m.head_dim
    attention = 2 * m.hidden_size * m.attention_heads * m.head_dim + 2 * m.hidden_size * kv
    bias = (m.attention_heads * m.head_dim + 2 * kv) if qkv_bias else 0
    mlp = experts * 3 * m.hidden_size * intermediate + (m.hidden_size * experts if experts > 1 else 0)
    layer = attention + bias + mlp + 2 * m.hidden_size
    total = m.layers * layer + m.hidden_size + 2 * vocab * m.hidden_size  # untied embeddings
    assert m.params == total
    assert m.head_dim == 128 and m.hidden_size % m.attention_heads == 0


def test_gpu_presets_are_driver_bytes_not_marketing_gb() -> None:
    assert GPU_PRESETS["a100-40gb"].memory_bytes == 40 * GIB
    assert GPU_PRESETS["a100-80gb"].memory_bytes == 80 * GIB
    assert GPU_PRESETS["h100-80gb"].memory_bytes == 81559 * MIB < 80 * GIB
    assert GPU_PRESETS["h200-141gb"].memory_bytes == 143771 * MIB
    assert 141 * 10**9 < GPU_PRESETS["h200-141gb"].memory_bytes < 141 * GIB
    assert 48 * 10**9 < GPU_PRESETS["l40s-48gb"].memory_bytes < 48 * GIB  # ECC takes its share
    listing = render_presets()
    assert all(name in listing for name in [*MODEL_PRESETS, *GPU_PRESETS])


# --- the per-replica rate measured from a frame ----------------------------------------------------


def _frame(rows: dict[str, dict[str, list[float]]]) -> SignalFrame:
    steps = len(next(iter(next(iter(rows.values())).values())))
    series = [
        Series(signal, labels_of({"instance": replica}), np.asarray(values, dtype=np.float64))
        for replica, signals in rows.items()
        for signal, values in signals.items()
    ]
    return build_frame([1_700_000_000.0 + 60 * i for i in range(steps)], series, "synthetic")


def test_measured_rate_is_the_highest_rate_within_both_slos() -> None:
    nan = float("nan")
    frame = _frame(
        {
            "a:8000": {
                "request_rate": [1, 2, 3, 4, 5, 9],
                "ttft_p99_seconds": [0.3, 0.4, 0.6, 0.9, 1.6, nan],  # 9 req/s: TTFT unknown, not "fine"
                "tpot_p99_seconds": [0.02, 0.02, 0.03, 0.04, 0.06, 0.03],
            },
            "b:8000": {
                "request_rate": [2, 3.5, 4.5, 6, 2, 2],
                "ttft_p99_seconds": [0.3, 0.5, 0.8, 0.9, 0.3, 0.3],
                "tpot_p99_seconds": [0.02, 0.03, 0.07, 0.08, 0.02, 0.02],  # 4.5 breaches TPOT
            },
        }
    )
    found = measure_rate_at_slo(frame, ttft_slo=1.0, tpot_slo=0.05)
    assert found is not None
    assert (found.rate, found.replica, found.at, found.lower_bound) == (4.0, "a:8000", 1_700_000_180.0, False)
    assert measured_rate_at_slo(frame) == 4.0
    assert measured_rate_at_slo(frame, ttft_slo=0.5) == 3.5


def test_measured_rate_is_a_lower_bound_when_nothing_breached() -> None:
    frame = _frame(
        {"a": {"request_rate": [1, 2], "ttft_p99_seconds": [0.2, 0.3], "tpot_p99_seconds": [0.02, 0.02]}}
    )
    found = measure_rate_at_slo(frame)
    assert found is not None and found.rate == 2.0 and found.lower_bound
    assert "lower bound" in found.describe()


def test_measured_rate_is_none_without_latency_or_within_slo_steps() -> None:
    no_tpot = _frame({"a": {"request_rate": [1, 2], "ttft_p99_seconds": [0.2, 0.3]}})
    assert measured_rate_at_slo(no_tpot) is None
    all_slow = _frame(
        {"a": {"request_rate": [1, 2], "ttft_p99_seconds": [2.0, 3.0], "tpot_p99_seconds": [0.02, 0.02]}}
    )
    assert measured_rate_at_slo(all_slow) is None


# --- inputs: YAML file and flags -----------------------------------------------------------------


def _write(tmp_path: Path, text: str) -> str:
    path = tmp_path / "capacity.yaml"
    path.write_text(text, encoding="utf-8")
    return str(path)


def _problems(path: str, flags: dict[str, object] | None = None) -> list[str]:
    with pytest.raises(InputErrors) as caught:
        load_inputs(path, flags)
    return [str(p) for p in caught.value.problems]


def test_yaml_file_reads_every_key(tmp_path: Path) -> None:
    path = _write(
        tmp_path,
        "schema_version: 1\nmodel: Llama-3.1-70B\ngpu: h200-141gb\ntp: 2\nweight_dtype: fp8\nkv_dtype: fp8\n"
        "prompt_tokens: 3000\noutput_tokens: 1096\ngpu_memory_utilization: 0.92\nactivation_fraction: 0.04\n"
        "overhead_gib: 1.5\nblock_size: 32\npeak_rate: 30\nper_replica_rate: 4\nredundancy: 2\n",
    )
    inputs = load_inputs(path)
    assert inputs.model is LLAMA_70B and inputs.gpu is GPU_PRESETS["h200-141gb"]
    assert (inputs.tp, inputs.weight_dtype, inputs.kv_dtype, inputs.context_tokens) == (2, "fp8", "fp8", 4096)
    assert inputs.overhead_bytes == int(1.5 * GIB) and inputs.block_size == 32 and inputs.redundancy == 2
    assert plan(inputs).gpus == 10 * 2


def test_yaml_custom_model_and_gpu_with_explicit_units(tmp_path: Path) -> None:
    path = _write(
        tmp_path,
        "model:\n  name: tiny-mqa\n  layers: 24\n  hidden_size: 2048\n  attention_heads: 16\n  kv_heads: 1\n"
        "  params: 1.3e9\ngpu:\n  name: lab-card\n  memory_gib: 24\n",
    )
    inputs = load_inputs(path)
    assert (
        inputs.model.head_dim == 128 and inputs.model.params == 1_300_000_000
    )  # "1.3e9" is text in YAML 1.1
    assert inputs.gpu.memory_bytes == 24 * GIB
    assert kv_bytes_per_token(inputs.model, "fp16") == 24 * 1 * 128 * 2 * 2


def test_yaml_errors_are_located_and_all_reported(tmp_path: Path) -> None:
    path = _write(
        tmp_path,
        "model: llama-3.1-8\n"  # 1: unknown preset
        "gpu: h100-80gb\n"
        "gpu_memory_utilisation: 0.9\n"  # 3: typo
        "tp: two\n"  # 4: not a number
        "peak_rate: -3\n",  # 5: CapacityInputs rejects it after parsing
    )
    problems = _problems(path)
    assert problems[0] == (
        f"{path}:1: model: unknown model preset 'llama-3.1-8' (did you mean llama-3.1-8b?); "
        "presets: llama-3.1-8b, llama-3.1-70b, qwen2.5-7b, qwen2.5-72b, mixtral-8x7b"
    )
    assert problems[1].startswith(
        f"{path}:3: gpu_memory_utilisation: unknown key (did you mean gpu_memory_utilization?)"
    )
    assert problems[2] == f"{path}:4: tp: expected a number, got the text 'two'"
    assert len(problems) == 3  # peak_rate is checked once the file parses


def test_yaml_range_and_cross_field_errors_point_at_their_lines(tmp_path: Path) -> None:
    path = _write(tmp_path, "model: llama-3.1-8b\ngpu: h100-80gb\ntp: 3\npeak_rate: -3\n")
    assert _problems(path) == [
        f"{path}:3: tp: 3 does not divide llama-3.1-8b's 32 attention heads",
        f"{path}:4: peak_rate: must be a positive number of requests per second",
    ]
    nested = _write(
        tmp_path,
        "model:\n  name: x\n  layers: 32\n  hidden_size: 4096\n  attention_heads: 32\n  kv_heads: 6\n"
        "  params: 7000000000\n  vocab: 32000\ngpu: {name: g, memory_gb: 80, memory_gib: 80}\n",
    )
    allowed = (
        "name, layers, hidden_size, attention_heads, kv_heads, head_dim, params, experts, experts_per_token"
    )
    assert _problems(nested) == [
        f"{nested}:6: model.kv_heads: must divide attention_heads (32)",
        f"{nested}:8: model.vocab: unknown key; allowed: {allowed}",
        f"{nested}:9: gpu: give exactly one of memory_bytes, memory_gib (2^30 bytes) "
        "or memory_gb (10^9 bytes)",
    ]


def test_yaml_missing_and_conflicting_keys(tmp_path: Path) -> None:
    path = _write(tmp_path, "context_tokens: 4096\nprompt_tokens: 1000\noutput_tokens: 200\n")
    problems = _problems(path)
    assert (
        f"{path}:1: context_tokens: give context_tokens or prompt_tokens + output_tokens, not both"
        in problems
    )
    assert any(p.startswith(f"{path}:1: model: required") for p in problems)
    assert any(p.startswith(f"{path}:1: gpu: required") for p in problems)
    with pytest.raises(InputError, match="no such file"):
        load_inputs(str(tmp_path / "missing.yaml"))


def test_flags_override_the_file_and_their_errors_name_the_flag(tmp_path: Path) -> None:
    path = _write(tmp_path, "model: llama-3.1-8b\ngpu: a100-40gb\ncontext_tokens: 8192\n")
    inputs = load_inputs(path, {"gpu": "h100-80gb", "tp": None, "context_tokens": 4096})
    assert inputs.gpu is H100 and inputs.tp == 1 and inputs.context_tokens == 4096
    assert _problems(path, {"tp": 3}) == [
        "command line:0: --tp: 3 does not divide llama-3.1-8b's 32 attention heads"
    ]
    with pytest.raises(InputErrors) as caught:
        parse_inputs(None, {"model": "llama-3.1-8b", "gpu": "h100", "kv_dtype": "fp9"})
    assert [str(p) for p in caught.value.problems] == [
        "command line:0: --gpu: unknown GPU preset 'h100' (did you mean h100-80gb?); "
        "presets: a100-40gb, a100-80gb, h100-80gb, h200-141gb, l40s-48gb",
        "command line:0: --kv-dtype: unknown 'fp9' (did you mean fp8?); "
        "one of auto, fp16, bf16, fp8, fp8_e4m3, fp8_e5m2, int8, int4",
    ]


def test_the_documented_example_file_is_valid() -> None:
    inputs = parse_inputs(parse_yaml(CAPACITY_EXAMPLE, "example.yaml"))
    assert inputs.model is LLAMA_8B and plan(inputs).gpus == 9


def test_yaml_that_is_not_a_mapping() -> None:
    with pytest.raises(InputErrors, match="a capacity file is a mapping"):
        parse_inputs(parse_yaml("- model\n", "c.yaml"))


def test_plan_json_is_serialisable() -> None:
    result = plan(CapacityInputs(LLAMA_8B, H100, peak_rate=30, per_replica_rate=4))
    data = json.loads(json.dumps(result.to_json()))
    assert data["kv"]["bytes_per_token"] == 131072 and data["concurrency_ceiling"] == 102
    assert data["replicas"]["replicas"] == 9 and data["gpus"] == 9


# --- properties ----------------------------------------------------------------------------------


@given(
    kv=st.integers(min_value=0, max_value=200 * GIB),
    per_token=st.integers(min_value=1, max_value=4 * MIB),
    context=st.integers(min_value=1, max_value=1_000_000),
)
def test_concurrency_ceiling_is_the_floor_of_whole_requests(kv: int, per_token: int, context: int) -> None:
    ceiling = concurrency_ceiling(kv, per_token, context)
    per_request = -(-context // 16) * 16 * per_token
    assert ceiling * per_request <= kv < (ceiling + 1) * per_request


@given(
    layers=st.integers(1, 128),
    kv_heads=st.sampled_from([1, 2, 4, 8, 16, 32]),
    head_dim=st.sampled_from([64, 80, 96, 128, 256]),
)
def test_kv_bytes_scale_with_precision(layers: int, kv_heads: int, head_dim: int) -> None:
    model = ModelSpec("m", layers, 32 * head_dim, 32, kv_heads, head_dim, 1)
    fp16 = kv_bytes_per_token(model, "fp16")
    assert fp16 == layers * kv_heads * head_dim * 4
    assert kv_bytes_per_token(model, "fp8") * 2 == fp16 == kv_bytes_per_token(model, "int4") * 4
