"""Series selectors and time parsing at the fixture boundary."""

from __future__ import annotations

import pytest

from signals.selector import parse_selector
from signals.timeparse import format_duration, format_instant, parse_duration, parse_instant


def test_selector_with_labels_and_escapes() -> None:
    assert parse_selector('kv_usage_ratio{instance="vllm-0", gpu=\'1\', note="a\\"b",}') == (
        "kv_usage_ratio",
        {"instance": "vllm-0", "gpu": "1", "note": 'a"b'},
    )
    assert parse_selector("request_rate") == ("request_rate", {})
    assert parse_selector('{__name__="request_rate",instance="x"}') == ("request_rate", {"instance": "x"})


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ('kv{instance=~"a"}', "only = matchers"),
        ("kv{instance=a}", "quoted value"),
        ('kv{instance="a"', "expected"),
        ('kv{a="1",a="2"}', "given twice"),
        ("{}", "metric name"),
        ('kv{a="1"} extra', "unexpected"),
    ],
)
def test_selector_errors(text: str, fragment: str) -> None:
    with pytest.raises(ValueError, match=fragment):
        parse_selector(text)


def test_durations() -> None:
    assert parse_duration("15s") == 15
    assert parse_duration("1h30m") == 5400
    assert parse_duration("500ms") == 0.5
    for bad in ("15", "1.5m", "m", "", "5 m"):
        with pytest.raises(ValueError):
            parse_duration(bad)
    assert format_duration(45) == "45s"
    assert format_duration(125) == "2m05s"
    assert format_duration(3900) == "1h05m"


def test_instants() -> None:
    t = parse_instant("2026-10-14T14:00:00Z")
    assert format_instant(t) == "2026-10-14T14:00:00Z"
    assert parse_instant("2026-10-14T16:00:00+02:00") == t
    assert parse_instant(str(int(t))) == t
    with pytest.raises(ValueError):
        parse_instant("yesterday")
    with pytest.raises(ValueError):
        parse_instant(True)
