"""Safe YAML: positions, duplicate keys, and the guards against hostile documents."""

from __future__ import annotations

import subprocess
import sys

import pytest

from signals.errors import InputError
from signals.yamldoc import MAX_DEPTH, parse_yaml


def test_records_lines_of_keys_and_items() -> None:
    doc = parse_yaml("a: 1\nb:\n  - x\n  - y: 2\n", "f.yaml")
    assert doc.data == {"a": 1, "b": ["x", {"y": 2}]}
    assert doc.line(("b",)) == 2
    assert doc.line(("b", 1, "y")) == 4
    assert doc.line(("b", 1, "nope")) == 4  # falls back to the nearest known parent


def test_duplicate_key_is_an_error_not_the_last_wins() -> None:
    with pytest.raises(InputError) as err:
        parse_yaml("a: 1\nb: 2\na: 3\n", "f.yaml")
    assert str(err.value) == "f.yaml:3: a: duplicate key"


def test_malformed_yaml_names_the_line() -> None:
    with pytest.raises(InputError) as err:
        parse_yaml("a: 1\nb: [1, 2\nc: 3\n", "f.yaml")
    assert err.value.source == "f.yaml"
    assert err.value.line >= 2
    assert "malformed YAML" in err.value.message


def test_merge_keys_are_refused() -> None:
    with pytest.raises(InputError, match="merge keys"):
        parse_yaml("base: &b {x: 1}\nother:\n  <<: *b\n", "f.yaml")


def test_alias_bomb_is_refused_before_expansion() -> None:
    lines = ["a0: &a0 [x, x, x, x, x, x, x, x, x, x]"]
    for i in range(1, 9):
        refs = ", ".join([f"*a{i - 1}"] * 10)
        lines.append(f"a{i}: &a{i} [{refs}]")
    with pytest.raises(InputError, match="alias bomb"):
        parse_yaml("\n".join(lines) + "\n", "bomb.yaml")


@pytest.mark.parametrize(
    "text",
    [
        "[" * 100_000 + "]" * 100_000,
        "{a: " * 50_000 + "1" + "}" * 50_000,
        "- " * 20_000 + "x\n",
        "".join(" " * i + f"k{i}:\n" for i in range(200)) + " " * 200 + "v: 1\n",
    ],
    ids=["flow-sequences", "flow-mappings", "block-dashes", "block-indentation"],
)
def test_deep_nesting_is_refused_without_crashing_the_process(text: str) -> None:
    # Run in a child process: if the guard ever failed, libyaml would kill the process outright.
    code = (
        "import sys\nfrom signals.yamldoc import parse_yaml\nfrom signals.errors import InputError\n"
        "try:\n    parse_yaml(sys.stdin.read(), 'deep.yaml')\nexcept InputError as e:\n"
        "    print(e)\n    sys.exit(0)\nsys.exit(1)\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], input=text, capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 0, result.stderr[-500:]
    assert "nesting deeper than" in result.stdout


def test_nesting_within_the_limit_reads() -> None:
    depth = MAX_DEPTH // 2
    doc = parse_yaml("[" * depth + "1" + "]" * depth, "ok.yaml")
    inner = doc.data
    for _ in range(depth - 1):
        inner = inner[0]
    assert inner == [1]


def test_brackets_inside_quotes_do_not_count_as_nesting() -> None:
    doc = parse_yaml("series: 'kv{instance=\"[[[[[[\"}'\n" * 1, "q.yaml")
    assert doc.data["series"].startswith("kv{")
