"""Offset commits that do not hold up the next batch.

FastStream acks a batch with `consumer.commit()` (no offsets: every position the consumer
has handed out) and fetches the next batch only when that round trip returns. Here
`commit()` takes the same offsets at once — the loop is sequential, so they are exactly
the batch just handled — and sends them while the next batch is handled.

At-least-once holds: only offsets of handled batches are committed (a failed batch is
nacked, never committed, and FastStream seeks back to it); commits go out one at a time
and in order, so a later one never lands before an earlier one; a commit that fails
(rebalance, broker restart) only means those records are delivered again, which handlers
tolerate (they are idempotent), exactly as when a synchronous commit failed. `stop()`
waits (a few seconds at most) for the commit in flight, so a clean shutdown loses none.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from aiokafka import AIOKafkaConsumer

log = logging.getLogger("muster.kafka")

STOP_FLUSH_S = 3.0


class CommitBehind(AIOKafkaConsumer):  # type: ignore[misc]  # aiokafka is untyped
    _commit_in_flight: asyncio.Task[None] | None = None

    async def commit(self, offsets: Any = None) -> None:
        if offsets is not None:
            await self._settle_commit()
            await super().commit(offsets)
            return
        subscription = self._subscription.subscription
        if subscription is None or subscription.assignment is None:
            await super().commit()  # raises aiokafka's own error
            return
        # Taken now, before the consume loop can fetch again: the handled batch's end.
        consumed = subscription.assignment.all_consumed_offsets()
        await self._settle_commit()
        if consumed:
            self._commit_in_flight = asyncio.ensure_future(self._commit_logged(consumed))

    async def _commit_logged(self, offsets: dict[Any, Any]) -> None:
        try:
            await AIOKafkaConsumer.commit(self, offsets)
        except Exception as exc:  # the records are delivered again; handlers are idempotent
            log.warning("offset_commit_failed group=%s error=%s", self._group_id, type(exc).__name__)

    async def _settle_commit(self) -> None:
        """Wait for the commit in flight. Shielded: a cancelled consume loop leaves it
        running for `stop()` to wait for."""
        pending = self._commit_in_flight
        if pending is not None:
            await asyncio.shield(pending)
            if self._commit_in_flight is pending:
                self._commit_in_flight = None

    async def stop(self) -> None:
        # Bounded: aiokafka retries a commit while the broker is unreachable.
        pending, self._commit_in_flight = self._commit_in_flight, None
        if pending is not None:
            await asyncio.wait([pending], timeout=STOP_FLUSH_S)
            pending.cancel()
        await super().stop()
