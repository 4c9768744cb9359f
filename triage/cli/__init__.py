"""The command line: `main` dispatches to one module per command; `sourceargs` holds the
arguments every live command shares."""
