"""Recovery acknowledges the events it has nothing to do with without validating them, and
never skips one its handlers or the tree signals react to."""

from __future__ import annotations

from typing import Any
from uuid import uuid4

import orjson
import pytest
from muster_agent.barrier import BARRIER_CHECKED
from muster_recovery.bootstrap import concerns
from muster_recovery.placements import Placements
from muster_recovery.scan_port import Placement
from muster_runtime.messaging.consuming import peek_event


def record(event_type: str, metadata: dict[str, Any] | None = None, **payload: Any) -> bytes:
    return orjson.dumps({
        "kind": "event", "event_id": str(uuid4()), "position": 7, "stream_id": str(uuid4()),
        "stream_version": 2, "type": event_type, "schema_version": 1, "payload": payload,
        "metadata": metadata or {}, "recorded_at": "2026-12-03T10:00:00+00:00",
    })


@pytest.mark.parametrize("raw", [
    record("ExecutionFinished", status="COMPLETED"),
    record("SessionPhaseChanged", phase="CANCELLED"),
    record("SessionPhaseChanged", phase="COMPLETED"),  # a tree signal may move
    record("MessageRecorded", role="TOOL", content="{}"),
    record("SessionRead"),
    record("SessionPromoted", previous_root_session_id=str(uuid4())),
    record("ApprovalRequested"),
    record("QuestionResolved"),
])
def test_what_recovery_reacts_to_is_handled(raw: bytes) -> None:
    assert concerns(raw)


@pytest.mark.parametrize("raw", [
    record("MessageRecorded", role="ASSISTANT", content="hi"),
    record("MessageRecorded", role="TOOL", content="{}", source_session_id=str(uuid4())),  # a delivery
    record("ToolCallStarted", tool_call_id="c"),
    record("ExecutionFinished", BARRIER_CHECKED, status="COMPLETED"),  # its writer settled it
    record("ExecutionStatusChanged", status="RUNNING"),
    record("FileChanged", path="a"),
    record("SessionCreated"),
])
def test_what_it_ignores_is_acknowledged_unparsed(raw: bytes) -> None:
    assert not concerns(raw)


@pytest.mark.parametrize("raw", [b"not json", b"[1, 2]", b'{"type": 3}', b'{"payload": {}}', b'{"type": "X", "payload": 1}'])
def test_a_record_that_is_not_an_event_goes_to_validation_and_the_dead_letters(raw: bytes) -> None:
    assert peek_event(raw) is None
    assert concerns(raw)


class NoReads:
    async def placement(self, *args: Any) -> Any:
        raise AssertionError("a placement learned from its creation needs no read")


async def test_a_sessions_creation_tells_where_it_sits_when_that_can_never_change() -> None:
    placements = Placements()
    root, child, task = uuid4(), uuid4(), uuid4()
    created = [
        record("SessionCreated", session_id=str(root), root_session_id=str(root), session_type="NORMAL"),
        record("SessionCreated", session_id=str(child), root_session_id=str(root), session_type="SUBAGENT",
               parent_session_id=str(root)),
        record("SessionCreated", session_id=str(task), root_session_id=str(root), session_type="SIDE_TASK",
               parent_session_id=str(root)),
        record("SessionCreated", session_id="not-a-uuid"),
    ]  # fmt: skip
    assert not any(concerns(raw, placements) for raw in created)
    assert await placements.of(NoReads(), root) == Placement("NORMAL", None, root)  # type: ignore[arg-type]
    assert await placements.of(NoReads(), child) == Placement("SUBAGENT", root, root)  # type: ignore[arg-type]
    with pytest.raises(AssertionError, match="no read"):  # a side task can be promoted: read each time
        await placements.of(NoReads(), task)  # type: ignore[arg-type]
