"""Composition root of the harness, shared by production (`entrypoint`) and tests."""

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
from muster_agent.delegation import Delegator
from muster_agent.loop import LoopDeps
from muster_agent.models import build_model
from muster_agent.runners import Runners
from muster_contracts.commands import SESSION_COMMANDS, CancelSession
from muster_runtime import topics
from muster_runtime.consuming import BATCH_OPTIONS, per_key, records_of
from muster_runtime.db import create_pool
from muster_runtime.edge import Edge
from muster_runtime.kafka import consumer_options, publisher, start_producer
from muster_runtime.outbox import OutboxRelay
from muster_runtime.settings import Settings

from muster_harness import handlers
from muster_harness.handlers import HarnessDeps


@dataclass
class Harness:
    settings: Settings
    broker: KafkaBroker
    app: FastStream
    edge: Edge
    deps: HarnessDeps | None = None
    tasks: list[asyncio.Task[None]] = field(default_factory=list)


def build(settings: Settings) -> Harness:
    # Our log format; FastStream's per-message lines only at DEBUG.
    broker = KafkaBroker(
        settings.kafka_bootstrap_servers or "localhost:9092",
        logger=logging.getLogger("muster.harness.kafka"),
        log_level=logging.DEBUG,
    )
    edge = Edge(handlers.CONSUMER, topics.COMMANDS)

    @contextlib.asynccontextmanager
    async def lifespan() -> AsyncIterator[None]:
        pool = await create_pool(settings.database_url, max_size=20)
        producer = await start_producer(settings)
        edge.producer = producer
        runners = Runners(pool, settings.instance_id, settings.lease_ttl_s)
        agents = AgentRegistry.load()
        loop = LoopDeps(
            pool=pool,
            model=build_model(settings.model),
            agents=agents,
            workspaces=settings.workspaces_dir,
            delegation=Delegator(pool, agents, settings.execution_timeout_s),
        )
        harness.deps = HarnessDeps(loop=loop, runners=runners, lease_ttl_s=settings.lease_ttl_s)
        relay = OutboxRelay(pool, settings.database_url, publisher(producer))
        harness.tasks.append(asyncio.create_task(relay.run_forever()))
        try:
            yield
        finally:
            await runners.stop_all()
            for task in harness.tasks:
                task.cancel()
            await asyncio.gather(*harness.tasks, return_exceptions=True)
            await producer.stop()
            await pool.close()

    app = FastStream(broker, lifespan=lifespan)
    harness = Harness(settings=settings, broker=broker, app=app, edge=edge)

    @broker.subscriber(  # type: ignore[untyped-decorator]  # **options hide the typed overload
        topics.COMMANDS,
        group_id="harness",
        ack_policy=AckPolicy.NACK_ON_ERROR,
        title="harness-commands",
        description="Session commands: ProcessSession, ResumeSession, CancelSession.",
        **BATCH_OPTIONS,
        **consumer_options(settings),
    )
    async def on_commands(msg: KafkaMessage) -> None:
        await per_key(
            records_of(msg.raw_message),
            lambda record: edge.handle(
                record.value,
                record.key,
                SESSION_COMMANDS,
                _dispatch,
                offset=(record.topic, record.partition, record.offset),
            ),
        )

    async def _dispatch(command: object) -> None:
        assert harness.deps is not None
        if isinstance(command, CancelSession):
            await handlers.cancel_session(command, harness.deps)
        else:
            await handlers.process_session(command, harness.deps)  # type: ignore[arg-type]

    return harness
