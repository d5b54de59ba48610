"""Recovery's reaction to a local tool's result: the round's last result settles the
barrier (a parent's), and a subagent's tools are never looked at (it cannot delegate)."""

from __future__ import annotations

from uuid import UUID, uuid4

from muster_contracts.published import RecordedEvent
from muster_recovery import handlers
from muster_runtime.db import Pool

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
