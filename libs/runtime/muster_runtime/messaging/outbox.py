"""Transactional outbox: messages are written with the decision that caused them and
published by `OutboxRelay`, so a crash between commit and publish loses nothing."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import Any

import asyncpg
from muster_contracts.envelope import Envelope

from muster_runtime.messaging import dispatch
from muster_runtime.process import retrying, tracing
from muster_runtime.process.db import Connection, Pool, json_bytes
from muster_runtime.store import lineage
from muster_runtime.store.eventstore import StagedCommand, recorded_event, write_staged

log = logging.getLogger("muster.outbox")

NOTIFY_CHANNEL = "muster_outbox"
# One relay drains at a time, so messages of a key reach Kafka in commit order.
RELAY_LOCK_KEY = 0x6D757374  # "must"
# Every service runs a relay but only the holder of this session lock is active: the others
# stand by and take over within `STANDBY_POLL_S` when the leader's connection goes away.
LEADER_LOCK_KEY = 0x6C656164  # "lead"
STANDBY_POLL_S = 1.0
# A leader that hangs without dying (frozen, stopped, swapping) keeps its session lock: a
# standby that sees the oldest row wait this long drains it itself. The per-batch lock keeps
# the order; a leader frozen inside a batch loses its session to the server's idle timeout.
STALLED_AFTER_S = 5.0
# A row claimed by its writer (published right after commit, see `dispatch`) is left to it
# this long; past that the writer died or failed to publish, and the relay sends it.
CLAIM_GRACE_S = 1.0
BATCH_IDLE_TIMEOUT = "15s"

# (topic, key, value, headers): one Kafka record; headers carry the trace context, if any.
Record = tuple[str, bytes, bytes, tracing.Headers | None]
Publish = Callable[[list[Record]], Awaitable[None]]


def command(topic: str, key: str, message: Envelope) -> StagedCommand:
    """A command's outbox row, written with the decision (`eventstore.write_staged`); a
    collecting unit of work publishes it right after commit, else the relay does after its
    grace period. Its correlation and causation ids are filled now, and the current trace
    context is kept with the row, so whoever publishes it sends the same headers."""
    body = lineage.fill(message.model_dump(mode="json"))
    return StagedCommand(topic, key, body, dispatch.claiming(), tracing.traceparent())


async def enqueue(conn: Connection, topic: str, key: str, message: Envelope) -> None:
    """Write a command to the outbox inside the caller's transaction, at once (see
    `command`): the same statement a unit of work's staged writes use."""
    await write_staged(conn, [], [command(topic, key, message)])


def _event_message(row: Any) -> dict[str, Any]:
    return recorded_event(
        event_id=row["event_id"],
        position=row["event_position"],
        stream_id=row["stream_id"],
        stream_version=row["stream_version"],
        type=row["type"],
        schema_version=row["schema_version"],
        payload=row["event_payload"],
        metadata=row["metadata"],
        recorded_at=row["recorded_at"],
    )


STALLED = """
SELECT created_at < now() - make_interval(secs => $1) FROM outbox ORDER BY id LIMIT 1
"""


class OutboxRelay:
    """Publishes outbox rows to Kafka, woken by LISTEN/NOTIFY (with a slow safety poll)."""

    def __init__(
        self,
        pool: Pool,
        database_url: str,
        publish: Publish,
        *,
        batch: int = 500,
        grace_s: float = CLAIM_GRACE_S,
    ):
        self._pool = pool
        self._grace_s = grace_s
        self._database_url = database_url
        self._publish = publish
        self._batch = batch
        self._wake = asyncio.Event()
        self.published = 0

    async def run_forever(self) -> None:
        """`run`, restarted with backoff when its connection fails (database restart)."""

        def before_sleep(state: retrying.RetryCallState) -> None:
            log.warning(
                "outbox_relay_restart error=%s delay=%.1fs", retrying.error_name(state), state.upcoming_sleep
            )

        errors = (OSError, asyncpg.PostgresError, asyncpg.InterfaceError)
        await retrying.call(retrying.forever(errors, before_sleep=before_sleep), self.run)

    async def run(self) -> None:
        listener: asyncpg.Connection = await asyncpg.connect(self._database_url)
        try:
            # Standby: polling is the only way to learn that a session lock was freed.
            while not await listener.fetchval("SELECT pg_try_advisory_lock($1)", LEADER_LOCK_KEY):
                if await listener.fetchval(STALLED, STALLED_AFTER_S):
                    log.warning("outbox_relay_takeover reason=leader_stalled")
                    try:
                        await self.drain()
                    except Exception as exc:  # the leader, or the next poll, will retry
                        log.warning("outbox_relay_error error=%s", type(exc).__name__)
                await asyncio.sleep(STANDBY_POLL_S)
            log.info("outbox_relay_leader")
            await listener.add_listener(NOTIFY_CHANNEL, lambda *_: self._wake.set())
            while True:
                try:
                    await self.drain()
                except (TimeoutError, OSError, asyncpg.PostgresError) as exc:
                    log.warning("outbox_relay_error error=%s", type(exc).__name__)
                    await asyncio.sleep(0.5)
                    continue
                try:
                    await asyncio.wait_for(self._wake.wait(), timeout=1.0)
                except TimeoutError:
                    pass
                self._wake.clear()
        finally:
            await listener.close()

    async def drain(self) -> int:
        total = 0
        while True:
            sent = await self._drain_batch()
            total += sent
            if sent < self._batch:
                return total

    async def _drain_batch(self) -> int:
        async with self._pool.acquire() as conn, conn.transaction():
            await conn.execute(f"SET LOCAL idle_in_transaction_session_timeout = '{BATCH_IDLE_TIMEOUT}'")
            await conn.execute("SELECT pg_advisory_xact_lock($1)", RELAY_LOCK_KEY)
            rows = await conn.fetch(
                """SELECT o.id, o.topic, o.key, o.payload, o.trace_context, e.position AS event_position,
                          e.event_id, e.stream_id, e.stream_version, e.type, e.schema_version,
                          e.payload AS event_payload, e.metadata, e.recorded_at
                   FROM (SELECT * FROM outbox
                         WHERE NOT claimed OR created_at < now() - make_interval(secs => $2)
                         ORDER BY id LIMIT $1) o
                   LEFT JOIN events e ON o.event_position IS NOT NULL AND e.stream_id = o.key
                        AND e.position BETWEEN o.event_position AND o.event_last_position
                   ORDER BY o.id, e.position""",
                self._batch,
                self._grace_s,
            )
            if not rows:
                return 0
            batch = []
            for row in rows:
                if row["payload"] is None and row["event_position"] is None:
                    continue  # events row missing: cannot happen (same transaction), skip safely
                if row["event_position"] is None:
                    body, context = row["payload"], row["trace_context"]
                else:
                    body = _event_message(row)
                    context = row["metadata"].get(tracing.TRACEPARENT)
                batch.append(
                    (row["topic"], row["key"].encode(), json_bytes(body), tracing.headers(context))
                )
            await self._publish(batch)
            ids = sorted({r["id"] for r in rows})
            await conn.execute("DELETE FROM outbox WHERE id = ANY($1::bigint[])", ids)
            self.published += len(rows)
            return len(ids)
