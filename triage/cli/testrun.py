"""`triage test`: replay every fixture with an expect block and check it, like `promtool test rules`.

Its arguments and help; what it runs is `triage.cli.handlers.testrun`.
"""

from __future__ import annotations

from triage.cli import common


def add_parser(sub: common.Subparsers) -> None:
    t = sub.add_parser(
        "test",
        help="replay fixtures and check their expect blocks",
        description="Replay every fixture that has an expect block and check it, like promtool "
        "test rules. Exit 1 on any failure.",
    )
    t.add_argument(
        "paths",
        nargs="*",
        metavar="PATH",
        help="fixture files or folders, each folder a corpus in the scorecard (default: fixtures/)",
    )
    t.add_argument("-q", "--quiet", action="store_true", help="print failures and the summary only")
    t.add_argument("--junit", metavar="FILE", help="also write JUnit XML, one test case per fixture")
    t.add_argument("--scorecard", metavar="FILE", help="also write the accuracy scorecard (.md or .html)")
    t.add_argument(
        "-j",
        "--jobs",
        type=int,
        metavar="N",
        help="fixtures loaded at once, each raw one in its own temporary Prometheus "
        "(default: the CPUs, at most 4); the output is in path order whatever N is",
    )
    common.add_playbook_option(t)


COMMAND = common.Command("test", add_parser, "triage.cli.handlers.testrun:cmd_test")
