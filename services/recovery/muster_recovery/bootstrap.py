"""Composition root of the recovery service, shared by production and tests."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator
from dataclasses import dataclass, field

from faststream import FastStream
from faststream.kafka import KafkaBroker
from muster_runtime.db import Pool, create_pool
from muster_runtime.kafka import publisher, start_producer
from muster_runtime.outbox import OutboxRelay
from muster_runtime.settings import Settings

from muster_recovery.reconcile import reconcile_sessions

log = logging.getLogger("muster.recovery")


@dataclass
class Recovery:
    settings: Settings
    broker: KafkaBroker
    app: FastStream
    tasks: list[asyncio.Task[None]] = field(default_factory=list)


async def reconcile_forever(pool: Pool, interval_s: float) -> None:
    while True:
        try:
            await reconcile_sessions(pool)
        except Exception:
            log.exception("reconcile_failed")
        await asyncio.sleep(interval_s)


def build(settings: Settings) -> Recovery:
    broker = KafkaBroker(settings.kafka_bootstrap_servers or "localhost:9092")

    @contextlib.asynccontextmanager
    async def lifespan() -> AsyncIterator[None]:
        pool = await create_pool(settings.database_url)
        producer = await start_producer(settings)
        relay = OutboxRelay(pool, settings.database_url, publisher(producer))
        recovery.tasks += [
            asyncio.create_task(relay.run()),
            asyncio.create_task(reconcile_forever(pool, settings.reconcile_interval_s)),
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
    return recovery
