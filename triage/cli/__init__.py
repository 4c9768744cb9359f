"""The command line: one module per command, declaring its arguments and help; `main` lists them
and dispatches. `common` holds what several commands share, `sourceoptions` the options every
live command adds. These modules need only the standard library, so `triage --help` and every
command's `--help` start at once; what a command runs is its handler under `handlers`,
imported when the command runs."""
