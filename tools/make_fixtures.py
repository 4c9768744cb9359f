"""Write the bundled fixtures: `python -m tools.make_fixtures [NAME ...]`.

Each incident is a function in a `tools/incidents_*.py` module, told as a healthy fleet
and what went wrong, with the conclusion a replay must reach. Seeded, so rerunning
rewrites identical files.
"""

from __future__ import annotations

import importlib
import pkgutil
import sys

import tools
from tools.registry import INCIDENTS, OUT


def load_incidents() -> None:
    for module in pkgutil.iter_modules(tools.__path__):
        if module.name.startswith("incidents_"):
            importlib.import_module(f"tools.{module.name}")


def main(argv: list[str]) -> int:
    load_incidents()
    OUT.mkdir(exist_ok=True)
    wanted = argv or sorted(INCIDENTS)
    unknown = [w for w in wanted if w not in INCIDENTS]
    if unknown:
        sys.stderr.write(
            f"unknown incident(s): {', '.join(unknown)}; known: {', '.join(sorted(INCIDENTS))}\n"
        )
        return 2
    for name in wanted:
        INCIDENTS[name]()
        print(f"wrote fixtures/{name}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
