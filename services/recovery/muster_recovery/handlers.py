"""Reactions to events on `muster.events`. Each is idempotent by construction: decisions are
re-read under row locks and appends name the version they extend, so a redelivered event
finds nothing left to do."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import Any
from uuid import UUID

from muster_agent.barrier import barrier_checked, has_undelivered, settle
from muster_contracts.published import RecordedEvent
from muster_runtime.uow.aggregates import Execution
from muster_runtime.uow.unit_of_work import UnitOfWorkFactory

from muster_recovery.cascade import cancel_children

log = logging.getLogger("muster.recovery")


def reacts_to(event_type: str, payload: dict[str, Any], metadata: dict[str, Any]) -> bool:
    """Whether `on_event` does anything with an event of this type, payload and metadata."""
    if event_type == "SessionPhaseChanged":
        return payload.get("phase") == "CANCELLED"
    if event_type == "MessageRecorded":
        # A subagent's result delivered by the barrier settles its round itself.
        return payload.get("role") == "TOOL" and not payload.get("source_session_id")
    # A finish whose writer settled the barrier under the parent's lock needs nothing more;
    # any other (an older writer's) is checked here.
    return event_type == "ExecutionFinished" and not barrier_checked(metadata)


async def on_event(
    event: RecordedEvent, uows: UnitOfWorkFactory, is_subagent: Callable[[UUID], Awaitable[bool]]
) -> None:
    if event.type == "ExecutionFinished" and reacts_to(event.type, event.payload, event.metadata):
        # Only the last open sibling can complete the barrier; the others would take the
        # parent's lock to find it still waiting. Its worker normally settled it already, in
        # the transaction that finished it (ADR 0011): then nothing is undelivered. (The
        # periodic scan settles anything missed.)
        parent = await _parent_due(uows, UUID(event.stream_id))
        if parent is not None:
            await settle(uows, parent)
    elif event.type == "SessionPhaseChanged" and event.payload.get("phase") == "CANCELLED":
        await cancel_children(uows, UUID(event.stream_id))
    elif event.type == "MessageRecorded" and reacts_to(event.type, event.payload, event.metadata):
        # A local tool finishing after the children did completes the barrier too (a
        # subagent never delegates: nothing waits on its tools).
        session_id = UUID(event.stream_id)
        if not await is_subagent(session_id) and await has_undelivered(uows, session_id):
            await settle(uows, session_id)


async def _parent_due(uows: UnitOfWorkFactory, execution_id: UUID) -> UUID | None:
    """The execution's parent, when none of its children runs and one is undelivered."""
    async with uows() as uow:
        row = await uow.execution(execution_id)
        if row is None:
            return None
        parent_session_id = Execution.of(row).parent_session_id
        siblings = [Execution.of(e) for e in await uow.executions_of(parent_session_id)]
    if any(e.open for e in siblings):
        return None
    due = any(e.delivery_status == "PENDING" for e in siblings)
    return parent_session_id if due else None
