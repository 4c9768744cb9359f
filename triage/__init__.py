"""llm-triage: incident triage for LLM inference services.

The core (model, playbook, graph, checks, windows, walk, render) is pure: no network,
no clock, no environment; time arrives as an argument. The edges (cli, sources) read
files and talk to the world.
"""

__version__ = "0.1.0"
