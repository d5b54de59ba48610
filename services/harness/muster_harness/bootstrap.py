"""Composition root of the harness, shared by production (`entrypoint`) and tests."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass

from faststream import FastStream
from faststream.kafka import KafkaBroker
from muster_agent.agents import AgentRegistry
from muster_agent.compaction import Budget
from muster_agent.delegation import Delegator
from muster_agent.loop import LoopDeps
from muster_agent.mcp_tools.pool import McpTools
from muster_agent.models import build_model
from muster_agent.runners import Runners
from muster_contracts.commands import SESSION_COMMANDS, AnySessionCommand, CancelSession, CompactSession
from muster_runtime.messaging import topics
from muster_runtime.messaging.edge import Edge
from muster_runtime.messaging.service import make_broker, resources, subscribe_batch
from muster_runtime.process import tracing
from muster_runtime.process.settings import Settings

from muster_harness import handlers
from muster_harness.handlers import HarnessDeps


@dataclass
class Harness:
    settings: Settings
    broker: KafkaBroker
    app: FastStream
    edge: Edge
    deps: HarnessDeps | None = None


def build(settings: Settings) -> Harness:
    broker = make_broker(settings, "harness")
    edge = Edge(handlers.CONSUMER, topics.COMMANDS)

    @contextlib.asynccontextmanager
    async def lifespan() -> AsyncIterator[None]:
        async with tracing.running("harness", settings), resources(settings, pool_size=20) as held:
            edge.producer = held.producer
            runners = Runners(held.pool, settings.instance_id, settings.lease_ttl_s)
            agents = AgentRegistry.load(settings.agents_file)
            loop = LoopDeps(
                uows=held.uow,
                model=build_model(settings.model, settings),
                agents=agents,
                workspaces=settings.workspaces_dir,
                budget=Budget(settings.context_tokens, settings.compaction_threshold),
                mcp=McpTools.from_settings(settings),
                delegation=Delegator(held.uow, agents, settings.execution_timeout_s),
            )
            harness.deps = HarnessDeps(loop=loop, runners=runners, lease_ttl_s=settings.lease_ttl_s)
            try:
                yield
            finally:
                await runners.stop_all()
                if loop.mcp is not None:
                    await loop.mcp.close()  # stdio servers stop with the runners

    async def dispatch(command: AnySessionCommand) -> None:
        assert harness.deps is not None
        if isinstance(command, CancelSession):
            await handlers.cancel_session(command, harness.deps)
        elif isinstance(command, CompactSession):
            await handlers.compact_session(command, harness.deps)
        else:
            await handlers.process_session(command, harness.deps)

    subscribe_batch(
        broker,
        settings,
        edge,
        group_id="harness",
        adapter=SESSION_COMMANDS,
        dispatch=dispatch,
        title="harness-commands",
        description="Session commands: ProcessSession, ResumeSession, CancelSession, CompactSession.",
    )
    harness = Harness(settings=settings, broker=broker, app=FastStream(broker, lifespan=lifespan), edge=edge)
    return harness
