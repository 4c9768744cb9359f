"""What the commands run: one handler module per command, and what several of them share.

`main` imports a command's handler module only when that command runs (each `Command`
names it as `module:function`), so the libraries a handler needs (numpy, networkx,
pydantic, the Prometheus client, jinja2, ...) load for that command alone, never for
`--help` or for picking the command. `inputs` reads the arguments several commands share;
`sourceargs` reads the live Prometheus options.
"""
