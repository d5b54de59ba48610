"""Composition root of the subagent worker, shared by production and tests."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator
from dataclasses import dataclass, field

from faststream import AckPolicy, FastStream
from faststream.kafka import KafkaBroker
from faststream.kafka.annotations import KafkaMessage
from muster_agent.agents import AgentRegistry
from muster_agent.executions import finish_execution
from muster_agent.loop import LoopDeps
from muster_agent.models import build_model
from muster_agent.runners import Runners
from muster_contracts.commands import DELEGATION_COMMANDS, CancelExecution, RunExecution
from muster_runtime import topics
from muster_runtime.consuming import BATCH_OPTIONS, per_key, records_of
from muster_runtime.db import create_pool
from muster_runtime.edge import Edge
from muster_runtime.kafka import consumer_options, publisher, start_producer
from muster_runtime.outbox import OutboxRelay
from muster_runtime.settings import Settings

from muster_subagent_worker import handlers
from muster_subagent_worker.handlers import WorkerDeps


@dataclass
class Worker:
    settings: Settings
    broker: KafkaBroker
    app: FastStream
    edge: Edge
    deps: WorkerDeps | None = None
    tasks: list[asyncio.Task[None]] = field(default_factory=list)


def build(settings: Settings) -> Worker:
    # Our log format; FastStream's per-message lines only at DEBUG.
    broker = KafkaBroker(
        settings.kafka_bootstrap_servers or "localhost:9092",
        logger=logging.getLogger("muster.subagent-worker.kafka"),
        log_level=logging.DEBUG,
    )
    edge = Edge(handlers.CONSUMER, topics.DELEGATIONS)

    @contextlib.asynccontextmanager
    async def lifespan() -> AsyncIterator[None]:
        pool = await create_pool(settings.database_url, max_size=settings.worker_concurrency + 4)
        producer = await start_producer(settings)
        edge.producer = producer
        runners = Runners(pool, settings.instance_id, settings.lease_ttl_s, limit=settings.worker_concurrency)
        loop = LoopDeps(
            pool=pool,
            model=build_model(settings.model),
            agents=AgentRegistry.load(),
            workspaces=settings.workspaces_dir,
            on_close=finish_execution,
        )
        worker.deps = WorkerDeps(loop=loop, runners=runners, lease_ttl_s=settings.lease_ttl_s)
        worker.tasks.append(
            asyncio.create_task(OutboxRelay(pool, settings.database_url, publisher(producer)).run_forever())
        )
        try:
            yield
        finally:
            await runners.stop_all()
            for task in worker.tasks:
                task.cancel()
            await asyncio.gather(*worker.tasks, return_exceptions=True)
            await producer.stop()
            await pool.close()

    app = FastStream(broker, lifespan=lifespan)
    worker = Worker(settings=settings, broker=broker, app=app, edge=edge)

    @broker.subscriber(  # type: ignore[untyped-decorator]  # **options hide the typed overload
        topics.DELEGATIONS,
        group_id="subagent-worker",
        ack_policy=AckPolicy.NACK_ON_ERROR,
        title="subagent-worker-delegations",
        description="RunExecution and CancelExecution, keyed by child session.",
        **BATCH_OPTIONS,
        **consumer_options(settings),
    )
    async def on_delegations(msg: KafkaMessage) -> None:
        await per_key(
            records_of(msg.raw_message),
            lambda record: edge.handle(
                record.value,
                record.key,
                DELEGATION_COMMANDS,
                _dispatch,
                offset=(record.topic, record.partition, record.offset),
            ),
        )

    async def _dispatch(command: RunExecution | CancelExecution) -> None:
        assert worker.deps is not None
        if isinstance(command, CancelExecution):
            await handlers.cancel_execution(command, worker.deps)
        else:
            await handlers.run_execution(command, worker.deps)

    return worker
