"""The services' event loop: uvloop (libuv) where it is installed, else asyncio's own.

uvloop is a dependency of muster-runtime on every platform it supports, so the fallback
only matters where it cannot be installed (Windows). The gateway's uvicorn picks uvloop
the same way (`loop="auto"`).
"""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from typing import Any, TypeVar

from muster_runtime.process import collector

T = TypeVar("T")


def run(main: Coroutine[Any, Any, T]) -> T:
    collector.tune()
    try:
        import uvloop
    except ImportError:  # pragma: no cover - platforms without uvloop
        return asyncio.run(main)
    return uvloop.run(main)
