"""Decisions made in one statement when nothing needs deciding under a lock, one contract
for both units of work (ADR 0025): a turn's quiet close writes its events, and a running
session's claim records the command and takes the lease, only when the session is as the
caller expects; otherwise each says why and writes nothing."""

from __future__ import annotations

from datetime import UTC, datetime
from uuid import UUID, uuid4

from muster_contracts import events as ev
from muster_runtime.uow.unit_of_work import RunClose

from tests.unit.runtime.uow_contract import covers
from tests.unit.runtime.uow_harness import Harness, message, new_session, started

COMPLETED = ev.SessionPhaseChanged(phase="COMPLETED")


async def running(work: Harness, messages: int = 1) -> UUID:
    sid = await new_session(work)
    async with work.uow() as uow:
        await uow.append(str(sid), [ev.SessionPhaseChanged(phase="RUNNING")], expected_version=1)
        await uow.append(str(sid), [message(n) for n in range(1, messages + 1)], expected_version=2)
    return sid


def answer(seq: int) -> ev.MessageRecorded:
    return ev.MessageRecorded(message_id=uuid4(), seq=seq, role="ASSISTANT", content="done")


async def delegated(work: Harness, children: int) -> tuple[UUID, list[tuple[UUID, UUID]]]:
    """A parent with `children` running children, each with its open execution."""
    parent = await running(work)
    runs = []
    for n in range(children):
        child, eid = await running(work), uuid4()
        async with work.uow() as uow:
            await uow.append(str(eid), [started(eid, parent, child, f"c{n}")], expected_version=0)
        runs.append((child, eid))
    return parent, runs


def run_close(eid: UUID, parent: UUID, version: int = 1) -> RunClose:
    return RunClose(
        execution_id=eid,
        execution_version=version,
        parent_session_id=parent,
        finished=[ev.ExecutionFinished(status="COMPLETED", result="done")],
        notice=[ev.ExecutionStatusChanged(execution_id=eid, status="COMPLETED", delivery_status="PENDING")],
        finished_metadata={"barrier": "checked"},
    )


@covers("close_quietly")
async def test_a_quiet_close_ends_the_turn_after_the_sessions_current_version(work: Harness) -> None:
    sid = await running(work)
    async with work.uow() as uow:
        outcome = await uow.close_quietly(sid, 1, [answer(2), COMPLETED], run=None)
    assert outcome == "closed"
    async with work.uow() as uow:
        row = await uow.lock_session(sid)
        stream = await uow.read_stream(str(sid))
    assert row is not None and (row["phase"], row["message_count"], row["version"]) == ("COMPLETED", 2, 5)
    assert [(s.stream_version, s.type) for s in stream[-2:]] == [
        (4, "MessageRecorded"),
        (5, "SessionPhaseChanged"),
    ]


@covers("close_quietly")
async def test_a_quiet_close_refuses_a_session_gone_moved_on_or_with_queued_input(work: Harness) -> None:
    idle, moved, queued = await new_session(work), await running(work, 2), await running(work)
    async with work.uow() as uow:
        queue = [ev.UserMessageQueued(message_id=uuid4(), content="next")]
        await uow.append(str(queued), queue, expected_version=3)
    async with work.uow() as uow:
        outcomes = [
            await uow.close_quietly(idle, 0, [answer(1), COMPLETED], run=None),
            await uow.close_quietly(moved, 1, [answer(2), COMPLETED], run=None),
            await uow.close_quietly(queued, 1, [answer(2), COMPLETED], run=None),
        ]
    assert outcomes == ["gone", "moved", "queued"]
    async with work.uow() as uow:
        versions = [await uow.current_version(str(s)) for s in (idle, moved, queued)]
    assert versions == [1, 4, 4]  # nothing written


