"""The deployment checklist as data: `triage/audit/checklist.yaml` and its loader.

The bundled file must be the seeds' checklist, section by section and line by line, with
a registered check for every item and an item for every check. A broken file must be
refused with `file:line: key: message`, one line per problem, like a broken playbook.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from signals.errors import InputError, InputErrors
from signals.yamldoc import parse_yaml, read_yaml
from triage.audit.checklist import BUNDLED, bundled_checklist, load_checklist
from triage.audit.checks import CHECKS
from triage.audit.checks.base import Registry, not_visible
from triage.audit.model import Checklist

SEEDS = Path(__file__).resolve().parents[2].parent / "shared" / "seeds"

VALID = """\
schema_version: 1
sections:
  - id: capacity
    title: Capacity and memory
    original: 容量与显存
  - id: red_lines
    title: Red lines
    original: 红线
items:
  - id: capacity.memory_budget
    section: capacity
    title: GPU memory budgeted in four parts
    original: 算过权重、KV、激活、固定开销四部分显存。
    settle: the written budget
    fix: Write the budget.
  - id: red_lines.mean_latency_sla
    section: red_lines
    title: Never use mean latency instead of P99 for the SLA
    original: 不用平均延迟代替 P99 做 SLA。
    settle: the alerting rules
    fix: Alert on P99.
