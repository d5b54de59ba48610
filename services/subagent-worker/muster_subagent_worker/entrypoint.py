"""`muster-subagent-worker`: runs subagent executions (SUBAGENT session loops)."""

from __future__ import annotations

import asyncio

from muster_runtime.logs import configure
from muster_runtime.settings import Settings

from muster_subagent_worker.bootstrap import build


def run() -> None:
    configure("subagent-worker")
    asyncio.run(build(Settings.from_env()).app.run())
