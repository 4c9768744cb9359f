"""Text from outside, made safe where it is shown."""

from __future__ import annotations

from triage.core.escape import printable


def test_printable_escapes_controls_and_bidi_and_keeps_the_rest() -> None:
    assert printable("vllm-0\x1b[2J\u202e\x07") == "vllm-0\\x1b[2J\\u202e\\x07"
    assert printable("a\tb\rc\x7f\x9b\u200f\u2066") == "a\\x09b\\x0dc\\x7f\\x9b\\u200f\\u2066"
    assert printable("two\nlines ünïcode 日本 ✔") == "two\nlines ünïcode 日本 ✔"
    assert printable(printable("\x1b")) == "\\x1b"  # escaping twice changes nothing more
