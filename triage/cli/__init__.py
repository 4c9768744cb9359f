"""The command line: one module per command, each adding its own subparser and holding its
handler; `main` lists them and dispatches. `common` holds what several commands share,
`sourceargs` the arguments every live command shares."""
