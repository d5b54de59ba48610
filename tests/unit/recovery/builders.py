"""Sessions and executions built through the real write paths (event store, Delegator)."""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import datetime
from typing import Any
from uuid import UUID, uuid4

from muster_agent import session_store as store
from muster_agent.agents import AgentRegistry
from muster_agent.delegation import Delegator, execution_id_for
from muster_contracts import events as ev
from muster_runtime.process.db import Pool
from muster_runtime.uow.unit_of_work import UnitOfWorkFactory


async def running_session(uows: UnitOfWorkFactory, user: str = "alice") -> UUID:
    sid = uuid4()
    async with uows() as uow:
        await uow.append(str(sid), [
            ev.SessionCreated(session_id=sid, user_id=user, root_session_id=sid),
            ev.MessageRecorded(message_id=uuid4(), seq=1, role="USER", content="go"),
            ev.SessionPhaseChanged(phase="RUNNING"),
        ], expected_version=0)
    return sid


async def record(uows: UnitOfWorkFactory, sid: UUID, events: Callable[[int], list[ev.DomainEvent]]) -> None:
    """Append `events(next_seq)` to a session as its runner would."""
    state = await store.read_state(uows, sid)
    assert state is not None
    assert await store.record_if_current(uows, state, events) is not None


def assistant(seq: int, calls: list[dict[str, Any]], content: str = "") -> ev.MessageRecorded:
    return ev.MessageRecorded(
        message_id=uuid4(), seq=seq, role="ASSISTANT", content=content,
        tool_calls=[ev.ToolCallSpec(**{**c, "arguments": json.dumps(c["arguments"])}) for c in calls] or None,
    )


def delegate_call(call_id: str, task: str = "child task", agent_type: str = "coder") -> dict[str, Any]:
    return {"id": call_id, "name": "delegate", "arguments": {"agent_type": agent_type, "task": task}}


async def delegating_parent(
    uows: UnitOfWorkFactory, call_ids: list[str], clock: Callable[[], datetime] | None = None
) -> tuple[UUID, list[UUID]]:
    """A parent whose round delegates one child per call id, created by the real Delegator."""
    parent = await running_session(uows)
    calls = [delegate_call(c) for c in call_ids]
    await record(uows, parent, lambda seq: [assistant(seq, calls)])
    state = await store.read_state(uows, parent)
    assert state is not None
    delegator = Delegator(uows, AgentRegistry.load(), 3600.0, clock) if clock else Delegator(
        uows, AgentRegistry.load(), 3600.0
    )
    assert (await delegator(state, calls)).keep_going
    return parent, [execution_id_for(parent, c) for c in call_ids]


async def execution(uows: UnitOfWorkFactory, execution_id: UUID) -> Any:
    async with uows() as uow:
        return await uow.execution(execution_id)


async def outbox_commands(pool: Pool, command: str, key_field: str, key: UUID) -> list[Any]:
    return list(await pool.fetch(
        "SELECT payload FROM outbox WHERE payload->>'type' = $1 AND payload->>$2 = $3 ORDER BY id",
        command, key_field, str(key),
    ))


async def events_of(pool: Pool, stream: UUID, type_: str) -> list[Any]:
    return list(await pool.fetch(
        "SELECT payload FROM events WHERE stream_id = $1 AND type = $2 ORDER BY position", str(stream), type_
    ))


async def finished_unsettled(uows: UnitOfWorkFactory, execution_id: UUID, error: str) -> None:
    """The execution failed, its barrier not settled: what recovery finds after a crash."""
    async with uows() as uow:
        await uow.append(str(execution_id), [ev.ExecutionFinished(status="FAILED", error=error)], expected_version=None)
