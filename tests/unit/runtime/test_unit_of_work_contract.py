"""One contract, two units of work: every test here runs against the in-memory
implementation and against PostgreSQL (as the eventsourcing library tests its recorders).
A decision appends with expected versions, sends commands, and either commits all of it
or nothing; session locks serialise decisions on one session."""

from __future__ import annotations

import asyncio
from uuid import uuid4

import pytest
from muster_contracts import events as ev
from muster_contracts.commands import ProcessSession
from muster_runtime.process.db import UniqueViolation
from muster_runtime.store.eventstore import ConcurrencyError

from tests.unit.runtime.uow_contract import covers
from tests.unit.runtime.uow_harness import Harness, created, message, new_session, started


@covers("append", "lock_session", "read_stream")
async def test_committed_appends_are_read_back_in_order_with_versions(work: Harness) -> None:
    sid = await new_session(work)
    async with work.uow() as uow:
        row = await uow.lock_session(sid)
        assert row is not None and row["version"] == 1 and row["message_count"] == 0
        await uow.append(str(sid), [message(1), message(2)], expected_version=row["version"])
    async with work.uow() as uow:
        stream = await uow.read_stream(str(sid))
        row = await uow.lock_session(sid)
    assert [s.stream_version for s in stream] == [1, 2, 3]
    assert [s.type for s in stream] == ["SessionCreated", "MessageRecorded", "MessageRecorded"]
    assert stream[0].position < stream[1].position < stream[2].position
    assert row is not None and row["version"] == 3 and row["message_count"] == 2


@covers("append", "send", "read_stream", "lock_session")
async def test_a_taken_version_loses_and_nothing_of_that_decision_remains(work: Harness) -> None:
    sid = await new_session(work)
    other = uuid4()
    with pytest.raises(ConcurrencyError):
        async with work.uow() as uow:
            await uow.append(str(other), [created(other)], expected_version=0)
            await uow.send("muster.commands", str(other), ProcessSession(session_id=other))
            await uow.append(str(sid), [message(1)], expected_version=0)  # version 1 is taken
    async with work.uow() as uow:
        assert await uow.read_stream(str(other)) == []
        assert len(await uow.read_stream(str(sid))) == 1
        assert await uow.lock_session(other) is None
    assert work.sent() == []


@covers("first_delivery", "append", "send")
async def test_an_exception_rolls_back_appends_sends_and_tracking(work: Harness) -> None:
    sid = await new_session(work)
    command = ProcessSession(session_id=sid)
    with pytest.raises(RuntimeError):
        async with work.uow() as uow:
            assert await uow.first_delivery("c", str(command.message_id))
            await uow.append(str(sid), [message(1)], expected_version=1)
            await uow.send("muster.commands", str(sid), command)
            raise RuntimeError("the decision failed")
    async with work.uow() as uow:
        assert len(await uow.read_stream(str(sid))) == 1
        assert await uow.first_delivery("c", str(command.message_id))  # not kept by the rollback
    assert work.sent() == []


@covers("send")
async def test_a_command_is_sent_once_after_commit(work: Harness) -> None:
    sid = await new_session(work)
    command = ProcessSession(session_id=sid)
    async with work.uow() as uow:
        await uow.send("muster.commands", str(sid), command)
        assert command.message_id not in work.sent()  # not before the commit
    assert work.sent().count(command.message_id) == 1


@covers("first_delivery")
async def test_first_delivery_is_true_once_per_consumer(work: Harness) -> None:
    async with work.uow() as uow:
        assert await uow.first_delivery("harness", "m-1")
        assert await uow.first_delivery("worker", "m-1")
    async with work.uow() as uow:
        assert not await uow.first_delivery("harness", "m-1")


@covers("lock_session", "append")
async def test_decisions_on_one_session_queue_behind_its_lock(work: Harness) -> None:
    sid = await new_session(work)
    order: list[str] = []
    first_holds = asyncio.Event()
    release_first = asyncio.Event()

    async def first() -> None:
        async with work.uow() as uow:
            row = await uow.lock_session(sid)
            assert row is not None
            first_holds.set()
            await release_first.wait()
            await uow.append(str(sid), [message(1)], expected_version=row["version"])
            order.append("first")

    async def second() -> None:
        await first_holds.wait()
        async with work.uow() as uow:
            row = await uow.lock_session(sid)  # waits for the first to commit
            assert row is not None
            order.append(f"second saw version {row['version']}")
            await uow.append(str(sid), [message(2)], expected_version=row["version"])

    tasks = [asyncio.create_task(first()), asyncio.create_task(second())]
    await first_holds.wait()
    release_first.set()
    await asyncio.gather(*tasks)
    assert order == ["first", "second saw version 2"]


@covers("append_if_current")
async def test_append_if_current_appends_only_to_a_running_session_that_did_not_move(work: Harness) -> None:
    sid = await new_session(work)
    async with work.uow() as uow:
        gone = await uow.append_if_current(sid, 0, [message(1)])
    assert (gone.outcome, gone.stored) == ("gone", [])  # no phase yet: not running
    async with work.uow() as uow:
        await uow.append(str(sid), [ev.SessionPhaseChanged(phase="RUNNING")], expected_version=1)
    async with work.uow() as uow:
        moved = await uow.append_if_current(sid, 5, [message(6)])
        recorded = await uow.append_if_current(sid, 0, [message(1)], blobs={"ab": "blob content"})
    assert moved.outcome == "moved" and moved.stored == []
    assert (recorded.outcome, recorded.base_version, recorded.phase) == ("current", 2, "RUNNING")
    assert [s.stream_version for s in recorded.stored] == [3]
    async with work.uow() as uow:
        row = await uow.lock_session(sid)
        assert row is not None and (row["message_count"], row["version"]) == (1, 3)
        assert [s.type for s in await uow.read_stream(str(sid))][-1] == "MessageRecorded"


