"""The recovery scans, one contract for both adapters (in memory, then PostgreSQL): what
each scan finds at a given clock, and what it leaves alone (a grace not yet passed, a live
lease, a parent waiting for its children, a child waiting for a person)."""

from __future__ import annotations

from datetime import timedelta
from uuid import UUID, uuid4

from muster_contracts import events as ev
from muster_contracts import session_events as se
from muster_recovery.scan_port import Placement
from muster_recovery.tree_status import record_tree_status

from .builders import delegating_parent, execution, finished_unsettled, running_session
from .ports import Ports

LATER = timedelta(seconds=60)


async def append(ports: Ports, sid: UUID, *events: ev.DomainEvent) -> None:
    async with ports.uows() as uow:
        await uow.append(str(sid), list(events), expected_version=None)


async def lease(ports: Ports, resource: UUID, ttl_s: float) -> None:
    async with ports.uows() as uow:
        assert await uow.try_lease(str(resource), "someone", ttl_s)


async def test_turns_nobody_runs_and_input_nobody_picked_up(ports: Ports) -> None:
    orphan, leased, queued_idle, queued_running = [await running_session(ports.uows) for _ in range(4)]
    waiting, _ = await delegating_parent(ports.uows, ["c"])
    await lease(ports, leased, 3600)
    await append(ports, queued_idle, ev.SessionPhaseChanged(phase="COMPLETED"))
    for sid in (queued_idle, queued_running):
        await append(ports, sid, ev.UserMessageQueued(message_id=uuid4(), content="next"))
    now = await ports.scans.now()
    early = await ports.scans.sessions_due(now, grace_s=10, input_grace_s=3)
    assert early is not None and early.orphaned_turns == () and early.stale_inputs == ()
    due = await ports.scans.sessions_due(now + LATER, grace_s=10, input_grace_s=3)
    assert due is not None
    assert set(due.orphaned_turns) == {orphan, queued_running}
    assert waiting not in due.orphaned_turns  # a parent waiting for its children needs no runner
    assert set(due.stale_inputs) == {queued_idle}  # a running session takes its input itself


async def test_runs_nobody_holds_runs_past_their_deadline_and_parents_due(ports: Ports) -> None:
    parent, (open_, waiting, leased) = await delegating_parent(ports.uows, ["open", "waiting", "leased"])
    child = (await execution(ports.uows, waiting))["child_session_id"]
    await append(ports, child, ev.SessionPhaseChanged(phase="WAITING_INPUT"))
    await lease(ports, leased, 7200)
    deadline = (await execution(ports.uows, open_))["deadline_at"]
    finished_parent, (done,) = await delegating_parent(ports.uows, ["done"])
    await finished_unsettled(ports.uows, done, "boom")
    cancelled, _ = await delegating_parent(ports.uows, ["orphaned"])
    await append(ports, cancelled, ev.SessionPhaseChanged(phase="CANCELLED"))

    now = await ports.scans.now()
    due = await ports.scans.executions_due(now + LATER, grace_s=10, cancel_grace_s=30)
    assert due is not None
    assert open_ in due.orphaned and waiting not in due.orphaned and leased not in due.orphaned
    assert due.expired == ()
    assert set(due.undelivered_parents) == {finished_parent}
    assert set(due.abandoned_parents) == {cancelled}
    # Past its deadline a waiting child ends at once; a running one after the grace.
    due = await ports.scans.executions_due(deadline + timedelta(seconds=5), grace_s=10, cancel_grace_s=30)
    assert due is not None and waiting in due.expired and open_ not in due.expired
    due = await ports.scans.executions_due(deadline + timedelta(seconds=31), grace_s=10, cancel_grace_s=30)
    assert due is not None and {open_, waiting, leased} <= set(due.expired)
    assert not {open_, waiting, leased} & set(due.orphaned)  # never taken over past the grace
    assert parent not in due.undelivered_parents


async def test_trees_whose_signals_drifted_until_recorded(ports: Ports) -> None:
    root = await running_session(ports.uows)
    task = uuid4()
    await append(ports, task, ev.SessionCreated(
        session_id=task, user_id="alice", session_type="SIDE_TASK", parent_session_id=root, root_session_id=root,
    ), ev.SessionPhaseChanged(phase="RUNNING"))  # fmt: skip
    assert await ports.scans.drifted_trees(100) == [root]
    async with ports.uows() as uow:
        assert await record_tree_status(uow, root)
    assert await ports.scans.drifted_trees(100) == []


async def test_placements_follow_a_promotion(ports: Ports) -> None:
    root = await running_session(ports.uows)
    task, child = uuid4(), uuid4()
    await append(ports, task, ev.SessionCreated(
        session_id=task, user_id="alice", session_type="SIDE_TASK", parent_session_id=root, root_session_id=root))
    await append(ports, child, ev.SessionCreated(
        session_id=child, user_id="alice", session_type="SUBAGENT", parent_session_id=task, root_session_id=root))
    assert await ports.scans.placement(root) == Placement("NORMAL", None, root)
    assert await ports.scans.placement(child) == Placement("SUBAGENT", task, root)
    assert await ports.scans.placement(uuid4()) is None
    await append(ports, task, se.SessionPromoted(previous_parent_session_id=root, previous_root_session_id=root))
    assert await ports.scans.placement(task) == Placement("NORMAL", None, task)
    assert await ports.scans.placement(child) == Placement("SUBAGENT", task, task)


async def test_prune_forgets_leases_long_expired_only(ports: Ports) -> None:
    gone, kept = uuid4(), uuid4()
    await lease(ports, gone, -120)  # expired two minutes ago
    await lease(ports, kept, 3600)
    assert await ports.scans.prune(keep_processed_s=3600, keep_leases_s=60)
    async with ports.uows() as uow:
        now = await ports.scans.now()
        assert await uow.lease_live(str(gone), now) is None
        assert await uow.lease_live(str(kept), now) is True
