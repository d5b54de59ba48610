"""The decisions of `commands.py` on the in-memory unit of work: create, post (queued or
not, a repeated clientMessageId), cancel in each phase, compaction, ownership."""

from __future__ import annotations

from pathlib import Path
from typing import Any
from uuid import UUID, uuid4

import pytest
from muster_contracts import events as ev
from muster_contracts import wait_events as we
from muster_contracts.session_events import SessionDeleted
from muster_gateway import commands
from muster_gateway.errors import SESSION_NOT_FOUND, GatewayError
from muster_gateway.protocol import CreateSessionData, SendMessageData
from muster_runtime.store.eventstore import ConcurrencyError
from muster_runtime.uow.memory_uow import InMemoryUnitOfWork, MemoryStore
from muster_runtime.uow.unit_of_work import AbstractUnitOfWork

from tests.unit.gateway.memory_support import USER, append, events, sent, session, types


@pytest.fixture
def store() -> MemoryStore:
    return MemoryStore()


async def post(store: MemoryStore, sid: UUID, content: str = "hi", key: str | None = None) -> dict[str, Any]:
    return await commands.send_message(
        store.uow, USER, str(sid), SendMessageData(content=content, clientMessageId=key)
    )


async def test_create_session_without_content_only_creates_it(store: MemoryStore, tmp_path: Path) -> None:
    ack = await commands.create_session(
        store.uow, USER, CreateSessionData(title="plan", agentType="coder"), tmp_path
    )
    sid = UUID(ack["sessionId"])
    assert set(ack) == {"sessionId"} and (tmp_path / str(sid)).is_dir()
    async with store.uow() as uow:
        created = await uow.session(sid)
    assert created is not None
    assert (created.user_id, created.session_type, created.title, created.agent_type) == (
        USER,
        "NORMAL",
        "plan",
        "coder",
    )
    assert (created.root_session_id, created.parent_session_id, created.phase) == (sid, None, None)
    assert types(store, sid) == ["SessionCreated"] and sent(store, sid) == []


async def test_create_session_with_content_posts_it_and_starts_the_turn(
    store: MemoryStore, tmp_path: Path
) -> None:
    data = CreateSessionData(content="hi", clientMessageId="c0", permissionLevel="ask", executionMode="LOCAL")
    ack = await commands.create_session(store.uow, USER, data, tmp_path)
    sid = UUID(ack["sessionId"])
    assert types(store, sid) == ["SessionCreated", "UserMessageQueued"]
    assert sent(store, sid) == ["ProcessSession"]
    async with store.uow() as uow:
        (queued,) = await uow.queued_inputs(sid)
        created = await uow.session(sid)
    assert (str(queued.message_id), queued.client_message_id) == (ack["messageId"], "c0")
    assert created is not None and (created.permission_level, created.execution_mode) == ("ask", "LOCAL")


async def test_a_message_to_an_idle_or_ended_session_starts_a_turn(store: MemoryStore) -> None:
    for phase in (None, "COMPLETED", "FAILED", "CANCELLED"):
        sid = await session(store, phase=phase)
        ack = await post(store, sid)
        assert ack["queued"] is False and UUID(ack["messageId"])
        assert types(store, sid)[-1] == "UserMessageQueued" and sent(store, sid) == ["ProcessSession"]


@pytest.mark.parametrize("phase", ["RUNNING", "RESUMING", "WAITING_APPROVAL", "WAITING_CLIENT", "CANCELLING"])
async def test_a_message_while_a_turn_is_under_way_is_queued(store: MemoryStore, phase: ev.Phase) -> None:
    sid = await session(store, phase=phase)
    assert (await post(store, sid))["queued"] is True
    assert sent(store, sid) == ["ProcessSession"]  # the harness takes it up when the turn ends


async def test_a_message_behind_input_not_yet_started_is_queued(store: MemoryStore) -> None:
    sid = await session(store)
    await append(store, sid, ev.UserMessageQueued(message_id=uuid4(), content="first"))
    assert (await post(store, sid))["queued"] is True


async def test_a_repeated_client_message_id_is_acknowledged_as_the_original(store: MemoryStore) -> None:
    sid, other = await session(store, phase="RUNNING"), await session(store)
    first = await post(store, sid, key="k1")
    again = await post(store, sid, content="different text", key="k1")
    assert again == {"messageId": first["messageId"], "queued": True, "duplicate": True}
    async with store.uow() as uow:
        assert [i.content for i in await uow.queued_inputs(sid)] == ["hi"]
    assert sent(store, sid) == ["ProcessSession"]
    assert "duplicate" not in await post(store, other, key="k1")  # another session: another message


async def test_a_duplicate_after_its_turn_started_is_not_reported_queued(store: MemoryStore) -> None:
    sid = await session(store)
    first = await post(store, sid, key="k1")
    recorded = ev.MessageRecorded(message_id=UUID(first["messageId"]), seq=1, role="USER", content="hi")
    await append(store, sid, ev.SessionPhaseChanged(phase="RUNNING"), recorded)
    assert await post(store, sid, key="k1") == {
        "messageId": first["messageId"],
        "queued": False,
        "duplicate": True,
    }


@pytest.mark.parametrize("action", ["send", "cancel", "compact"])
async def test_foreign_unknown_malformed_and_deleted_sessions_are_not_found(
    store: MemoryStore, action: str
) -> None:
    sid = await session(store, phase="RUNNING")
    gone = await session(store)
    await append(store, gone, SessionDeleted())
    for user, target in (("bob", str(sid)), (USER, str(uuid4())), (USER, "not-a-uuid"), (USER, str(gone))):
        with pytest.raises(GatewayError) as info:
            if action == "send":
                await commands.send_message(store.uow, user, target, SendMessageData(content="x"))
            elif action == "cancel":
                await commands.cancel(store.uow, user, target)
            else:
                await commands.request_compaction(store.uow, user, target)
        assert (info.value.code, info.value.message) == ("not_found", SESSION_NOT_FOUND)
    assert types(store, sid) == ["SessionCreated", "SessionPhaseChanged"] and store.sent == []