@covers("close_quietly")
async def test_a_child_that_is_not_the_last_closes_its_run_and_tells_its_parent(work: Harness) -> None:
    parent, [(child, eid), _] = await delegated(work, 2)
    async with work.uow() as uow:
        parent_version = await uow.current_version(str(parent))
        outcome = await uow.close_quietly(child, 1, [answer(2), COMPLETED], run=run_close(eid, parent))
    assert outcome == "closed"
    async with work.uow() as uow:
        run = await uow.execution(eid)
        finished = (await uow.read_stream(str(eid)))[-1]
        notice = (await uow.read_stream(str(parent)))[-1]
        child_row = await uow.lock_session(child)
    assert run is not None and (run["status"], run["result"], run["version"]) == ("COMPLETED", "done", 2)
    assert finished.type == "ExecutionFinished" and finished.metadata["barrier"] == "checked"
    assert (notice.type, notice.stream_version) == ("ExecutionStatusChanged", parent_version + 1)
    assert child_row is not None and child_row["phase"] == "COMPLETED"


@covers("close_quietly")
async def test_the_rounds_last_open_run_or_a_changed_run_is_refused(work: Harness) -> None:
    parent, [(child, eid)] = await delegated(work, 1)
    async with work.uow() as uow:
        last = await uow.close_quietly(child, 1, [answer(2), COMPLETED], run=run_close(eid, parent))
        stale = await uow.close_quietly(child, 1, [answer(2), COMPLETED], run=run_close(eid, parent, 7))
        other = await uow.close_quietly(child, 1, [answer(2), COMPLETED], run=run_close(uuid4(), parent))
    assert (last, stale, other) == ("last", "changed", "changed")
    async with work.uow() as uow:
        run = await uow.execution(eid)
        child_row = await uow.lock_session(child)
    assert run is not None and run["status"] == "RUNNING"
    assert child_row is not None and child_row["phase"] == "RUNNING"


@covers("claim_session")
async def test_a_session_is_claimed_under_its_lock_with_its_reads(work: Harness) -> None:
    sid = await running(work, 1)
    queued = ev.UserMessageQueued(message_id=uuid4(), content="next")
    async with work.uow() as uow:
        await uow.append(str(sid), [COMPLETED, queued], expected_version=3)
    async with work.uow() as uow:
        claim = await uow.claim_session("harness", "m1", sid, "h1", 60)
        assert claim.first and claim.leased and claim.row is not None
        assert (claim.row["phase"], claim.row["version"]) == ("COMPLETED", 5)
        assert (await uow.next_queued_input(sid) or {})["message_id"] == queued.message_id
        state = await uow.session_state(sid)
        assert state is not None and [m["seq"] for m in state.messages] == [1]
        await uow.append(str(sid), [answer(2)], expected_version=5)
        after = await uow.session_state(sid)  # read again: the decision wrote since
        assert after is not None and [m["seq"] for m in after.messages] == [1, 2]
    async with work.uow() as uow:
        again = await uow.claim_session("harness", "m1", sid, "h2", 60)  # a redelivery
        other = await uow.claim_session("harness", "m2", sid, "h2", 60)  # h1's lease is live
    assert (again.first, again.row, again.leased) == (False, None, False)
    assert other.first and other.row is not None and not other.leased


@covers("claim_session")
async def test_a_claim_takes_no_lease_on_a_subagent_or_an_unknown_session(work: Harness) -> None:
    parent, subagent = await running(work), uuid4()
    async with work.uow() as uow:
        await uow.append(str(subagent), [
            ev.SessionCreated(session_id=subagent, user_id="u", session_type="SUBAGENT",
                              parent_session_id=parent, root_session_id=parent),
        ], expected_version=0)  # fmt: skip
    async with work.uow() as uow:
        child = await uow.claim_session("harness", "m1", subagent, "h1", 60)
        unknown = await uow.claim_session("harness", "m2", uuid4(), "h1", 60)
    assert child.first and child.row is not None and child.row["session_type"] == "SUBAGENT"
    assert not child.leased and (unknown.first, unknown.row, unknown.leased) == (True, None, False)
    async with work.uow() as uow:
        assert await uow.lease_live(str(subagent), datetime.now(UTC)) is None
