"""What a user hands either front end, read the same way by both: the command line and the TUI.

The options of a live Prometheus source and of the playbooks (`options`), reading them into
a source, a catalog and the fleets (`sources`), the graph, a checked fixture, a symptom, a
moment, a duration and a secret (`arguments`), and the exit codes and input errors
(`errors`). Both front ends import from here, never from each other: `triage.cli` and `tui`
each depend only downward.
"""
