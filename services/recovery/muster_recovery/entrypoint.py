"""`muster-recovery`: reconciliation, and (with delegation) the barrier and delivery."""

from __future__ import annotations

from muster_runtime.process import eventloop
from muster_runtime.process.logs import configure
from muster_runtime.process.settings import Settings

from muster_recovery.bootstrap import build


def run() -> None:
    settings = Settings.from_env()
    configure("recovery", settings.log_level)
    eventloop.run(build(settings).app.run())