"""
# Lines of VALID: 3 and 6 open the sections, 9 is `items:`, 10 and 16 open the items.
REGISTERED = frozenset({"capacity.memory_budget", "red_lines.mean_latency_sla"})


def load(text: str, checks: frozenset[str] = REGISTERED, stop_at_first: bool = False) -> Checklist:
    return load_checklist(parse_yaml(text, "bad.yaml"), checks, stop_at_first)


def problems(text: str, checks: frozenset[str] = REGISTERED) -> list[str]:
    with pytest.raises(InputErrors) as caught:
        load(text, checks)
    return [str(p) for p in caught.value.problems]


# --- a valid file -----------------------------------------------------------------------------------


def test_a_valid_file_loads_in_its_order() -> None:
    checklist = load(VALID)
    assert [(s.id, s.title, s.original) for s in checklist.sections] == [
        ("capacity", "Capacity and memory", "容量与显存"),
        ("red_lines", "Red lines", "红线"),
    ]
    assert [i.id for i in checklist.items] == ["capacity.memory_budget", "red_lines.mean_latency_sla"]
    first = checklist.items[0]
    assert (first.section, first.title, first.original, first.settle, first.fix) == (
        "capacity",
        "GPU memory budgeted in four parts",
        "算过权重、KV、激活、固定开销四部分显存。",
        "the written budget",
        "Write the budget.",
    )


# --- each kind of bad input, as file:line: key: message ---------------------------------------------


def _replace(old: str, new: str) -> Callable[[str], str]:
    def edit(text: str) -> str:
        assert old in text
        return text.replace(old, new, 1)

    return edit


BAD: list[tuple[str, Callable[[str], str], frozenset[str], list[str]]] = [
    (
        "unknown key",
        _replace("    fix: Write the budget.\n", "    fix: Write the budget.\n    colour: red\n"),
        REGISTERED,
        ["bad.yaml:16: items[0].colour: unknown key"],
    ),
    (
        "misspelt key: unknown, and the real one missing",
        _replace("    settle: the written budget\n", "    setle: the written budget\n"),
        REGISTERED,
        [
            "bad.yaml:10: items[0].settle: Field required",
            "bad.yaml:14: items[0].setle: unknown key (did you mean settle?)",
        ],
    ),
    (
        "missing key",
        _replace("    fix: Alert on P99.\n", ""),
        REGISTERED,
        ["bad.yaml:16: items[1].fix: Field required"],
    ),
    (
        "wrong type: a number for a text",
        _replace("    title: GPU memory budgeted in four parts\n", "    title: 3\n"),
        REGISTERED,
        ["bad.yaml:12: items[0].title: Input should be a valid string"],
    ),
    (
        "wrong type: an empty text",
        _replace("    original: 红线\n", '    original: ""\n'),
        REGISTERED,
        ["bad.yaml:8: sections[1].original: String should have at least 1 character"],
    ),
    (
        "wrong type: a mapping for the list of items",
        lambda text: text[: text.index("items:")] + "items: {capacity.memory_budget: yes}\n",
        frozenset(),
        ["bad.yaml:9: items: expected a list of items"],
    ),
    (
        "malformed id",
        _replace("  - id: red_lines\n", "  - id: Red Lines\n"),
        REGISTERED,
        ["bad.yaml:6: sections[1].id: an id is lower case letters, digits and _, like red_lines"],
    ),
    (
        "duplicate section id",
        _replace("  - id: red_lines\n    title: Red lines\n", "  - id: capacity\n    title: Red lines\n"),
        REGISTERED,
        [
            "bad.yaml:6: sections[1].id: duplicate id 'capacity', already defined at bad.yaml:3",
            "bad.yaml:17: items[1].section: unknown section 'red_lines'",
        ],
    ),
    (
        "duplicate item id",
        _replace(
            "  - id: red_lines.mean_latency_sla\n    section: red_lines\n",
            "  - id: capacity.memory_budget\n    section: capacity\n",
        ),
        frozenset({"capacity.memory_budget"}),
        [
            "bad.yaml:16: items[1].id: duplicate id 'capacity.memory_budget', already defined at bad.yaml:10",
        ],
    ),
    (
        "item in an unknown section",
        _replace("    section: red_lines\n", "    section: red_line\n"),
        REGISTERED,
        ["bad.yaml:17: items[1].section: unknown section 'red_line' (did you mean red_lines?)"],
    ),
    (
        "item filed under another section's id",
        _replace("  - id: red_lines.mean_latency_sla\n", "  - id: capacity.mean_latency_sla\n"),
        frozenset({"capacity.memory_budget", "capacity.mean_latency_sla"}),
        ["bad.yaml:16: items[1].id: an item in section 'red_lines' has an id starting 'red_lines.'"],
    ),
    (
        "item with no check",
        lambda text: text,
        frozenset({"capacity.memory_budget"}),
        [
            "bad.yaml:16: items[1].id: no check is registered for 'red_lines.mean_latency_sla' "
            "(in triage/audit/checks/)"
        ],
    ),
    (
        "check with no item",
        lambda text: text,
        REGISTERED | {"capacity.kv_per_token"},
        ["bad.yaml:9: items: the registered check 'capacity.kv_per_token' has no item"],
    ),
    (
        "schema_version missing",
        _replace("schema_version: 1\n", ""),
        REGISTERED,
        ["bad.yaml:1: schema_version: missing: the checklist states schema_version: 1"],
    ),
    (
        "not a mapping",
        lambda _text: "- capacity\n- red_lines\n",
        REGISTERED,
        ["bad.yaml:1: (document): a checklist is a mapping with schema_version, sections and items"],
    ),
]


@pytest.mark.parametrize(
    ("edit", "checks", "expected"), [case[1:] for case in BAD], ids=[case[0] for case in BAD]
)
def test_bad_input_is_refused_with_file_line_key_message(
    edit: Callable[[str], str], checks: frozenset[str], expected: list[str]
) -> None:
    assert problems(edit(VALID), checks) == expected


def test_every_problem_is_reported_or_only_the_first() -> None:
    text = VALID.replace("    section: red_lines\n", "    section: red_line\n")
    checks = REGISTERED | {"capacity.kv_per_token"}
    assert problems(text, checks) == [
        "bad.yaml:9: items: the registered check 'capacity.kv_per_token' has no item",
        "bad.yaml:17: items[1].section: unknown section 'red_line' (did you mean red_lines?)",
    ]
    with pytest.raises(InputErrors) as caught:
        load(text, checks, stop_at_first=True)
    assert [str(p) for p in caught.value.problems] == [
        "bad.yaml:17: items[1].section: unknown section 'red_line' (did you mean red_lines?)"
    ]


def test_yaml_that_does_not_parse_names_its_line() -> None:
    with pytest.raises(InputError) as caught:
        load(VALID.replace("    title: Red lines\n", "    title: [Red lines\n"))
    assert str(caught.value).startswith("bad.yaml:")
    assert ": (document): malformed YAML:" in str(caught.value)


# --- the bundled checklist --------------------------------------------------------------------------


def test_the_bundled_checklist_has_the_seeds_sections_in_order() -> None:
    checklist = bundled_checklist()
    assert [s.id for s in checklist.sections] == [
        "capacity",
        "scheduling",
        "cache",
        "quantization",
        "deployment",
        "nodes",
        "routing",
        "observability",
        "red_lines",
    ]
    assert [sum(1 for i in checklist.items if i.section == s.id) for s in checklist.sections] == [
        7, 7, 7, 6, 8, 8, 5, 5, 5,
    ]  # fmt: skip
    assert len(checklist.items) == 58
    assert checklist.items[0].id == "capacity.memory_budget"
    assert checklist.items[-1].id == "red_lines.gateway_prompt_logic"


def test_every_bundled_item_has_a_check_and_every_check_an_item() -> None:
    items = {item.id for item in bundled_checklist().items}
    assert set(CHECKS) == items
    load_checklist(read_yaml(str(BUNDLED)), CHECKS)  # the loader's own cross-check passes too


def test_items_no_metric_shows_are_registered_as_not_visible() -> None:
    for item_id in ("quantization.golden_set", "routing.fallback_timeouts", "deployment.startup_probe"):
        assert CHECKS[item_id] is not_visible
    assert CHECKS["red_lines.mean_latency_sla"] is not not_visible


def test_the_bundled_checklist_is_read_once() -> None:
    assert bundled_checklist() is bundled_checklist()


def test_the_bundled_texts_are_the_seeds_checklist_line_by_line() -> None:
    seeds = sorted(SEEDS.glob("*.txt")) if SEEDS.is_dir() else []
    seed = next((p for p in seeds if "推理部署检查清单" in p.read_text(encoding="utf-8")), None)
    if seed is None:
        pytest.skip(f"the seeds' deployment checklist is not beside the repository ({SEEDS})")
    lines = [line.strip() for line in seed.read_text(encoding="utf-8").splitlines()]
    originals = [line.removeprefix("• [ ] ") for line in lines if line.startswith("• [ ] ")]
    checklist = bundled_checklist()
    assert [item.original for item in checklist.items] == originals
    headings = [s.original for s in checklist.sections]
    assert [line for line in lines if line in headings] == headings


def test_a_broken_copy_of_the_bundled_file_names_its_path_and_line(tmp_path: Path) -> None:
    text = BUNDLED.read_text(encoding="utf-8")
    start = text.index("  - id: capacity.kv_per_token\n")
    end = text.index("  - id: capacity.gqa_quant_kv\n")
    broken = tmp_path / "checklist.yaml"
    broken.write_text(text[:start] + text[end:], encoding="utf-8")
    items_line = text[:start].count("\n", 0, text.index("\nitems:\n")) + 2
    with pytest.raises(InputErrors) as caught:
        load_checklist(read_yaml(str(broken)), CHECKS)
    assert [str(p) for p in caught.value.problems] == [
        f"{broken}:{items_line}: items: the registered check 'capacity.kv_per_token' has no item"
    ]


def test_a_registry_takes_only_its_own_section_and_one_check_per_item() -> None:
    registry = Registry("nodes")
    registry.not_visible("nodes.nccl_network")
    assert registry.table == {"nodes.nccl_network": not_visible}
    with pytest.raises(ValueError, match=r"capacity\.memory_budget is not an item of section nodes"):
        registry.check("capacity.memory_budget")
    with pytest.raises(ValueError, match=r"two checks for nodes\.nccl_network"):
        registry.not_visible("nodes.nccl_network")
