"""Rule files cut to what a `promtool test rules` case reads.

promtool evaluates every rule of the file at every step up to the last moment a test asks
about, and the generated recording group is over a hundred or-chains across every engine's
names: nearly all of a test's time. A rule a case does not read, directly or through the
records it reads, cannot change what the case sees, so the tests hand promtool only those.
The whole file is still checked (`promtool check rules`) and evaluated whole where a case
reads every record (`{__name__=~"triage:.+"}`).
"""

from __future__ import annotations

import re
from collections.abc import Iterable

import yaml

from triage.rules.render import ALERT_GROUP

RECORDED = re.compile(r"triage:[a-z0-9_]+(?::replica)?")
"""A recorded series' name as the generated rules write it."""
_ALTERNATIVES = re.compile(r"triage:\(([a-z0-9_|]+)\)")
_ALERT_NAME = re.compile(r'alertname="([A-Za-z0-9_]+)"')
_EVERY_RECORD = re.compile(r"triage:\.[*+]")


def alerts_only(rules_text: str) -> str:
    """The rule file's alert group alone, for tests that feed the recorded series themselves.

    The recording group reads raw exporter series; where the inputs are already the
    `triage:` series the alerts read, it has nothing to record from, yet promtool evaluates
    its hundred-odd rules at every step, and that is nearly all of a test's cost.
    """
    doc = yaml.safe_load(rules_text)
    doc["groups"] = [group for group in doc["groups"] if group["name"] == ALERT_GROUP]
    assert doc["groups"], f"the rule file has no {ALERT_GROUP} group"
    return yaml.safe_dump(doc, sort_keys=False, width=1 << 30)


def rules_reading(rules_text: str, targets: set[str]) -> str:
    """The rules a test reads (`targets`: alert and record names) and every record they read, in order.

    No other rule can change what these evaluate to, and the rest of the recording group
    (over a hundred or-chains across every engine's names) would cost promtool most of the
    test's time. The rules keep their groups and their order within them.
    """
    doc = yaml.safe_load(rules_text)
    rules = [rule for group in doc["groups"] for rule in group["rules"]]
    by_name = {rule.get("record") or rule["alert"]: rule for rule in rules}
    missing = targets - by_name.keys()
    assert not missing, f"no rule named {sorted(missing)}"
    needed: set[str] = set()
    todo = list(targets)
    while todo:
        name = todo.pop()
        if name in needed or name not in by_name:
            continue
        needed.add(name)
        todo.extend(RECORDED.findall(by_name[name]["expr"]))
    for group in doc["groups"]:
        group["rules"] = [rule for rule in group["rules"] if (rule.get("record") or rule["alert"]) in needed]
    doc["groups"] = [group for group in doc["groups"] if group["rules"]]
    return yaml.safe_dump(doc, sort_keys=False, width=1 << 30)


def rules_read_by(texts: Iterable[str]) -> set[str] | None:
    """The rules that PromQL `texts` (the cases' expressions and expected labels) name: recorded
    names, `triage:(a|b)` alternatives, `alertname="..."`; None when one reads every record."""
    names: set[str] = set()
    for text in texts:
        if _EVERY_RECORD.search(text):
            return None
        names.update(RECORDED.findall(_ALTERNATIVES.sub("", text)))
        for group in _ALTERNATIVES.findall(text):
            names.update(f"triage:{name}" for name in group.split("|"))
        names.update(_ALERT_NAME.findall(text))
    return names
