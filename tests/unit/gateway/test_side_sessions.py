"""`create_side_session` on the in-memory unit of work: what each context mode gives the
side task (nothing, a summary, a fork cut at a complete round, the source's compaction),
and what it refuses."""

from __future__ import annotations

import json
from typing import Any
from uuid import UUID, uuid4

import pytest
from muster_contracts import events as ev
from muster_contracts import session_events as se
from muster_gateway import side_sessions
from muster_gateway.errors import GatewayError
from muster_gateway.protocol import CreateSideSessionData
from muster_runtime.store.fork_ids import copied_id
from muster_runtime.uow.memory_uow import MemoryStore

from tests.unit.gateway.memory_support import USER, append, events, sent, session, types


@pytest.fixture
def store() -> MemoryStore:
    return MemoryStore()


async def branch(store: MemoryStore, source: UUID, who: str = USER, **data: Any) -> UUID:
    data.setdefault("content", "side question")
    ack = await side_sessions.create_side_session(store.uow, who, str(source), CreateSideSessionData(**data))
    return UUID(ack["sessionId"])


def message(
    seq: int, role: str, *, calls: tuple[str, ...] = (), answers: str | None = None
) -> ev.MessageRecorded:
    specs = [ev.ToolCallSpec(id=c, name="read_file", arguments=json.dumps({"path": "a"})) for c in calls]
    return ev.MessageRecorded(
        message_id=uuid4(),
        seq=seq,
        role=role,
        content=f"{role.lower()} {seq} " + "x" * 400,
        tool_calls=specs or None,
        tool_call_id=answers,
    )


async def test_a_side_task_takes_the_source_s_settings_and_starts_its_turn(store: MemoryStore) -> None:
    source = await session(
        store, model_id="m1", permission_level="ask", execution_mode="LOCAL", agent_type="coder"
    )
    side = await branch(store, source, title="aside", permissionLevel="auto")
    created = events(store, side)[0]
    assert isinstance(created, ev.SessionCreated)
    assert (created.session_type, created.parent_session_id, created.root_session_id) == (
        "SIDE_TASK",
        source,
        source,
    )
    assert (created.agent_type, created.model_id, created.permission_level, created.execution_mode) == (
        "coder", "m1", "auto", "LOCAL")  # fmt: skip
    assert (created.title, created.context_mode, created.workspace_id, created.background) == (
        "aside", "none", source, None)  # fmt: skip
    assert types(store, side) == ["SessionCreated", "UserMessageQueued"]
    notice = events(store, source)[-1]
    assert isinstance(notice, se.SideSessionCreated) and (notice.session_id, notice.root_session_id) == (
        side,
        source,
    )
    assert sent(store, side) == ["ProcessSession"]


async def test_a_summary_is_the_source_s_last_ten_visible_messages_cut_short(store: MemoryStore) -> None:
    source = await session(store)
    history = [message(seq, "USER" if seq % 2 else "ASSISTANT") for seq in range(1, 14)]
    await append(store, source, *history)
    await append(
        store, source, ev.MessagesDiscarded(message_ids=[history[-1].message_id], reason="incomplete_tail")
    )
    side = await branch(store, source, contextMode="summary")
    created = events(store, side)[0]
    assert isinstance(created, ev.SessionCreated) and created.background is not None
    assert [b.content for b in created.background] == [
        m.content[: side_sessions.SUMMARY_CHARS] for m in history[2:12]
    ]
    assert [b.role for b in created.background] == [m.role for m in history[2:12]]


async def test_a_fork_stops_before_a_round_whose_results_are_not_all_recorded(store: MemoryStore) -> None:
    source = await session(store, phase="RUNNING")
    history = [message(1, "USER"), message(2, "ASSISTANT"), message(3, "USER"),
               message(4, "ASSISTANT", calls=("a", "b")), message(5, "TOOL", answers="a")]  # fmt: skip
    await append(store, source, *history)
    forked = events(store, await branch(store, source, contextMode="fork"))[1]
    assert isinstance(forked, se.SessionForked) and (forked.source_session_id, forked.up_to_seq) == (
        source,
        3,
    )
    cut_at = await branch(store, source, contextMode="fork", forkFromMessageId=str(history[1].message_id))
    at = events(store, cut_at)[1]
    assert isinstance(at, se.SessionForked) and at.up_to_seq == 2  # the message named, a complete round


async def test_a_fork_leaves_out_what_was_discarded_and_keeps_a_compaction_inside_the_copy(
    store: MemoryStore,
) -> None:
    source = await session(store)
    history = [message(seq, "USER" if seq % 2 else "ASSISTANT") for seq in range(1, 7)]
    boundary = history[3]
    compaction = ev.CompactionRecorded(
        boundary_message_id=boundary.message_id, boundary_seq=4, summary="so far", messages_compacted=4,
        tokens_before=900, tokens_after=90, at_seq=6,
    )  # fmt: skip
    await append(store, source, *history, compaction)
    await append(
        store, source, ev.MessagesDiscarded(message_ids=[history[1].message_id], reason="incomplete_tail")
    )
    side = await branch(store, source, contextMode="fork", forkFromMessageId=str(history[4].message_id))
    forked, copied = events(store, side)[1:3]
    assert isinstance(forked, se.SessionForked)
    assert (forked.up_to_seq, forked.skipped_message_ids) == (5, [history[1].message_id])
    assert isinstance(copied, ev.CompactionRecorded)
    assert (copied.boundary_message_id, copied.boundary_seq, copied.summary, copied.at_seq) == (
        copied_id(side, boundary.message_id), 4, "so far", 5)  # fmt: skip
    early = await branch(store, source, contextMode="fork", forkFromMessageId=str(history[2].message_id))
    assert types(store, early) == [
        "SessionCreated",
        "SessionForked",
        "UserMessageQueued",
    ]  # boundary after the cut


async def test_what_a_side_task_refuses(store: MemoryStore) -> None:
    source, other = await session(store), await session(store)
    await append(store, other, message(1, "USER"))
    child = await session(store, session_type="SUBAGENT", parent_session_id=source, root_session_id=source)
    foreign_message = str(events(store, other)[-1].message_id)  # type: ignore[attr-defined]
    cases: list[tuple[str, UUID, dict[str, Any], str]] = [
        (USER, child, {}, "conflict"),
        ("bob", source, {}, "not_found"),
        (USER, source, {"forkFromMessageId": foreign_message}, "bad_request"),  # contextMode none
        (USER, source, {"contextMode": "fork", "forkFromMessageId": foreign_message}, "bad_request"),
        (USER, source, {"contextMode": "fork", "forkFromMessageId": "not-a-uuid"}, "bad_request"),
    ]
    for who, target, data, code in cases:
        with pytest.raises(GatewayError) as info:
            await branch(store, target, who, **data)
        assert info.value.code == code, (who, data)
    assert types(store, source) == ["SessionCreated"] and store.sent == []
