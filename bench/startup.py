"""Benchmark of the command line's start-up; prints a table, exit 1 if a target is missed.

Every figure is the wall time of a fresh process of the installed `triage` console
script, from before it starts until it exits (the interpreter, every import, the work):
  help        `triage --help`, and `triage <command> --help` for every command and every
              command of a group (`signals check`, `playbooks check`)    target <= 0.2 s each
  diagnose    `triage diagnose --fixture F` on bundled fixtures, text to a pipe
                                                                          target <= 0.5 s each
  python      the bare interpreter with the venv's site (`python -c pass`): the floor
Without cached bytecode (PYTHONDONTWRITEBYTECODE set, an editable install) every start also
compiles the modules it imports; the header says which it was.
The cases are run in turns (every case once, then again, N times), so a burst of load
from elsewhere on the machine falls on all of them alike; each figure is the median.
The TUI's first paint is measured by bench/tui.py.

Run: python -m bench.startup [--runs 9] [--fixture fixtures/F.yaml ...]
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
HELP_TARGET = 0.2
DIAGNOSE_TARGET = 0.5
FIXTURES = (
    "fixtures/replica-down-queue-growth.yaml",
    "fixtures/kv-pressure-long-context.yaml",
    "fixtures/capacity-shortage-behind-gateway.yaml",
)


def help_cases() -> list[list[str]]:
    """The arguments of every help a user can ask for, read from the parser itself."""
    from triage.cli.main import build_parser

    def commands(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
        found = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
        return dict(found[0].choices) if found else {}

    cases = [["--help"]]
    for name, parser in commands(build_parser()).items():
        cases.append([name, "--help"])
        cases.extend([name, inner, "--help"] for inner in commands(parser))
    return cases


def triage_command() -> list[str]:
    """The console script as installed next to this interpreter."""
    script = Path(sys.executable).parent / "triage"
    if not script.exists():
        raise SystemExit(f"no console script at {script}: install the project (pip install -e .)")
    return [str(script)]


def bytecode_note() -> str:
    """Whether this checkout's modules start from cached bytecode or are compiled at every start."""
    sources = [p for package in ("triage", "signals", "tui") for p in (ROOT / package).rglob("*.py")]
    cached = sum(1 for p in sources if Path(importlib.util.cache_from_source(str(p))).exists())
    writes = "off (PYTHONDONTWRITEBYTECODE)" if os.environ.get("PYTHONDONTWRITEBYTECODE") else "on"
    return f"bytecode of this checkout: {cached} of {len(sources)} modules cached, writing {writes}"


def timed(argv: list[str]) -> float:
    started = time.perf_counter()
    result = subprocess.run(argv, cwd=ROOT, capture_output=True, check=False)
    took = time.perf_counter() - started
    if result.returncode != 0:
        raise SystemExit(f"{' '.join(argv)} exited {result.returncode}: {result.stderr.decode()[-500:]}")
    return took


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--runs", type=int, default=9, help="fresh processes per case (default 9)")
    parser.add_argument(
        "--fixture", action="append", help=f"fixture to diagnose (repeatable; default {', '.join(FIXTURES)})"
    )
    args = parser.parse_args(argv)
    triage = triage_command()
    cases: dict[str, list[str]] = {"python": [sys.executable, "-c", "pass"]}
    helps = help_cases()
    for case in helps:
        cases["triage " + " ".join(case)] = [*triage, *case]
    for fixture in args.fixture or FIXTURES:
        cases[f"triage diagnose --fixture {fixture}"] = [*triage, "diagnose", "--fixture", fixture]

    times: dict[str, list[float]] = {name: [] for name in cases}
    for _ in range(args.runs):
        for name, command in cases.items():
            times[name].append(timed(command))
    median = {name: statistics.median(values) for name, values in times.items()}

    def row(name: str, figure: float, target: float | None) -> tuple[str, str, str, str]:
        if target is None:
            return (name, f"{figure:.3f} s", "—", "")
        return (name, f"{figure:.3f} s", f"≤ {target:.1f} s", "yes" if figure <= target else "NO")

    help_names = ["triage " + " ".join(case) for case in helps]
    worst = max(help_names, key=median.__getitem__)
    diagnose_names = [name for name in cases if name.startswith("triage diagnose --fixture")]
    rows = [row("interpreter alone (`python -c pass`)", median["python"], None)]
    rows += [row(f"`{name}`", median[name], HELP_TARGET) for name in help_names]
    rows.append(row(f"**help, worst** (`{worst}`)", median[worst], HELP_TARGET))
    rows += [row(f"`{name}`", median[name], DIAGNOSE_TARGET) for name in diagnose_names]

    print(
        f"triage start-up benchmark · median of {args.runs} fresh processes per case, run in turns · "
        f"python {sys.version.split()[0]} · {bytecode_note()}"
    )
    print("| measure | median | target | met |")
    print("| --- | --- | --- | --- |")
    for cells in rows:
        print("| " + " | ".join(cells) + " |")
    missed = [cells[0] for cells in rows if cells[3] == "NO"]
    if missed:
        print(f"\nmissed: {', '.join(missed)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
