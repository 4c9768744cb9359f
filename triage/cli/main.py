"""The `triage` command line: validate input, build sources, call the core, print.

Stdout carries the product (the diagnosis, the timeline, the test report); stderr
carries diagnostics. Every input problem is one `file:line: key: message` line and exit
code 2; nothing reaches the user as a traceback (set TRIAGE_DEBUG=1 to see one).

Building the parser imports only the light modules (`common` and each command's module,
argparse and the standard library); a command's handler, with what it needs, is imported
when that command runs. `triage tui` is one of them: its handler is the TUI's, which
imports nothing of the command line.
"""

from __future__ import annotations

import argparse
import os
import sys
import traceback
from collections.abc import Sequence

from signals.errors import InputError, InputErrors, SignalError
from triage import __version__
from triage.cli import (
    audit,
    capacity,
    capture,
    diagnose,
    fleets,
    mcp,
    playbooks,
    replay,
    report,
    rules,
    serve,
    signalcheck,
    testrun,
    tui,
)
from triage.cli.common import (
    EXIT_INTERNAL,
    EXIT_INTERRUPTED,
    EXIT_OK,
    EXIT_UNAVAILABLE,
    EXIT_USAGE,
    Command,
    MissingSubcommand,
    SourceArgError,
    UsageError,
    add_playbook_option,
)

__all__ = [
    "EXIT_OK",
    "EXIT_UNAVAILABLE",
    "SourceArgError",
    "UsageError",
    "add_playbook_option",
    "build_parser",
    "main",
    "prepare_process",
]

EPILOG = """\
examples:
  triage diagnose --fixture fixtures/kv-pressure-long-context.yaml
  triage diagnose --fixture F --symptom ttft_slow --at 40m --format json | jq .causes[0]
  triage replay fixtures/replica-down-queue-growth.yaml --every 1m
  triage test                      # replay every fixture with an expect block
  triage playbooks check           # validate the knowledge
  triage mcp --prometheus URL      # the same answers as tools for an AI assistant (MCP, stdio)

exit codes: 0 diagnosis made (also when no cause is found), 1 tests or checks failed,
2 bad usage or bad input, 70 internal error.
"""


COMMANDS: tuple[Command, ...] = (
    diagnose.COMMAND,
    replay.COMMAND,
    testrun.COMMAND,
    signalcheck.COMMAND,
    fleets.COMMAND,
    capture.COMMAND,
    rules.COMMAND,
    report.COMMAND,
    audit.COMMAND,
    capacity.COMMAND,
    playbooks.COMMAND,
    serve.COMMAND,
    mcp.COMMAND,
    tui.COMMAND,
)
"""The commands, in the order `triage --help` lists them."""


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="triage",
        description="Incident triage for LLM inference services: walk from the symptom to ranked causes, "
        "first actions, and the actions that would be wrong now.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"llm-triage {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for command in COMMANDS:
        command.add(sub)
    return parser


def prepare_process() -> None:
    """What a start settles before any command loads its libraries.

    numpy's OpenBLAS starts a pool of threads as numpy loads, tens of milliseconds of every
    start on a busy 2-core machine, for linear algebra this tool never does: one thread,
    unless the environment already says how many.
    """
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")


def prepare_command() -> None:
    """What a command settles before it starts any thread (once the arguments parsed, so that
    `--help` pays nothing for it): glibc's malloc arenas capped (`signals.malloc`), since a live
    read's worker threads would each keep an arena of freed reply memory."""
    from signals.malloc import cap_arenas

    cap_arenas()


def main(argv: Sequence[str] | None = None) -> int:
    """The `triage` console script."""
    prepare_process()
    parser = build_parser()
    args = parser.parse_args(argv)
    prepare_command()
    out = sys.stdout
    try:
        for command in COMMANDS:
            if args.command == command.name:
                return command.run(args, out)
    except MissingSubcommand:
        parser.parse_args([args.command, "--help"])
    except (InputError, InputErrors) as exc:
        for line in str(exc).splitlines():
            sys.stderr.write(f"triage: {line}\n")
        return EXIT_USAGE
    except (UsageError, SourceArgError) as exc:
        sys.stderr.write(f"triage: {exc}\n")
        return EXIT_USAGE
    except SignalError as exc:
        sys.stderr.write(f"triage: {exc}\n")
        return EXIT_UNAVAILABLE
    except BrokenPipeError:
        sys.stderr.close()
        return EXIT_OK
    except KeyboardInterrupt:
        sys.stderr.write("triage: interrupted\n")
        return EXIT_INTERRUPTED
    except Exception as exc:
        if os.environ.get("TRIAGE_DEBUG"):
            traceback.print_exc()
        sys.stderr.write(
            f"triage: internal error: {type(exc).__name__}: {exc} "
            "(set TRIAGE_DEBUG=1 for details; please report it)\n"
        )
        return EXIT_INTERNAL
    parser.print_help(sys.stderr)
    return EXIT_USAGE


if __name__ == "__main__":
    sys.exit(main())
