"""Regenerate the public accuracy scorecard: the bundled fixtures and the five generality corpora.

`python -m tools.scorecard [--out docs/scorecard.md]` (from the repository root) writes each
generality corpus into a temporary folder, in a subfolder named after it (`generality`,
`generality_hard`, `generality_indep`, `generality_field`, `generality_verdict`), with the
bundled fixtures beside them as `fixtures`, and runs `triage test fixtures generality ...
--scorecard OUT` there with the repository's playbooks. The folder names are the corpus
names the scorecard shows, and the paths it quotes are relative to that folder, so reruns
differ only in the timestamp.

The exit code is 0 whenever the scorecard was written, whatever the fixtures' results: it is
a measure, not a gate (`triage test` is the gate). It is nonzero only when a corpus could not
be generated or the scorecard could not be written. Raw fixtures are replayed through a
local Prometheus on the loopback interface; nothing goes over the network.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import subprocess
import sys
import tempfile
from collections.abc import Iterator, Sequence
from pathlib import Path

from triage.cli.common import EXIT_FAILED, EXIT_OK
from triage.cli.main import main as triage_main

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "docs" / "scorecard.md"
BUNDLED = "fixtures"
CORPORA = ("generality", "generality_hard", "generality_indep", "generality_field", "generality_verdict")
"""The generated corpora, each written by `python -m tools.<name> --out DIR` and named `<name>`."""


def corpus_folders(workdir: Path, corpora: Sequence[str] = CORPORA) -> dict[str, Path]:
    """Where each corpus goes: a subfolder of `workdir` named after it, the bundled set first."""
    return {name: workdir / name for name in (BUNDLED, *corpora)}


def generate(workdir: Path, corpora: Sequence[str] = CORPORA, fixtures: Path = ROOT / BUNDLED) -> list[str]:
    """Write the corpora into their folders and link the bundled fixtures; the folder names, in order.

    Each generator runs as `python -m tools.<name> --out DIR` from the repository root, as
    a person would run it; a failing one raises CalledProcessError with its output.
    """
    folders = corpus_folders(workdir, corpora)
    folders[BUNDLED].symlink_to(fixtures.resolve(), target_is_directory=True)
    for name in corpora:
        subprocess.run(
            [sys.executable, "-m", f"tools.{name}", "--out", str(folders[name])],
            cwd=ROOT,
            check=True,
            capture_output=True,
            text=True,
        )
    return list(folders)


@contextlib.contextmanager
def _inside(folder: Path) -> Iterator[None]:
    before = Path.cwd()
    os.chdir(folder)
    try:
        yield
    finally:
        os.chdir(before)


def replay(workdir: Path, folders: Sequence[str], out: Path, playbooks: Path = ROOT / "playbooks") -> int:
    """`triage test FOLDER ... --scorecard OUT` run inside `workdir`; its exit code."""
    argv = [
        "test",
        "-q",
        *folders,
        "--playbooks",
        str(playbooks.resolve()),
        "--scorecard",
        str(out.resolve()),
    ]
    with _inside(workdir):
        return triage_main(argv)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description="Regenerate the accuracy scorecard over the bundled fixtures and the generality corpora."
    )
    parser.add_argument(
        "--out", type=Path, default=OUT, help="scorecard file, .md or .html (default: docs/scorecard.md)"
    )
    args = parser.parse_args(argv)
    out: Path = args.out
    with tempfile.TemporaryDirectory(prefix="scorecard-") as tmp:
        workdir = Path(tmp)
        try:
            folders = generate(workdir)
        except subprocess.CalledProcessError as exc:
            sys.stderr.write(f"scorecard: {' '.join(exc.cmd)} failed\n{exc.stdout}{exc.stderr}")
            return 1
        print(f"replaying {', '.join(folders)}", flush=True)
        code = replay(workdir, folders, out)
    if code not in (EXIT_OK, EXIT_FAILED) or not out.is_file():
        sys.stderr.write(f"scorecard: triage test exited {code}; no scorecard written\n")
        return code or 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
