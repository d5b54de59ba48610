"""`muster-recovery`: reconciliation, and (with delegation) the barrier and delivery."""

from __future__ import annotations

from muster_runtime import eventloop
from muster_runtime.logs import configure
from muster_runtime.settings import Settings

from muster_recovery.bootstrap import build


def run() -> None:
    configure("recovery")
    eventloop.run(build(Settings.from_env()).app.run())
