"""Stand-ins shared by the runtime's tests."""

from __future__ import annotations

import asyncio


class Producer:
    """Stands in for the Kafka producer behind `dispatch`: records every value and
    acknowledges it at once, or fails every send (a broker that is down)."""

    def __init__(self, fail: bool = False) -> None:
        self.sent: list[bytes] = []
        self.fail = fail

    async def send(self, topic: str, value: bytes, key: bytes, headers: list[tuple[str, bytes]] | None = None) -> asyncio.Future[None]:
        if self.fail:
            raise ConnectionError("broker unreachable")
        self.sent.append(value)
        done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        done.set_result(None)
        return done


class Clock:
    """A monotonic clock the test sets by hand (`clock.now = 1.0`)."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now