@covers("append_if_current")
async def test_an_ungated_append_answers_gated_when_the_session_asks_or_runs_locally(work: Harness) -> None:
    from muster_contracts.session_events import SessionSettingsChanged

    sid = await new_session(work)
    async with work.uow() as uow:
        await uow.append(str(sid), [ev.SessionPhaseChanged(phase="RUNNING")], expected_version=1)
        plain = await uow.append_if_current(sid, 0, [message(1)], ungated=True)
    assert plain.outcome == "current"
    async with work.uow() as uow:
        await uow.append(str(sid), [SessionSettingsChanged(permission_level="ask")], expected_version=3)
    async with work.uow() as uow:
        gated = await uow.append_if_current(sid, 1, [message(2)], ungated=True)
        anyway = await uow.append_if_current(sid, 1, [message(2)])
    assert (gated.outcome, gated.stored) == ("gated", [])
    assert anyway.outcome == "current"


@covers("append", "lock_session", "read_stream")
async def test_a_decision_reads_its_own_appends_across_streams_before_commit(work: Harness) -> None:
    sid = await new_session(work)
    child = uuid4()
    async with work.uow() as uow:
        row = await uow.lock_session(sid)
        assert row is not None
        await uow.append(str(child), [created(child), message(1)], expected_version=0)
        await uow.append(str(sid), [message(1)], expected_version=row["version"])
        await uow.send("muster.commands", str(child), ProcessSession(session_id=child))
        mine = await uow.lock_session(child)  # the next statement sees what was appended
        assert mine is not None and mine["message_count"] == 1 and mine["version"] == 2
        assert [s.stream_version for s in await uow.read_stream(str(sid))] == [1, 2]
        await uow.append(str(sid), [message(2)], expected_version=2)  # after the flush, again
    async with work.uow() as uow:
        parent = await uow.lock_session(sid)
    assert parent is not None and parent["message_count"] == 2 and parent["version"] == 3
    assert len(work.sent()) == 1


@covers("current_version")
async def test_current_version_counts_the_decisions_own_appends(work: Harness) -> None:
    sid = await new_session(work)
    async with work.uow() as uow:
        row = await uow.lock_session(sid)
        assert row is not None and await uow.current_version(str(sid)) == 1
        await uow.append(str(sid), [message(1), message(2)], expected_version=row["version"])
        assert await uow.current_version(str(sid)) == 3
        assert await uow.current_version(str(uuid4())) == 0  # a stream nobody wrote
    async with work.uow() as uow:
        assert await uow.current_version(str(sid)) == 3


@covers("store_blobs", "append_if_current")
async def test_blobs_are_kept_once_by_digest_and_only_with_the_decision(work: Harness) -> None:
    assert work.blob is not None
    sid = await new_session(work)
    async with work.uow() as uow:
        await uow.append(str(sid), [ev.SessionPhaseChanged(phase="RUNNING")], expected_version=1)
        await uow.store_blobs({"aa": "first", "bb": "other"})
    with pytest.raises(RuntimeError):
        async with work.uow() as uow:
            await uow.store_blobs({"cc": "rolled back"})
            raise RuntimeError("the decision failed")
    async with work.uow() as uow:
        await uow.store_blobs({"aa": "second"})  # a content already stored is left alone
        recorded = await uow.append_if_current(sid, 0, [message(1)], blobs={"dd": "with the append"})
        refused = await uow.append_if_current(sid, 0, [message(1)], blobs={"ee": "not written"})
    assert (recorded.outcome, refused.outcome) == ("current", "moved")
    kept = [await work.blob(d) for d in ("aa", "bb", "cc", "dd", "ee")]
    assert kept == ["first", "other", None, "with the append", None]


@covers("append")
async def test_a_projection_constraint_refuses_the_decision_with_its_name(work: Harness) -> None:
    """A second execution of one tool call (invariant 1) is refused by the projection's
    unique key on both, with PostgreSQL's error and constraint name, and nothing of that
    decision remains (the keys decisions handle raise `DuplicateKey` instead)."""
    parent, child = await new_session(work), await new_session(work)
    first, second = uuid4(), uuid4()
    async with work.uow() as uow:
        await uow.append(str(first), [started(first, parent, child, "call-1")], expected_version=0)
    with pytest.raises(UniqueViolation) as refused:
        async with work.uow() as uow:
            await uow.append(str(second), [started(second, parent, child, "call-1")], expected_version=0)
            await uow.send("muster.commands", str(parent), ProcessSession(session_id=parent))
            await uow.read_stream(str(parent))  # the next statement writes what was staged
    assert refused.value.constraint_name == "executions_parent_call_key"
    async with work.uow() as uow:
        assert await uow.execution(second) is None and await uow.read_stream(str(second)) == []
        assert [e["execution_id"] for e in await uow.executions_of(parent)] == [first]
    assert work.sent() == []
