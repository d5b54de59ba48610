"""Publishing answer previews (`muster.deltas`, ADR 0039) without slowing the loop.

`offer` never waits: a piece goes into a bounded buffer, or is dropped when the buffer is
full (a delta is a preview; the durable message follows whatever happens). One background
task sends what has gathered as one batch, waits for the broker's acknowledgement there —
never in the loop — and then rings the local broker's bells so the gateway fetches at once.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any

from muster_contracts.deltas import encode_delta

from muster_runtime.messaging import topics
from muster_runtime.messaging.kafka import publisher
from muster_runtime.messaging.local_broker.bells import Ringer
from muster_runtime.messaging.outbox import Record

log = logging.getLogger("muster.deltas")

DEFAULT_BUFFER = 2_000  # pieces waiting to be sent, over every session of the process


class DeltaPublisher:
    def __init__(self, producer: Any, ringer: Ringer | None = None, *, buffer: int = DEFAULT_BUFFER) -> None:
        self._publish = publisher(producer, ringer)
        self._ringer = ringer
        self._queue: asyncio.Queue[Record] = asyncio.Queue(maxsize=buffer)
        self.dropped = 0

    def offer(self, session_id: str, message_id: str, index: int, text: str, after_version: int = 0) -> None:
        """Queue one piece for publishing, or drop it when the buffer is full."""
        value = encode_delta(session_id, message_id, index, text, time.time(), after_version)
        try:
            self._queue.put_nowait((topics.DELTAS, session_id.encode(), value, None))
        except asyncio.QueueFull:
            self.dropped += 1
            if self.dropped == 1 or self.dropped % 1000 == 0:
                log.warning("deltas_dropped count=%d", self.dropped)

    async def run(self) -> None:
        """Send what has gathered, batch after batch, until cancelled."""
        try:
            while True:
                batch = [await self._queue.get()]
                while not self._queue.empty():
                    batch.append(self._queue.get_nowait())
                try:
                    await self._publish(batch)
                except asyncio.CancelledError:
                    raise
                except Exception as exc:  # a preview lost: the durable message still follows
                    self.dropped += len(batch)
                    log.warning("deltas_publish_failed count=%d error=%s", len(batch), type(exc).__name__)
        finally:
            if self._ringer is not None:
                self._ringer.close()
