"""Publishing right after commit: the process whose transaction wrote outbox rows publishes
them itself as soon as it commits, then deletes the rows in batches. The outbox stays the
guarantee: a row this process could not publish (it died, the broker was down) is still
there, and the relay publishes it once it is older than its grace period (ADR 0011).

Rows are collected while a unit of work runs (`collecting`); `eventstore.append` and
`outbox.enqueue` add theirs through `collect`, so neither needs the dispatcher passed in.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Iterator
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any

from muster_runtime.messaging.local_broker.bells import Ringer
from muster_runtime.process.db import Pool

log = logging.getLogger("muster.outbox")


@dataclass(frozen=True)
class Outgoing:
    """One outbox row and the Kafka records it stands for (an append covers several)."""

    outbox_id: int
    topic: str
    key: bytes
    values: tuple[bytes, ...]
    # The trace context's Kafka headers, shared by the row's records (None: not tracing).
    headers: list[tuple[str, bytes]] | None = None


_collected: ContextVar[list[Outgoing] | None] = ContextVar("muster_outgoing", default=None)


def claiming() -> bool:
    """Whether outbox rows written now will be published by this process after commit;
    writers mark such rows `claimed` and need not wake the relay."""
    return _collected.get() is not None


def collect(item: Outgoing) -> None:
    """Called by the writers of outbox rows; a no-op outside a collecting unit of work."""
    pending = _collected.get()
    if pending is not None:
        pending.append(item)


@contextlib.contextmanager
def collecting() -> Iterator[list[Outgoing]]:
    """Collect the outbox rows written in this context (child tasks share the list)."""
    items: list[Outgoing] = []
    token = _collected.set(items)
    try:
        yield items
    finally:
        _collected.reset(token)


class Dispatcher:
    """Publishes committed outbox rows at once and deletes them in batches.

    A publish failure only logs: the rows stay and the relay sends them later. Deleting
    late is harmless too: a row published twice is a duplicate every consumer ignores."""

    # Deletions wait this long to batch up (one statement for many rows), well inside the
    # relay's grace for claimed rows (`outbox.CLAIM_GRACE_S`), so it never resends them.
    FLUSH_EVERY_S = 0.2

    def __init__(
        self, producer: Any, pool: Pool, *, flush_every_s: float = FLUSH_EVERY_S, ringer: Ringer | None = None
    ) -> None:
        self._producer = producer
        self._pool = pool
        self._ringer = ringer
        self._flush_every_s = flush_every_s
        self._sent: list[int] = []
        self._wake = asyncio.Event()
        self._confirming: set[asyncio.Task[None]] = set()
        self._flushing = asyncio.Lock()

    async def dispatch(self, items: list[Outgoing]) -> None:
        try:
            futures = [
                await self._producer.send(item.topic, value, key=item.key, headers=item.headers)
                for item in items
                for value in item.values
            ]
        except Exception as exc:  # the relay publishes the rows after their grace period
            log.warning("direct_publish_failed error=%s rows=%d", type(exc).__name__, len(items))
            return
        task = asyncio.create_task(self._confirm(items, futures))
        self._confirming.add(task)
        task.add_done_callback(self._confirming.discard)

    async def _confirm(self, items: list[Outgoing], futures: list[Any]) -> None:
        try:
            await asyncio.gather(*futures)
        except Exception as exc:
            log.warning("direct_publish_failed error=%s rows=%d", type(exc).__name__, len(items))
            return
        if self._ringer is not None:  # acknowledged: a consumer rung now finds the records
            self._ringer.ring_records((item.topic, item.key) for item in items)
        self._sent += [item.outbox_id for item in items]
        self._wake.set()

    async def run(self) -> None:
        """Delete published rows: one statement per batch, at most every `flush_every_s`."""
        while True:
            await self._wake.wait()
            self._wake.clear()
            await asyncio.sleep(self._flush_every_s)
            await self._flush()

    async def close(self) -> None:
        """Wait for the acknowledgements in flight and delete what they confirmed."""
        await asyncio.gather(*self._confirming, return_exceptions=True)
        await self._flush()

    async def _flush(self) -> None:
        async with self._flushing:  # `close` waits for a deletion in flight
            ids, self._sent = self._sent, []
            if not ids:
                return
            try:
                await self._pool.execute("DELETE FROM outbox WHERE id = ANY($1::bigint[])", ids)
            except Exception as exc:  # left for the relay, which publishes and deletes them
                log.warning("outbox_cleanup_failed error=%s rows=%d", type(exc).__name__, len(ids))


_installed: Dispatcher | None = None


def install(dispatcher: Dispatcher | None) -> None:
    """Make `dispatcher` publish what this process's units of work commit (None: only the
    relay publishes, e.g. in tools and tests without a broker)."""
    global _installed
    _installed = dispatcher


def installed() -> Dispatcher | None:
    return _installed
