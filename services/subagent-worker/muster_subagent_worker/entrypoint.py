"""`muster-subagent-worker`: runs subagent executions (SUBAGENT session loops)."""

from __future__ import annotations

from muster_runtime.process import eventloop
from muster_runtime.process.logs import configure
from muster_runtime.process.settings import Settings

from muster_subagent_worker.bootstrap import build


def run() -> None:
    settings = Settings.from_env()
    configure("subagent-worker", settings.log_level)
    eventloop.run(build(settings).app.run())
