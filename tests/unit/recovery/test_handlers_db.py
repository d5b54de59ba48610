"""Recovery's reactions: a local tool's result that completes a round settles the barrier
(a parent's; a subagent's tools are never looked at, it cannot delegate), and so does a
finished execution, unless its writer says it settled the barrier itself."""

from __future__ import annotations

from uuid import UUID, uuid4

from muster_agent.barrier import BARRIER_CHECKED
from muster_contracts.published import RecordedEvent
from muster_recovery import handlers
from muster_runtime.process.db import Pool

from tests.databases import uows

from .builders import delegating_parent, execution, finished_unsettled


def tool_result(session_id: UUID, call_id: str) -> RecordedEvent:
    return RecordedEvent.model_validate({
        "event_id": str(uuid4()), "position": 1, "stream_id": str(session_id), "stream_version": 9,
        "type": "MessageRecorded", "schema_version": 1, "metadata": {},
        "payload": {"message_id": str(uuid4()), "seq": 3, "role": "TOOL", "content": "{}", "tool_call_id": call_id},
        "recorded_at": "2026-12-03T10:00:00+00:00",
    })


async def test_a_parents_local_tool_result_settles_the_round_a_subagents_is_not_read(pool: Pool) -> None:
    parent, (eid,) = await delegating_parent(uows(pool), ["child"])
    await finished_unsettled(uows(pool), eid, "boom")
    asked: list[UUID] = []

    async def is_subagent(session_id: UUID) -> bool:
        asked.append(session_id)
        return session_id != parent

    child = (await execution(uows(pool), eid))["child_session_id"]
    await handlers.on_event(tool_result(child, "c"), uows(pool), is_subagent)
    assert (await execution(uows(pool), eid))["delivery_status"] == "PENDING"  # not its round
    await handlers.on_event(tool_result(parent, "local"), uows(pool), is_subagent)
    assert (await execution(uows(pool), eid))["delivery_status"] == "DELIVERED"
    assert asked == [child, parent]


def finished(execution_id: UUID, metadata: dict[str, object]) -> RecordedEvent:
    return RecordedEvent.model_validate({
        "event_id": str(uuid4()), "position": 1, "stream_id": str(execution_id), "stream_version": 2,
        "type": "ExecutionFinished", "schema_version": 1, "metadata": metadata,
        "payload": {"status": "FAILED", "error": "boom"}, "recorded_at": "2026-12-03T10:00:00+00:00",
    })


async def test_a_finish_is_settled_by_recovery_unless_its_writer_checked_the_barrier(pool: Pool) -> None:
    _, (eid,) = await delegating_parent(uows(pool), ["child"])
    await finished_unsettled(uows(pool), eid, "boom")

    async def never(session_id: UUID) -> bool:
        raise AssertionError("not asked for a finish")

    await handlers.on_event(finished(eid, BARRIER_CHECKED), uows(pool), never)
    assert (await execution(uows(pool), eid))["delivery_status"] == "PENDING"  # trusted, not re-read
    await handlers.on_event(finished(eid, {}), uows(pool), never)
    assert (await execution(uows(pool), eid))["delivery_status"] == "DELIVERED"
