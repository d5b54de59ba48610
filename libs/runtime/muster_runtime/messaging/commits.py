"""Offset commits that neither hold up the next batch nor go out once per batch.

FastStream acks a batch with `consumer.commit()` (no offsets: every position the consumer
has handed out) and fetches the next batch only when that round trip returns. Here
`commit()` takes the same offsets at once — the loop is sequential, so they are exactly
the batch just handled — and returns; a committer task sends them in the background.
Under load a consumer handles a batch every few milliseconds, and one offset commit per
batch was a fifth of the broker requests of a delegated turn: the committer sends at most
one commit per `COMMIT_EVERY_S`, always with the newest handled offsets (the first commit
after a quiet spell goes out at once).

At-least-once holds: only offsets of handled batches are committed (a failed batch is
nacked, never committed, and FastStream seeks back to it); commits go out one at a time
and in order, so a later one never lands before an earlier one; a commit that fails
(rebalance, broker restart) or never goes out (the process dies within the interval) only
means those records are delivered again, which handlers tolerate (they are idempotent,
through the processed-message table), exactly as when a synchronous commit failed.
`stop()` sends the newest offsets (a few seconds at most), so a clean shutdown loses none.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from aiokafka import AIOKafkaConsumer

log = logging.getLogger("muster.kafka")

STOP_FLUSH_S = 3.0
COMMIT_EVERY_S = 0.5


class CommitBehind(AIOKafkaConsumer):  # type: ignore[misc]  # aiokafka is untyped
    commit_every_s: float = COMMIT_EVERY_S
    _committer: asyncio.Task[None] | None = None
    _in_flight: asyncio.Future[None] | None = None
    _pending: dict[Any, Any] | None = None

    async def commit(self, offsets: Any = None) -> None:
        if offsets is not None:
            await self._settle()
            await super().commit(offsets)
            return
        subscription = self._subscription.subscription
        if subscription is None or subscription.assignment is None:
            await super().commit()  # raises aiokafka's own error
            return
        # Taken now, before the consume loop can fetch again: the handled batch's end.
        consumed = subscription.assignment.all_consumed_offsets()
        if not consumed:
            return
        self._pending = consumed
        if self._committer is None or self._committer.done():
            self._committer = asyncio.ensure_future(self._commit_pending())

    async def _commit_pending(self) -> None:
        """Send the newest offsets, then wait out the interval; go on while batches came
        in meanwhile. Not tied to the consume loop: cancelling it leaves this running."""
        while self._pending is not None:
            offsets, self._pending = self._pending, None
            # Shielded: stopping the committer never cancels a commit already sent.
            self._in_flight = asyncio.ensure_future(self._commit_logged(offsets))
            await asyncio.shield(self._in_flight)
            await asyncio.sleep(self.commit_every_s)

    async def _commit_logged(self, offsets: dict[Any, Any]) -> None:
        try:
            await AIOKafkaConsumer.commit(self, offsets)
        except Exception as exc:  # the records are delivered again; handlers are idempotent
            log.warning("offset_commit_failed group=%s error=%s", self._group_id, type(exc).__name__)

    async def _settle(self) -> None:
        """Stop the committer, let the commit it sent land, then send what it still held:
        in order, and an explicit commit that follows is the last word."""
        committer, self._committer = self._committer, None
        if committer is not None and not committer.done():
            committer.cancel()
            await asyncio.gather(committer, return_exceptions=True)
        in_flight, self._in_flight = self._in_flight, None
        if in_flight is not None:
            await in_flight
        pending, self._pending = self._pending, None
        if pending is not None:
            await self._commit_logged(pending)

    async def stop(self) -> None:
        # Bounded: aiokafka retries a commit while the broker is unreachable.
        try:
            await asyncio.wait_for(self._settle(), timeout=STOP_FLUSH_S)
        except TimeoutError:
            log.warning("offset_commit_on_stop_timed_out group=%s", self._group_id)
        await super().stop()
