"""The typed reads of the gateway's decisions (`aggregates/`), one contract for both
units of work: sessions by owner, queued and client inputs, waits, the messages a fork or
a summary reads, and the unique key of a client's message."""

from __future__ import annotations

import asyncio
import json
from uuid import UUID, uuid4

import pytest
from muster_contracts import events as ev
from muster_contracts import session_events as se
from muster_contracts import wait_events as we
from muster_runtime.uow.unit_of_work import DuplicateKey

from tests.unit.runtime.uow_contract import covers
from tests.unit.runtime.uow_harness import Harness, new_session


async def _append(work: Harness, sid: UUID, *events: ev.DomainEvent) -> None:
    async with work.uow() as uow:
        await uow.append(str(sid), list(events), expected_version=await uow.current_version(str(sid)))


@covers("lock_owned_session", "session")
async def test_an_owned_session_is_locked_and_typed_a_foreign_or_deleted_one_is_absent(work: Harness) -> None:
    sid = await new_session(work)
    await _append(work, sid, ev.SessionPhaseChanged(phase="RUNNING"))
    async with work.uow() as uow:
        session = await uow.lock_owned_session("u", sid)
        assert await uow.lock_owned_session("someone-else", sid) is None
        assert await uow.lock_owned_session("u", uuid4()) is None
    assert session is not None
    assert (session.session_id, session.root_session_id, session.session_type) == (sid, sid, "NORMAL")
    assert (session.phase, session.version, session.permission_level, session.execution_mode) == (
        "RUNNING", 2, "auto", "CLOUD")  # fmt: skip
    assert session.running and session.cancellable and session.active and not session.waiting
    assert not session.archived and not session.deleted and not session.unread
    await _append(work, sid, se.SessionDeleted())
    async with work.uow() as uow:
        assert await uow.lock_owned_session("u", sid) is None
        assert (await uow.session(sid) or session).deleted


@covers("session")
async def test_a_turn_end_makes_a_session_unread_until_it_is_read(work: Harness) -> None:
    sid = await new_session(work)
    await _append(work, sid, ev.SessionPhaseChanged(phase="COMPLETED"))
    async with work.uow() as uow:
        assert (await uow.session(sid) or pytest.fail()).unread
    await _append(work, sid, se.SessionRead(), se.SessionArchived())
    async with work.uow() as uow:
        read = await uow.session(sid)
        assert await uow.session(uuid4()) is None
    assert read is not None and not read.unread and read.archived


async def test_a_promotion_re_roots_the_side_task_and_its_descendants(work: Harness) -> None:
    main, side, below = await new_session(work), uuid4(), uuid4()
    async with work.uow() as uow:
        for sid, parent in ((side, main), (below, side)):
            born = ev.SessionCreated(
                session_id=sid,
                user_id="u",
                session_type="SIDE_TASK",
                parent_session_id=parent,
                root_session_id=main,
            )
            await uow.append(str(sid), [born], expected_version=0)
    await _append(
        work, side, se.SessionPromoted(previous_parent_session_id=main, previous_root_session_id=main)
    )
    async with work.uow() as uow:
        promoted, child = await uow.session(side), await uow.session(below)
    assert promoted is not None and child is not None
    assert (promoted.session_type, promoted.parent_session_id, promoted.root_session_id) == (
        "NORMAL",
        None,
        side,
    )
    assert child.root_session_id == side


@covers("client_input", "queued_inputs")
async def test_queued_and_client_inputs(work: Harness) -> None:
    sid = await new_session(work)
    first = ev.UserMessageQueued(message_id=uuid4(), content="a", client_message_id="k1")
    second = ev.UserMessageQueued(message_id=uuid4(), content="b")
    third = ev.UserMessageQueued(message_id=uuid4(), content="c")
    await _append(work, sid, first, second, third)
    await _append(work, sid, ev.QueuedMessagesDropped(message_ids=[second.message_id], reason="cancelled"))
    async with work.uow() as uow:
        queued = await uow.queued_inputs(sid)
        by_client = await uow.client_input(sid, "k1")
        assert await uow.client_input(sid, "k2") is None
        assert await uow.queued_inputs(uuid4()) == []
    assert [(i.message_id, i.content, i.state) for i in queued] == [
        (first.message_id, "a", "QUEUED"), (third.message_id, "c", "QUEUED")]  # fmt: skip
    assert by_client is not None and (by_client.message_id, by_client.client_message_id) == (
        first.message_id,
        "k1",
    )


