"""`muster-harness`: runs NORMAL and SIDE_TASK session loops."""

from __future__ import annotations

from muster_runtime.process import eventloop
from muster_runtime.process.logs import configure
from muster_runtime.process.settings import Settings

from muster_harness.bootstrap import build


def run() -> None:
    settings = Settings.from_env()
    configure("harness", settings.log_level)
    harness = build(settings)
    eventloop.run(harness.app.run())
