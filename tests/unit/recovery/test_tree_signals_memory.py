"""The tree signals on the in-memory unit of work (`tree_status.record_tree_status`, reached
from recovery's reaction to an event or from reconciliation): recorded on the root once per
change, a redelivery records nothing, a promotion refreshes both trees, and a signal whose
event was lost is made up by reconciliation."""

from __future__ import annotations

from pathlib import Path
from uuid import UUID, uuid4

from muster_contracts import events as ev
from muster_contracts import session_events as se
from muster_recovery import tree_status
from muster_recovery.placements import Placements

from .builders import running_session
from .recovery_world import RecoveryWorld, published


async def side_task(world: RecoveryWorld, root: UUID, parent: UUID) -> UUID:
    sid = uuid4()
    async with world.uows() as uow:
        await uow.append(str(sid), [ev.SessionCreated(
            session_id=sid, user_id="alice", session_type="SIDE_TASK", parent_session_id=parent, root_session_id=root,
        )], expected_version=0)  # fmt: skip
    return sid


async def react(world: RecoveryWorld, placements: Placements, sid: UUID, event: ev.DomainEvent) -> None:
    """`event` is appended to `sid` and reaches recovery (twice: a redelivery)."""
    async with world.uows() as uow:
        await uow.append(str(sid), [event], expected_version=None)
    (*_, stored) = await world.events(sid, event.type)
    for _ in range(2):
        await tree_status.on_event(published(stored), world.uows, world.scans, placements)


async def signals(world: RecoveryWorld, root: UUID) -> list[tuple[bool, bool]]:
    return [
        (e.event.tree_running, e.event.tree_unread)  # type: ignore[attr-defined]
        for e in await world.events(root, "SessionTreeStatusChanged")
    ]


async def test_a_change_deep_in_the_tree_is_recorded_on_the_root_once(tmp_path: Path) -> None:
    world, placements = RecoveryWorld(tmp_path), Placements()
    root = await running_session(world.uows)
    deep = await side_task(world, root, await side_task(world, root, root))
    await react(world, placements, deep, ev.SessionPhaseChanged(phase="RUNNING"))
    assert await signals(world, root) == [(True, False)]
    await react(world, placements, deep, ev.SessionPhaseChanged(phase="COMPLETED"))
    await react(world, placements, deep, se.SessionRead())
    assert await signals(world, root) == [(True, False), (False, True), (False, False)]
    await react(world, placements, root, ev.SessionPhaseChanged(phase="COMPLETED"))  # the root's own turn
    assert len(await signals(world, root)) == 3


async def test_a_promotion_refreshes_the_tree_it_left_and_the_one_it_roots(tmp_path: Path) -> None:
    world, placements = RecoveryWorld(tmp_path), Placements()
    root = await running_session(world.uows)
    task = await side_task(world, root, root)
    below = await side_task(world, root, task)
    await react(world, placements, below, ev.SessionPhaseChanged(phase="RUNNING"))
    promoted = se.SessionPromoted(previous_parent_session_id=root, previous_root_session_id=root)
    await react(world, placements, task, promoted)
    assert await signals(world, root) == [(True, False), (False, False)]
    assert await signals(world, task) == [(True, False)]


async def test_reconciliation_makes_up_a_signal_whose_event_was_lost(tmp_path: Path) -> None:
    world = RecoveryWorld(tmp_path)
    root = await running_session(world.uows)
    task = await side_task(world, root, root)
    async with world.uows() as uow:  # recorded, but its event never reached recovery
        await uow.append(str(task), [ev.SessionPhaseChanged(phase="RUNNING")], expected_version=None)
    assert await tree_status.reconcile(world.uows, world.scans) == 1
    assert await signals(world, root) == [(True, False)]
    assert await tree_status.reconcile(world.uows, world.scans) == 0
