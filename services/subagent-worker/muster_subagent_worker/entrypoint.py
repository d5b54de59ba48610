"""`muster-subagent-worker`: runs subagent executions (SUBAGENT session loops)."""

from __future__ import annotations

from muster_runtime import eventloop
from muster_runtime.logs import configure
from muster_runtime.settings import Settings

from muster_subagent_worker.bootstrap import build


def run() -> None:
    configure("subagent-worker")
    eventloop.run(build(Settings.from_env()).app.run())
