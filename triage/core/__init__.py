"""The diagnosis core: the model, the playbooks, the graph, the checks and the walk.

Pure: no network, no clock, no environment, no files but its own templates; time
arrives as an argument. Everything else in `triage` builds on it; it builds only on
the types of `signals`.
"""