async def test_a_repeated_client_message_id_is_a_duplicate_key_and_nothing_of_the_decision_stays(
    work: Harness,
) -> None:
    sid, other = await new_session(work), await new_session(work)
    await _append(work, sid, ev.UserMessageQueued(message_id=uuid4(), content="a", client_message_id="k"))
    with pytest.raises(DuplicateKey) as info:
        async with work.uow() as uow:
            again = ev.UserMessageQueued(message_id=uuid4(), content="a", client_message_id="k")
            await uow.append(str(sid), [again], expected_version=2)
    assert info.value.key == DuplicateKey.CLIENT_MESSAGE
    async with work.uow() as uow:
        assert len(await uow.queued_inputs(sid)) == 1 and await uow.current_version(str(sid)) == 2
    # Another session, or no client id at all, never collides.
    await _append(work, other, ev.UserMessageQueued(message_id=uuid4(), content="a", client_message_id="k"))
    await _append(work, sid, *(ev.UserMessageQueued(message_id=uuid4(), content="n") for _ in range(2)))


@covers("has_subagents", "lock_wait")
async def test_waits_and_subagents(work: Harness) -> None:
    sid, child = await new_session(work), uuid4()
    approval = uuid4()
    asked = we.ApprovalRequested(approval_id=approval, tool_call_id="c1", tool="write_file", arguments="{}")
    await _append(work, sid, asked)
    async with work.uow() as uow:
        assert not await uow.has_subagents(sid)
        wait = await uow.lock_wait(approval)
        assert await uow.lock_wait(uuid4()) is None
        born = ev.SessionCreated(
            session_id=child, user_id="u", session_type="SUBAGENT", parent_session_id=sid, root_session_id=sid
        )
        await uow.append(str(child), [born], expected_version=0)
    assert wait is not None and (wait.kind, wait.session_id, wait.tool_call_id, wait.pending) == (
        "approval", sid, "c1", True)  # fmt: skip
    async with work.uow() as uow:
        assert await uow.has_subagents(sid) and not await uow.has_subagents(child)


def _msg(
    seq: int, role: str, *, calls: list[str] | None = None, answers: str | None = None
) -> ev.MessageRecorded:
    specs = [
        ev.ToolCallSpec(id=c, name="read_file", arguments=json.dumps({"path": "a"})) for c in calls or []
    ]
    return ev.MessageRecorded(
        message_id=uuid4(),
        seq=seq,
        role=role,
        content=f"m{seq}",
        tool_calls=specs or None,
        tool_call_id=answers,
    )


@covers("discarded_up_to", "latest_messages", "message_seq", "turn_up_to", "compaction")
async def test_what_a_fork_or_a_summary_reads(work: Harness) -> None:
    sid = await new_session(work)
    history = [_msg(1, "USER"), _msg(2, "ASSISTANT"), _msg(3, "USER"), _msg(4, "ASSISTANT", calls=["c"]),
               _msg(5, "TOOL", answers="c"), _msg(6, "ASSISTANT")]  # fmt: skip
    await _append(work, sid, *history)
    await _append(
        work, sid, ev.MessagesDiscarded(message_ids=[history[1].message_id], reason="incomplete_tail")
    )
    async with work.uow() as uow:
        latest = await uow.latest_messages(sid, 3)
        assert [m.seq for m in await uow.latest_messages(sid, 10)] == [1, 3, 4, 5, 6]
        assert await uow.message_seq(sid, history[3].message_id) == 4
        assert await uow.message_seq(sid, history[1].message_id) is None  # discarded
        assert await uow.message_seq(uuid4(), history[3].message_id) is None
        assert [m.seq for m in await uow.turn_up_to(sid, 5)] == [3, 4, 5]
        assert [m.seq for m in await uow.turn_up_to(sid, 2)] == [1]
        assert await uow.discarded_up_to(sid, 6) == [history[1].message_id]
        assert await uow.discarded_up_to(sid, 1) == []
        assert await uow.compaction(sid) is None
    assert [(m.seq, m.role, m.content) for m in latest] == [
        (4, "ASSISTANT", "m4"),
        (5, "TOOL", "m5"),
        (6, "ASSISTANT", "m6"),
    ]
    assert latest[0].tool_calls == [{"id": "c", "name": "read_file", "arguments": '{"path": "a"}'}]
    assert latest[1].tool_call_id == "c" and not latest[1].discarded


