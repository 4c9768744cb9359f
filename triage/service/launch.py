"""`triage serve`: the run loop, imported only when the service runs.

Its options are `triage.service.command`, which needs only argparse, so the rest of the
command line starts without the web stack. uvicorn owns the signals: on SIGTERM or Ctrl-C it stops
accepting connections, lets in-flight requests finish, then the app's lifespan drains
the workers and the sinks, and the process exits 0. Work not finished stays pending
in the store and resumes at the next start.
"""

from __future__ import annotations

import argparse
import logging
import signal
import sys
from typing import TextIO

import uvicorn

from triage.service.app import create_app
from triage.service.command import FLAGS
from triage.service.config import load_config
from triage.service.runtime import Service

GIL_SWITCH_SECONDS = 0.0005
"""How long a thread of the service's process may hold the GIL while another waits for it
(Python's default is 5 ms). The intake answers Alertmanager from one thread while the worker
threads finish diagnoses and the sinks' threads deliver; at the default, a notification can
wait 5 ms for the GIL at each hand-over, which is what the intake's tail latency was made of
on two replicas (docs/benchmarks.md, "Two replicas on PostgreSQL"). Diagnoses run in their own
processes by default, so the shorter turn costs the busy threads little."""


def share_the_gil() -> None:
    """Give the intake's thread its turn at the GIL sooner (`GIL_SWITCH_SECONDS`)."""
    sys.setswitchinterval(GIL_SWITCH_SECONDS)


def run_serve(args: argparse.Namespace, out: TextIO) -> int:
    """Validate everything, then serve until SIGTERM; InputErrors go back to the CLI (exit 2).

    `out` stays empty: the service reports on stderr and through its endpoints."""
    loaded = load_config(args.config, {name: getattr(args, name, None) for name in FLAGS})
    logging.basicConfig(
        level=args.log_level.upper(),
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        stream=sys.stderr,
    )
    share_the_gil()
    service = Service(loaded)
    app = create_app(service)
    config = loaded.config
    server = uvicorn.Server(
        uvicorn.Config(
            app,
            host=config.host,
            port=config.port,
            log_level=args.log_level,
            access_log=False,
            timeout_graceful_shutdown=20,
            server_header=False,
        )
    )
    sys.stderr.write(
        f"triage: serving on http://{config.host}:{config.port} (store {service.store.location}, "
        f"{len(config.sinks)} sink{'s' if len(config.sinks) != 1 else ''}, "
        f"auth {'on' if loaded.secrets.auth_required else 'OFF'})\n"
    )
    # uvicorn re-raises the stop signal to the handler it found once it has drained; a
    # handler that does nothing makes a requested stop a normal exit (status 0).
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, _stopped)
    server.run()
    return 0


def _stopped(signum: int, frame: object) -> None:
    """The stop was requested and the service has drained: nothing left to do."""
