"""The reads a decision makes through the unit of work, one contract for both
implementations: the session's visible history, its queued input, its executions, tool
results, usage and leases, each as the projections after the events appended."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta
from uuid import UUID, uuid4

import pytest
from muster_contracts import events as ev
from muster_runtime.uow.postgres_uow import PostgresUnitOfWork
from muster_runtime.uow.unit_of_work import SessionBusy

from tests.unit.runtime.uow_contract import covers
from tests.unit.runtime.uow_harness import Harness, message, new_session, started


@covers("session_state")
async def test_session_state_is_the_visible_history_in_seq_order_with_started_calls(work: Harness) -> None:
    sid = await new_session(work)
    first, second = message(1), message(2)
    call = ev.ToolCallSpec(id="c1", name="read_file", arguments='{"path": "a"}')
    answer = ev.MessageRecorded(message_id=uuid4(), seq=3, role="ASSISTANT", content="", tool_calls=[call])
    async with work.uow() as uow:
        await uow.append(str(sid), [first, second, answer], expected_version=1)
        await uow.append(str(sid), [
            ev.ToolCallStarted(message_id=answer.message_id, tool_call_id="c1", name="read_file"),
            ev.MessagesDiscarded(message_ids=[second.message_id], reason="incomplete_tail"),
        ], expected_version=4)  # fmt: skip
    async with work.uow() as uow:
        snapshot = await uow.session_state(sid)
        assert await uow.session_state(uuid4()) is None
    assert snapshot is not None
    assert [m["message_id"] for m in snapshot.messages] == [first.message_id, answer.message_id]
    assert snapshot.messages[1]["tool_calls"] == [
        {"id": "c1", "name": "read_file", "arguments": '{"path": "a"}'}
    ]
    assert snapshot.started_tool_calls == {"c1"}
    assert (snapshot.row["session_id"], snapshot.row["message_count"], snapshot.row["version"]) == (sid, 3, 6)


@covers("next_queued_input")
async def test_queued_input_comes_oldest_first_until_recorded_or_dropped(work: Harness) -> None:
    sid = await new_session(work)
    queued = [ev.UserMessageQueued(message_id=uuid4(), content=f"q{i}") for i in range(3)]
    async with work.uow() as uow:
        await uow.append(str(sid), queued, expected_version=1)
        assert (await uow.next_queued_input(sid) or {})["message_id"] == queued[0].message_id
        await uow.append(str(sid), [
            ev.MessageRecorded(message_id=queued[0].message_id, seq=1, role="USER", content="q0"),
            ev.QueuedMessagesDropped(message_ids=[queued[1].message_id], reason="cancelled"),
        ], expected_version=4)  # fmt: skip
    async with work.uow() as uow:
        left = await uow.next_queued_input(sid)
        assert left is not None and (left["message_id"], left["content"]) == (queued[2].message_id, "q2")
        assert await uow.next_queued_input(uuid4()) is None


@covers("execution", "executions_of", "open_execution_of", "undelivered_executions", "runs_of")
async def test_executions_are_read_by_id_child_and_parent_through_their_lifecycle(work: Harness) -> None:
    parent, child = await new_session(work), await new_session(work)
    first, second = uuid4(), uuid4()
    async with work.uow() as uow:
        await uow.append(str(first), [started(first, parent, child, "a")], expected_version=0)
        await uow.append(str(second), [started(second, parent, uuid4(), "b")], expected_version=0)
    async with work.uow() as uow:
        assert {e["execution_id"] for e in await uow.executions_of(parent, open_only=True)} == {first, second}
        assert (await uow.open_execution_of(child) or {})["execution_id"] == first
        await uow.append(str(first), [ev.ExecutionRecovering(reason="lease_expired")], expected_version=1)
        await uow.append(
            str(first), [ev.ExecutionFinished(status="COMPLETED", result="r", rounds=2)], expected_version=2
        )
        await uow.append(str(second), [ev.ExecutionFinished(status="FAILED", error="e")], expected_version=1)
        await uow.append(
            str(second), [ev.ExecutionDelivered(delivery_status="SUPPRESSED")], expected_version=2
        )
    async with work.uow() as uow:
        row = await uow.execution(first, lock=True)
        assert row is not None
        assert (row["status"], row["result"], row["rounds"], row["recoveries"], row["version"]) == (
            "COMPLETED", "r", 2, 1, 3)  # fmt: skip
        assert await uow.open_execution_of(child) is None
        assert await uow.executions_of(parent, open_only=True) == []
        assert [e["execution_id"] for e in await uow.undelivered_executions(parent)] == [first]
        assert len(await uow.executions_of(parent)) == 2
        assert [e["execution_id"] for e in await uow.runs_of(child)] == [first]
        assert await uow.execution(uuid4()) is None


@covers("tool_result", "session_state")
async def test_tool_results_and_usage_are_read_per_session(work: Harness) -> None:
    sid = await new_session(work)
    usage = ev.TokenUsage(prompt_tokens=7, completion_tokens=3)
    answer = ev.MessageRecorded(message_id=uuid4(), seq=1, role="ASSISTANT", content="", usage=usage)
    result = ev.MessageRecorded(message_id=uuid4(), seq=2, role="TOOL", content="out", tool_call_id="c1")
    async with work.uow() as uow:
        await uow.append(str(sid), [answer, result], expected_version=1)
    async with work.uow() as uow:
        assert await uow.tool_result(sid, "c1") == "out"
        assert await uow.tool_result(sid, "c2") is None
        loaded = await uow.session_state(sid)  # the history carries each message's usage
    assert loaded is not None
    assert {m["message_id"]: m.get("usage") for m in loaded.messages} == {
        answer.message_id: {"prompt_tokens": 7, "completion_tokens": 3},
        result.message_id: None,
    }


@covers("try_lease", "lease_live")
async def test_a_live_lease_keeps_other_owners_out(work: Harness) -> None:
    now = datetime.now(UTC)
    async with work.uow() as uow:
        assert await uow.lease_live("r", now) is None
        assert await uow.try_lease("r", "a", 60)
    async with work.uow() as uow:
        assert not await uow.try_lease("r", "b", 60)
        assert await uow.try_lease("r", "a", 60)  # renewal by its owner
        assert await uow.lease_live("r", now)
        assert not await uow.lease_live("r", now + timedelta(minutes=5))


@pytest.mark.parametrize("nowait", [False, True])
@covers("lock_session", "current_version")
async def test_a_free_session_is_locked_with_or_without_waiting(work: Harness, nowait: bool) -> None:
    sid = await new_session(work)
    async with work.uow() as uow:
        row = await uow.lock_session(sid, nowait=nowait)
        assert row is not None and row["version"] == 1
        assert await uow.current_version(str(sid)) == 1


@covers("lock_session")
async def test_a_parent_locked_with_its_child_answers_its_lock_until_the_decision_writes(
    work: Harness,
) -> None:
    parent, child = await new_session(work), await new_session(work)
    async with work.uow() as uow:
        row = await uow.lock_session(child, then=parent)
        assert row is not None and row["session_id"] == child
        other = work.uow()
        if isinstance(other, PostgresUnitOfWork):  # the in-memory one runs one decision at a time
            async with other:
                with pytest.raises(SessionBusy):
                    await other.lock_session(parent, nowait=True)
        first = await uow.lock_session(parent)
        assert first is not None and (first["session_id"], first["version"]) == (parent, 1)
        await uow.append(str(parent), [message(1)], expected_version=1)
        again = await uow.lock_session(parent)  # read again: the decision wrote
        assert again is not None and (again["version"], again["message_count"]) == (2, 1)
        assert await uow.lock_session(uuid4(), then=parent) is None  # no such session


@covers("session_state")
async def test_session_state_carries_the_latest_compaction(work: Harness) -> None:
    sid = await new_session(work)
    first, second = message(1), message(2)

    def compaction(boundary: ev.MessageRecorded, summary: str) -> ev.CompactionRecorded:
        return ev.CompactionRecorded(
            boundary_message_id=boundary.message_id, boundary_seq=boundary.seq, summary=summary,
            messages_compacted=boundary.seq, tokens_before=100, tokens_after=10, at_seq=2,
        )  # fmt: skip

    async with work.uow() as uow:
        await uow.append(str(sid), [first, second, compaction(first, "one")], expected_version=1)
        assert (await uow.session_state(sid)).compaction["summary"] == "one"  # type: ignore[union-attr,index]
        await uow.append(str(sid), [compaction(second, "two")], expected_version=4)
    async with work.uow() as uow:
        snapshot = await uow.session_state(sid)
    assert snapshot is not None and snapshot.compaction is not None
    assert (snapshot.compaction["boundary_seq"], snapshot.compaction["summary"]) == (2, "two")
    assert snapshot.compaction["boundary_message_id"] == str(second.message_id)
    assert len(snapshot.messages) == 2  # compaction hides nothing from the stored history


@covers("pending_waits", "call_wait", "wait")
async def test_waits_are_pending_until_resolved_and_a_calls_newest_wait_is_its_decision(work: Harness) -> None:
    from muster_contracts import session_events as se
    from muster_contracts import wait_events as we

    sid = await new_session(work)
    first, second, question = uuid4(), uuid4(), uuid4()
    async with work.uow() as uow:
        await uow.append(str(sid), [
            we.ApprovalRequested(approval_id=first, tool_call_id="c1", tool="write_file", arguments='{"path": "a"}'),
            we.ApprovalResolved(approval_id=first, decision="dropped"),
            we.ApprovalRequested(approval_id=second, tool_call_id="c1", tool="write_file", arguments='{"path": "a"}'),
            we.QuestionAsked(question_id=question, tool_call_id="c2", question="why?", options=["a"]),
            se.SessionSettingsChanged(permission_level="ask"),
        ], expected_version=1)  # fmt: skip
    async with work.uow() as uow:
        assert [w["wait_id"] for w in await uow.pending_waits(sid)] == [second, question]
        newest = await uow.call_wait(sid, "c1")
        assert newest is not None and (newest["wait_id"], newest["status"]) == (second, "pending")
        assert (await uow.wait(first) or {})["status"] == "dropped"
        asked = await uow.wait(question, lock=True)
        assert asked is not None and (asked["kind"], asked["detail"]["question"]) == ("question", "why?")
        assert asked["user_id"] == (await uow.lock_session(sid) or {})["user_id"]
        assert (await uow.lock_session(sid) or {})["permission_level"] == "ask"
        assert await uow.wait(uuid4()) is None and await uow.call_wait(sid, "nope") is None
        await uow.append(str(sid), [
            we.ApprovalResolved(approval_id=second, decision="approve"),
            we.QuestionResolved(question_id=question, outcome="answered"),
        ], expected_version=6)  # fmt: skip
    async with work.uow() as uow:
        assert await uow.pending_waits(sid) == []
        assert (await uow.call_wait(sid, "c1") or {})["status"] == "approved"
        assert (await uow.wait(question) or {})["status"] == "answered"


@covers("claim_execution")
async def test_a_run_is_claimed_once_by_one_live_owner_and_only_while_open(work: Harness) -> None:
    parent, child = await new_session(work), await new_session(work)
    execution = uuid4()
    async with work.uow() as uow:
        await uow.append(str(execution), [started(execution, parent, child, "a")], expected_version=0)
        task = ev.MessageRecorded(message_id=uuid4(), seq=1, role="USER", content="the task")
        await uow.append(str(child), [task, ev.SessionPhaseChanged(phase="RUNNING")], expected_version=1)
    async with work.uow() as uow:
        claim = await uow.claim_execution("worker", "m1", execution, "w1", 60)
    assert (claim.first, claim.leased, claim.child_phase) == (True, True, "RUNNING")
    assert claim.execution is not None and claim.execution["child_session_id"] == child
    assert claim.execution["deadline_at"] > datetime.now(UTC)  # the row as `execution` reads it
    async with work.uow() as uow:
        assert claim.child_state == await uow.session_state(child)  # the run's first read, done
    assert claim.child_state is not None and claim.child_state.row["phase"] == "RUNNING"
    assert [m["content"] for m in claim.child_state.messages] == ["the task"]
    async with work.uow() as uow:
        again = await uow.claim_execution("worker", "m1", execution, "w2", 60)  # a redelivery
        other = await uow.claim_execution("worker", "m2", execution, "w2", 60)  # the lease is live
        unknown = await uow.claim_execution("worker", "m3", uuid4(), "w2", 60)
    assert (again.first, again.leased, again.child_state) == (False, False, None)
    assert (other.first, other.leased, other.child_state) == (True, False, None)
    assert (unknown.first, unknown.execution, unknown.leased, unknown.child_state) == (True, None, False, None)
    async with work.uow() as uow:
        await uow.append(str(execution), [ev.ExecutionFinished(status="COMPLETED", result="r")], expected_version=1)
        ended = await uow.claim_execution("worker", "m4", execution, "w1", 60)
    assert ended.first and not ended.leased and ended.execution is not None
    assert ended.execution["status"] == "COMPLETED"


@pytest.mark.parametrize("with_parent", [False, True], ids=["parent-later", "parent-with-child"])
@covers("lock_session", "open_execution_of", "executions_of", "next_queued_input")
async def test_reads_under_a_lock_see_what_committed_while_it_waited_and_the_decisions_own_writes(
    work: Harness, with_parent: bool
) -> None:
    parent, child = await new_session(work), await new_session(work)
    mine, sibling = uuid4(), uuid4()
    async with work.uow() as uow:
        await uow.append(str(mine), [started(mine, parent, child, "a")], expected_version=0)
        await uow.append(str(sibling), [started(sibling, parent, uuid4(), "b")], expected_version=0)
    holds, release = asyncio.Event(), asyncio.Event()
    queued = ev.UserMessageQueued(message_id=uuid4(), content="later")

    async def sibling_finishes() -> None:
        async with work.uow() as uow:
            row = await uow.lock_session(parent)
            assert row is not None and len(await uow.executions_of(parent, open_only=True)) == 2
            holds.set()
            await release.wait()
            await uow.append(str(sibling), [ev.ExecutionFinished(status="COMPLETED")], expected_version=1)
            await uow.append(str(parent), [queued], expected_version=row["version"])

    async def last_child_closes() -> tuple[set[UUID], UUID | None, UUID | None, list[UUID]]:
        await holds.wait()
        async with work.uow() as uow:
            # With its parent, the child's lock call waits for the parent's lock too.
            assert await uow.lock_session(child, then=parent if with_parent else None) is not None
            run = await uow.open_execution_of(child)
            row = await uow.lock_session(parent)  # granted once the sibling's close committed
            assert row is not None
            still_open = {e["execution_id"] for e in await uow.executions_of(parent, open_only=True)}
            waiting = await uow.next_queued_input(parent)
            await uow.append(str(mine), [ev.ExecutionFinished(status="COMPLETED")], expected_version=1)
            after_mine = [e["execution_id"] for e in await uow.executions_of(parent, open_only=True)]
        return still_open, (run or {}).get("execution_id"), (waiting or {}).get("message_id"), after_mine

    task = asyncio.create_task(sibling_finishes())
    closing = asyncio.create_task(last_child_closes())
    await holds.wait()
    release.set()
    await task
    still_open, run, waiting, after_mine = await closing
    assert run == mine
    assert still_open == {mine}  # the sibling's finish, committed while this waited
    assert waiting == queued.message_id
    assert after_mine == []  # the decision's own append is read back