@covers("compaction")
async def test_the_latest_compaction_is_typed(work: Harness) -> None:
    sid = await new_session(work)
    boundary = uuid4()
    recorded = ev.CompactionRecorded(
        boundary_message_id=boundary, boundary_seq=4, summary="s", messages_compacted=4,
        tokens_before=100, tokens_after=10, at_seq=6,
    )  # fmt: skip
    await _append(work, sid, recorded)
    async with work.uow() as uow:
        compaction = await uow.compaction(sid)
    assert compaction is not None
    assert (compaction.boundary_message_id, compaction.boundary_seq, compaction.summary, compaction.at_seq) == (
        boundary, 4, "s", 6)  # fmt: skip
    assert (compaction.messages_compacted, compaction.tokens_before, compaction.tokens_after) == (4, 100, 10)


async def _post_locked(work: Harness, sid: UUID, key: str | None) -> UUID:
    """What `send_message` does: lock the owned session, append after the version read."""
    message_id = uuid4()
    async with work.uow() as uow:
        session = await uow.lock_owned_session("u", sid)
        assert session is not None
        posted = ev.UserMessageQueued(message_id=message_id, content="x", client_message_id=key)
        await uow.append(str(sid), [posted], expected_version=session.version)
    return message_id


async def test_racing_posts_of_one_client_message_id_leave_one_and_the_rest_meet_the_key(
    work: Harness,
) -> None:
    sid = await new_session(work)
    outcomes = await asyncio.gather(*(_post_locked(work, sid, "k") for _ in range(6)), return_exceptions=True)
    won = [o for o in outcomes if isinstance(o, UUID)]
    assert len(won) == 1 and all(isinstance(o, DuplicateKey) for o in outcomes if o not in won)
    async with work.uow() as uow:
        assert [i.message_id for i in await uow.queued_inputs(sid)] == won


async def test_writers_that_lock_the_session_first_never_lose_a_race(work: Harness) -> None:
    sid = await new_session(work)
    posted = await asyncio.gather(*(_post_locked(work, sid, None) for _ in range(8)))
    async with work.uow() as uow:
        assert {i.message_id for i in await uow.queued_inputs(sid)} == set(posted)
        assert [e.stream_version for e in await uow.read_stream(str(sid))] == list(range(1, 10))


@covers("running_trees")
async def test_running_trees_counts_each_tree_with_a_turn_under_way_once(work: Harness) -> None:
    user = f"quota-{uuid4()}"  # a user of this test only, whatever else the store holds

    async def root(*events: ev.DomainEvent) -> UUID:
        sid = uuid4()
        created = ev.SessionCreated(session_id=sid, user_id=user, root_session_id=sid)
        await _append(work, sid, created, *events)
        return sid

    async def running() -> int:
        async with work.uow() as uow:
            return await uow.running_trees(user)

    assert await running() == 0
    busy = await root(ev.SessionPhaseChanged(phase="RUNNING"))
    await root(ev.SessionPhaseChanged(phase="COMPLETED"))
    assert await running() == 1
    # A side task of a running tree adds no tree; a waiting one and a queued input do.
    side = uuid4()
    await _append(work, side, ev.SessionCreated(
        session_id=side, user_id=user, session_type="SIDE_TASK", parent_session_id=busy,
        root_session_id=busy), ev.SessionPhaseChanged(phase="RUNNING"))  # fmt: skip
    await root(ev.SessionPhaseChanged(phase="WAITING_APPROVAL"))
    queued = await root(ev.UserMessageQueued(message_id=uuid4(), content="go"))
    assert await running() == 3
    await _append(work, queued, se.SessionDeleted())
    assert await running() == 2
    async with work.uow() as uow:
        assert await uow.running_trees("nobody-at-all") == 0
