"""Text from outside, made safe where it is shown."""

from __future__ import annotations

import html
import re

import pytest

from triage.audit.render import _MARKDOWN as AUDIT_MARKDOWN
from triage.core.escape import escape_md, printable
from triage.core.markdown import markdown_template
from triage.report.report import _environment
from triage.report.scorecard import _ENV as SCORECARD


def test_printable_escapes_controls_and_bidi_and_keeps_the_rest() -> None:
    assert printable("vllm-0\x1b[2J\u202e\x07") == "vllm-0\\x1b[2J\\u202e\\x07"
    assert printable("a\tb\rc\x7f\x9b\u200f\u2066") == "a\\x09b\\x0dc\\x7f\\x9b\\u200f\\u2066"
    assert printable("two\nlines ünïcode 日本 ✔") == "two\nlines ünïcode 日本 ✔"
    assert printable(printable("\x1b")) == "\\x1b"  # escaping twice changes nothing more


def test_escape_md_keeps_a_value_in_its_table_cell() -> None:
    assert escape_md("a | b") == "a \\| b"
    assert escape_md("two\nlines\r\n\tand  more") == "two lines and more"
    assert "|" not in escape_md("x|y").replace("\\|", "")


def test_escape_md_lets_no_markup_or_html_through() -> None:
    assert escape_md('<script>alert("x")</script>') == '&lt;script&gt;alert("x")&lt;/script&gt;'
    assert escape_md("use `rm -rf` *now*") == "use \\`rm -rf\\` \\*now\\*"
    assert escape_md("[click](http://evil.example) ![img](x) # h ~~s~~") == (
        "\\[click\\](http://evil.example) \\!\\[img\\](x) \\# h \\~\\~s\\~\\~"
    )
    assert escape_md("AT&T &amp; co") == "AT&amp;T &amp;amp; co"
    assert escape_md("back\\slash") == "back\\\\slash"


def test_escape_md_escapes_a_leading_block_marker_only() -> None:
    assert escape_md("- item") == "\\- item"
    assert escape_md("+ item") == "\\+ item"
    assert escape_md("1. item") == "1\\. item"
    assert escape_md("2) item") == "2\\) item"
    assert escape_md("0.95 of KV, 3-4 replicas") == "0.95 of KV, 3-4 replicas"


def test_escape_md_shows_control_characters_as_escapes() -> None:
    assert escape_md("vllm-0\x1b[2J\u202e") == "vllm-0\\\\x1b\\[2J\\\\u202e"
    assert "\x1b" not in escape_md("\x1b\x07\x9b") and "\u202e" not in escape_md("\u202e")


def test_escape_md_keeps_underscores_inside_words() -> None:
    assert escape_md("kv_pressure and max_num_seqs") == "kv_pressure and max_num_seqs"
    assert escape_md("_emphasis_ and __init__") == "\\_emphasis\\_ and \\_\\_init\\_\\_"
    assert escape_md(0.5) == "0.5"


def test_every_markdown_template_escapes_with_the_one_escaper() -> None:
    assert markdown_template("diagnosis.md.j2").environment.filters["e_md"] is escape_md
    assert AUDIT_MARKDOWN.get_template("audit.md.j2").environment.filters["e_md"] is escape_md
    report = _environment(None)
    assert report.filters["e_md"] is escape_md and report.filters["md"] is escape_md
    assert SCORECARD.filters["e_md"] is escape_md


HOSTILE = [
    '<script>alert("x")</script>',
    "a | b <img src=x onerror=y> *c* _d_ __e__ `f` [g](http://h) ![i](j) ~~k~~ AT&T &lt; &#60;",
    "- item",
    "1. item",
    "# heading",
    "> quote",
    "back\\slash \\| \\*",
    "vllm-0\x1b[2J\u202eevil\nsecond line",
    "kv_pressure max_num_seqs",
]


@pytest.mark.parametrize("value", HOSTILE)
def test_escaped_markdown_renders_back_to_the_text(value: str) -> None:
    """A CommonMark renderer (with GFM tables) shows the value as plain text, whatever it holds."""
    markdown_it = pytest.importorskip("markdown_it")
    md = markdown_it.MarkdownIt("commonmark").enable(["table", "strikethrough"])
    expected = printable(" ".join(value.split()))
    cell = md.render(f"| x |\n|---|\n| {escape_md(value)} |\n")
    cells = re.findall(r"<td>(.*?)</td>", cell, flags=re.DOTALL)
    assert len(cells) == 1 and html.unescape(cells[0]) == expected
    paragraph = md.render(escape_md(value))
    assert paragraph.startswith("<p>") and html.unescape(paragraph[3:].removesuffix("</p>\n")) == expected
