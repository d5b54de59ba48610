"""Composition root of the subagent worker (executions arrive with the delegation issue)."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass, field

from faststream import FastStream
from faststream.kafka import KafkaBroker
from muster_runtime.db import create_pool
from muster_runtime.kafka import publisher, start_producer
from muster_runtime.outbox import OutboxRelay
from muster_runtime.settings import Settings


@dataclass
class Worker:
    settings: Settings
    broker: KafkaBroker
    app: FastStream
    tasks: list[asyncio.Task[None]] = field(default_factory=list)


def build(settings: Settings) -> Worker:
    broker = KafkaBroker(settings.kafka_bootstrap_servers or "localhost:9092")

    @contextlib.asynccontextmanager
    async def lifespan() -> AsyncIterator[None]:
        pool = await create_pool(settings.database_url)
        producer = await start_producer(settings)
        worker.tasks.append(
            asyncio.create_task(OutboxRelay(pool, settings.database_url, publisher(producer)).run())
        )
        try:
            yield
        finally:
            for task in worker.tasks:
                task.cancel()
            await asyncio.gather(*worker.tasks, return_exceptions=True)
            await producer.stop()
            await pool.close()

    app = FastStream(broker, lifespan=lifespan)
    worker = Worker(settings=settings, broker=broker, app=app)
    return worker
