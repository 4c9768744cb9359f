"""What each tool of `triage mcp` answers: the commands' own JSON, built by their handlers.

A tool call becomes the arguments the matching command would have parsed (its own
defaults, the server's Prometheus and playbook options, the tool's few arguments, JSON
format), and the handler's builder gives the same dict `--format json` prints, so the
command line and the server answer from one path. Nothing here writes: no capture, no
report, no rule file, no store. Every function blocks (files, the diagnosis, Prometheus);
the server runs them in worker threads.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from typing import Any

from signals.vocabulary import suggest
from triage.cli import audit, diagnose, fleets, replay, signalcheck
from triage.cli.common import Command, UsageError
from triage.cli.handlers.audit import audit_report
from triage.cli.handlers.diagnose import diagnosis_json, diagnosis_of
from triage.cli.handlers.fleets import fleets_json
from triage.cli.handlers.replay import replayed
from triage.cli.handlers.signalcheck import signal_check
from triage.core.playbook import Knowledge
from triage.core.playbook.schema import AnyOf, CheckSpec
from triage.sources import load_playbooks

PLACEHOLDER = "http://placeholder.invalid"
"""What a command's required `--prometheus` parses as before the server's own replaces it."""


class NotConfigured(Exception):
    """A live tool called on a server started without `--prometheus`."""


NOT_CONFIGURED = (
    "no Prometheus configured: this tool reads a live Prometheus, and the server was started "
    "without one; start it as `triage mcp --prometheus URL` (credentials with --token-file, "
    "--basic-auth-file or $TRIAGE_PROMETHEUS_TOKEN, see `triage mcp --help`). "
    "diagnose with a fixture, replay and explain_cause work without it"
)


def _parsed(command: Command, argv: Sequence[str]) -> argparse.Namespace:
    """The command's arguments with its own defaults, as its parser gives them for `argv`."""
    parser = argparse.ArgumentParser(prog="triage", add_help=False)
    command.add(parser.add_subparsers(dest="command"))
    return parser.parse_args([command.name, *argv])


class Tools:
    """The tools' answers, from the server's configuration (its parsed `triage mcp` options)."""

    def __init__(self, config: argparse.Namespace) -> None:
        self.config = config

    def _args(self, command: Command, argv: Sequence[str], **values: Any) -> argparse.Namespace:
        """The command's arguments: its defaults, the server's options it shares, then the tool's."""
        args = _parsed(command, argv)
        for key, value in vars(self.config).items():
            if key != "command" and hasattr(args, key):
                setattr(args, key, value)
        for key, value in values.items():
            if not hasattr(args, key):
                raise AssertionError(f"triage {command.name} takes no {key}")
            if value is not None or key == "prometheus":
                setattr(args, key, value)
        args.format = "json"
        return args

    def _live(self) -> None:
        if not self.config.prometheus:
            raise NotConfigured(NOT_CONFIGURED)

    def fleets(self, at: str | None) -> dict[str, Any]:
        self._live()
        return fleets_json(self._args(fleets.COMMAND, ["--prometheus", PLACEHOLDER], at=at))

    def diagnose(
        self, fixture: str | None, fleet: str | None, symptom: str | None, at: str | None
    ) -> dict[str, Any]:
        if fixture:
            if fleet:
                raise UsageError("fleet: only for a live diagnosis; a fixture holds the fleet it recorded")
            args = self._args(diagnose.COMMAND, [], fixture=fixture, prometheus=None, symptom=symptom, at=at)
        else:
            self._live()
            args = self._args(diagnose.COMMAND, [], fleet=fleet, symptom=symptom, at=at)
        return diagnosis_json(diagnosis_of(args))

    def replay(self, fixture: str, symptom: str | None, every: str | None) -> dict[str, Any]:
        # The path is set as a value, never parsed: a fixture named like a flag stays a path.
        args = self._args(replay.COMMAND, ["fixture.yaml"], fixture=fixture, symptom=symptom, every=every)
        return replayed(args).to_json()

    def signals_check(self, fleet: str | None, at: str | None) -> dict[str, Any]:
        self._live()
        args = self._args(signalcheck.COMMAND, ["check", "--prometheus", PLACEHOLDER], fleet=fleet, at=at)
        return signal_check(args).to_json()

    def audit(self, fleet: str | None, at: str | None) -> list[dict[str, str]]:
        self._live()
        args = self._args(audit.COMMAND, ["--prometheus", PLACEHOLDER], fleet=fleet, at=at)
        return audit_report(args).to_json()

    def explain_cause(self, cause: str) -> dict[str, Any]:
        return explain_cause(load_playbooks(self.config.playbooks), cause)


def _check(entry: CheckSpec | AnyOf) -> dict[str, Any]:
    """A check as the playbook writes it (kind, signal, parameters; `any` groups nested)."""
    out: dict[str, Any] = entry.model_dump(mode="json", by_alias=True, exclude_defaults=True)
    return out


def explain_cause(kb: Knowledge, cause: str) -> dict[str, Any]:
    """What the playbooks say about one cause: why it happens, how it is proven, what to do
    first and what not to do; UsageError naming the known causes for an unknown id."""
    spec = kb.causes.get(cause)
    if spec is None:
        known = sorted(kb.causes)
        raise UsageError(
            f"cause: unknown cause '{cause}'{suggest(cause, known)}; known causes: {', '.join(known)}"
        )
    actions = []
    for action_id in spec.first_actions:
        action = kb.actions[action_id]
        confirm = {"confirm": action.confirm} if action.confirm else {}
        actions.append({"id": action_id, "text": action.text, **confirm})
    forbidden = []
    for action_id, rule in sorted(kb.forbidden.items()):
        linked = cause in rule.when.causes or cause in rule.because
        if not (linked or (rule.when.always and cause not in rule.unless_top_cause)):
            continue
        item = {"action": action_id, "title": rule.title, "reason": rule.reason}
        if cause in rule.because:
            item["because"] = rule.because[cause]
        forbidden.append(item)
    origin = kb.origins.get(f"causes.{cause}")
    symptoms = sorted(s for s, spec_ in kb.symptoms.items() if any(cause in c for c in spec_.layers.values()))
    return {
        "cause": cause,
        "title": spec.title,
        "layer": spec.layer,
        "mechanism": spec.mechanism,
        "symptoms": symptoms,
        "checks": {
            "requires": [_check(c) for c in spec.requires],
            "supports": [_check(c) for c in spec.supports],
            "against": [_check(c) for c in spec.against],
        },
        "explains": list(spec.explains),
        "explained_by": sorted(c for c, other in kb.causes.items() if cause in other.explains),
        "first_actions": actions,
        "forbidden": forbidden,
        "playbook": f"{origin[0]}:{origin[1]}" if origin else None,
    }
