"""Composition root of the subagent worker, shared by production and tests."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass

from faststream import FastStream
from faststream.kafka import KafkaBroker
from muster_agent.agents import AgentRegistry
from muster_agent.compaction import Budget
from muster_agent.executions import finish_execution
from muster_agent.loop import LoopDeps
from muster_agent.mcp_tools.pool import McpTools
from muster_agent.models import build_model
from muster_agent.runners import Runners
from muster_contracts.commands import DELEGATION_COMMANDS, CancelExecution, RunExecution
from muster_runtime.messaging import topics
from muster_runtime.messaging.edge import Edge
from muster_runtime.messaging.service import make_broker, resources, subscribe_batch
from muster_runtime.process import tracing
from muster_runtime.process.settings import Settings

from muster_subagent_worker import handlers
from muster_subagent_worker.handlers import WorkerDeps


@dataclass
class Worker:
    settings: Settings
    broker: KafkaBroker
    app: FastStream
    edge: Edge
    deps: WorkerDeps | None = None


def build(settings: Settings) -> Worker:
    broker = make_broker(settings, "subagent-worker")
    edge = Edge(handlers.CONSUMER, topics.DELEGATIONS)

    @contextlib.asynccontextmanager
    async def lifespan() -> AsyncIterator[None]:
        async with (
            tracing.running("subagent-worker", settings),
            resources(settings, pool_size=settings.worker_concurrency + 4) as held,
        ):
            edge.producer = held.producer
            runners = Runners(
                held.pool, settings.instance_id, settings.lease_ttl_s, limit=settings.worker_concurrency
            )
            loop = LoopDeps(
                uows=held.uow,
                model=build_model(settings.model, settings),
                agents=AgentRegistry.load(settings.agents_file),
                workspaces=settings.workspaces_dir,
                budget=Budget(settings.context_tokens, settings.compaction_threshold),
                mcp=McpTools.from_settings(settings),
                on_close=finish_execution,
                on_close_locks_parent=True,
            )
            worker.deps = WorkerDeps(loop=loop, runners=runners, lease_ttl_s=settings.lease_ttl_s)
            try:
                yield
            finally:
                await runners.stop_all()
                if loop.mcp is not None:
                    await loop.mcp.close()  # stdio servers stop with the runners

    async def dispatch(command: RunExecution | CancelExecution) -> None:
        assert worker.deps is not None
        if isinstance(command, CancelExecution):
            await handlers.cancel_execution(command, worker.deps)
        else:
            await handlers.run_execution(command, worker.deps)

    subscribe_batch(
        broker,
        settings,
        edge,
        group_id="subagent-worker",
        adapter=DELEGATION_COMMANDS,
        dispatch=dispatch,
        title="subagent-worker-delegations",
        description="RunExecution and CancelExecution, keyed by child session.",
    )
    worker = Worker(settings=settings, broker=broker, app=FastStream(broker, lifespan=lifespan), edge=edge)
    return worker
