"""Composition root of the recovery service, shared by production and tests."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field

from faststream import AckPolicy, FastStream
from faststream.kafka import KafkaBroker
from faststream.kafka.annotations import KafkaMessage
from muster_contracts.published import RecordedEvent
from muster_runtime import topics
from muster_runtime.consuming import BATCH_OPTIONS, per_key, records_of
from muster_runtime.db import Pool, create_pool
from muster_runtime.edge import Edge
from muster_runtime.kafka import consumer_options, publisher, start_producer
from muster_runtime.outbox import OutboxRelay
from muster_runtime.settings import Settings
from pydantic import TypeAdapter

from muster_recovery import handlers
from muster_recovery.reconcile import housekeeping, reconcile_executions, reconcile_sessions

log = logging.getLogger("muster.recovery")

EVENT_MESSAGE: TypeAdapter[RecordedEvent] = TypeAdapter(RecordedEvent)


@dataclass
class Recovery:
    settings: Settings
    broker: KafkaBroker
    app: FastStream
    pool: Pool | None = None
    tasks: list[asyncio.Task[None]] = field(default_factory=list)


HOUSEKEEPING_EVERY_S = 300.0


async def reconcile_forever(pool: Pool, settings: Settings) -> None:
    last_housekeeping = 0.0
    while True:
        try:
            await reconcile_sessions(pool)
            if time.monotonic() - last_housekeeping > HOUSEKEEPING_EVERY_S:
                await housekeeping(pool)
                last_housekeeping = time.monotonic()
            await reconcile_executions(
                pool, grace_s=settings.lease_ttl_s, cancel_grace_s=settings.cancel_grace_s
            )
        except Exception:
            log.exception("reconcile_failed")
        await asyncio.sleep(settings.reconcile_interval_s)


def build(settings: Settings) -> Recovery:
    # Our log format; FastStream's per-message lines only at DEBUG.
    broker = KafkaBroker(
        settings.kafka_bootstrap_servers or "localhost:9092",
        logger=logging.getLogger("muster.recovery.kafka"),
        log_level=logging.DEBUG,
    )

    @contextlib.asynccontextmanager
    async def lifespan() -> AsyncIterator[None]:
        pool = await create_pool(settings.database_url)
        producer = await start_producer(settings)
        edge.producer = producer
        recovery.pool = pool
        relay = OutboxRelay(pool, settings.database_url, publisher(producer))
        recovery.tasks += [
            asyncio.create_task(relay.run_forever()),
            asyncio.create_task(reconcile_forever(pool, settings)),
        ]
        try:
            yield
        finally:
            for task in recovery.tasks:
                task.cancel()
            await asyncio.gather(*recovery.tasks, return_exceptions=True)
            await producer.stop()
            await pool.close()

    app = FastStream(broker, lifespan=lifespan)
    recovery = Recovery(settings=settings, broker=broker, app=app)
    edge = Edge("recovery", topics.EVENTS)

    @broker.subscriber(  # type: ignore[untyped-decorator]  # **options hide the typed overload
        topics.EVENTS,
        group_id="recovery",
        ack_policy=AckPolicy.NACK_ON_ERROR,
        title="recovery-events",
        description="Every recorded event; drives the barrier and cancellation cascades.",
        **BATCH_OPTIONS,
        **consumer_options(settings),
    )
    async def on_events(msg: KafkaMessage) -> None:
        await per_key(
            records_of(msg.raw_message),
            lambda record: edge.handle(
                record.value,
                record.key,
                EVENT_MESSAGE,
                _dispatch,
                offset=(record.topic, record.partition, record.offset),
            ),
        )

    async def _dispatch(event: RecordedEvent) -> None:
        assert recovery.pool is not None
        await handlers.on_event(event, recovery.pool)

    return recovery
