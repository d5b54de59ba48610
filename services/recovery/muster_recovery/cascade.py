"""A cancelled parent cancels its children (and, through their own cancellation events,
theirs)."""

from __future__ import annotations

import logging
from uuid import UUID

from muster_agent.barrier import settle
from muster_agent.stopping import stop_execution
from muster_runtime.uow.aggregates import Execution
from muster_runtime.uow.unit_of_work import UnitOfWorkFactory

log = logging.getLogger("muster.recovery")


async def cancel_children(uows: UnitOfWorkFactory, parent_session_id: UUID) -> int:
    async with uows() as uow:
        children = [Execution.of(row) for row in await uow.executions_of(parent_session_id, open_only=True)]
    for child in children:
        await stop_execution(
            uows, child.execution_id, status="CANCELLED", error="cancelled: the parent session was cancelled"
        )
    await settle(uows, parent_session_id)
    return len(children)