async def test_a_subagent_session_refuses_input_and_cancel(store: MemoryStore) -> None:
    parent = await session(store)
    child = await session(store, session_type="SUBAGENT", parent_session_id=parent, root_session_id=parent)
    with pytest.raises(GatewayError) as posted:
        await post(store, child)
    with pytest.raises(GatewayError) as cancelled:
        await commands.cancel(store.uow, USER, str(child))
    assert posted.value.code == cancelled.value.code == "conflict"
    assert types(store, child) == ["SessionCreated"]


async def test_cancelling_an_idle_session_is_acknowledged_and_changes_nothing(store: MemoryStore) -> None:
    sid = await session(store, phase="COMPLETED")
    assert await commands.cancel(store.uow, USER, str(sid)) == {}
    assert types(store, sid) == ["SessionCreated", "SessionPhaseChanged"] and sent(store, sid) == []


async def test_cancelling_a_running_turn_ends_it_drops_the_queue_and_stops_the_runner(
    store: MemoryStore,
) -> None:
    sid = await session(store, phase="RUNNING")
    queued = [UUID((await post(store, sid, content=c))["messageId"]) for c in ("a", "b")]
    assert await commands.cancel(store.uow, USER, str(sid)) == {}
    changed, dropped = events(store, sid)[-2:]
    assert isinstance(changed, ev.SessionPhaseChanged) and changed.phase == "CANCELLED"
    assert isinstance(dropped, ev.QueuedMessagesDropped) and dropped.message_ids == queued
    assert dropped.reason == "cancelled"
    assert sent(store, sid) == ["ProcessSession", "ProcessSession", "CancelSession"]
    async with store.uow() as uow:
        assert await uow.queued_inputs(sid) == []
    before = types(store, sid)
    await commands.cancel(store.uow, USER, str(sid))  # a second cancel finds nothing to do
    assert (
        types(store, sid) == before and sent(store, sid)[-1] == "CancelSession" and len(sent(store, sid)) == 3
    )


async def test_cancelling_a_waiting_turn_drops_what_it_waits_for(store: MemoryStore) -> None:
    sid = await session(store)
    approval = uuid4()
    asked = we.ApprovalRequested(approval_id=approval, tool_call_id="c1", tool="write_file", arguments="{}")
    await append(
        store,
        sid,
        ev.SessionPhaseChanged(phase="RUNNING"),
        asked,
        ev.SessionPhaseChanged(phase="WAITING_APPROVAL"),
    )
    await commands.cancel(store.uow, USER, str(sid))
    resolved, changed = events(store, sid)[-2:]
    assert isinstance(resolved, we.ApprovalResolved) and (resolved.approval_id, resolved.decision) == (
        approval,
        "dropped",
    )
    assert isinstance(changed, ev.SessionPhaseChanged) and changed.phase == "CANCELLED"
    assert sent(store, sid) == ["CancelSession"]
    async with store.uow() as uow:
        assert await uow.pending_waits(sid) == []


async def test_cancelling_an_idle_session_drops_input_not_yet_started(
    store: MemoryStore, tmp_path: Path
) -> None:
    ack = await commands.create_session(store.uow, USER, CreateSessionData(content="start please"), tmp_path)
    sid = UUID(ack["sessionId"])
    await commands.cancel(store.uow, USER, str(sid))
    assert types(store, sid)[-1] == "QueuedMessagesDropped"
    assert sent(store, sid) == ["ProcessSession"]  # no CancelSession: nothing runs


async def test_compaction_is_asked_of_an_idle_session_only(store: MemoryStore) -> None:
    idle, running = await session(store, phase="COMPLETED"), await session(store, phase="WAITING_INPUT")
    ack = await commands.request_compaction(store.uow, USER, str(idle))
    assert ack["accepted"] is True and UUID(ack["commandId"])
    assert sent(store, idle) == ["CompactSession"]
    with pytest.raises(GatewayError) as info:
        await commands.request_compaction(store.uow, USER, str(running))
    assert info.value.code == "conflict" and sent(store, running) == []


class _LosesRaces(InMemoryUnitOfWork):
    """A unit of work whose append meets another writer's version `losses` times."""

    def __init__(self, store: MemoryStore, losses: list[int]) -> None:
        super().__init__(store)
        self._losses = losses

    async def append(
        self, stream_id: str, events: Any, *, expected_version: int | None, metadata: Any = None
    ) -> None:
        if self._losses[0] > 0:
            self._losses[0] -= 1
            raise ConcurrencyError(stream_id)
        await super().append(stream_id, events, expected_version=expected_version, metadata=metadata)


async def test_a_decision_that_loses_a_race_is_run_again_then_refused(store: MemoryStore) -> None:
    sid = await session(store)
    losses = [2]

    def uows() -> AbstractUnitOfWork:
        return _LosesRaces(store, losses)

    ack = await commands.send_message(uows, USER, str(sid), SendMessageData(content="x"))
    assert types(store, sid) == ["SessionCreated", "UserMessageQueued"] and sent(store, sid) == [
        "ProcessSession"
    ]
    assert str(events(store, sid)[-1].message_id) == ack["messageId"]  # type: ignore[attr-defined]
    losses[0] = 100
    with pytest.raises(GatewayError) as info:
        await commands.send_message(uows, USER, str(sid), SendMessageData(content="y"))
    assert info.value.code == "conflict" and len(types(store, sid)) == 2
