"""The tree signals: after any change that can move them (a phase, a read, an archive, a
delete, a promotion, a wait) anywhere in a tree, the root's `SessionTreeStatusChanged` is
appended if what its descendants add up to differs from the last one recorded.

Idempotent and order-free: the status is recomputed from the read models each time
(`AbstractUnitOfWork.tree_status`), so a redelivered or late event finds nothing to record;
every change is followed by its own event, so the last recomputation sees the last state.
The common case (nothing changed) takes no lock. The one decision is `record_tree_status`.
"""

from __future__ import annotations

import logging
from uuid import UUID

import asyncpg
from muster_contracts.published import RecordedEvent
from muster_contracts.session_events import SessionTreeStatusChanged
from muster_runtime.process import retrying
from muster_runtime.store import eventstore
from muster_runtime.uow.unit_of_work import AbstractUnitOfWork, UnitOfWorkFactory

from muster_recovery.placements import Placements
from muster_recovery.scan_port import RecoveryScans

log = logging.getLogger("muster.recovery.tree")

TRIGGERS = frozenset(
    {
        "SessionPhaseChanged",
        "SessionRead",
        "SessionArchived",
        "SessionUnarchived",
        "SessionDeleted",
        "SessionPromoted",
    }
)
# Pending approvals and questions count anywhere in the tree, the root's own included.
WAIT_TRIGGERS = frozenset({"ApprovalRequested", "ApprovalResolved", "QuestionAsked", "QuestionResolved"})
ATTEMPTS = 5
RACES = (eventstore.ConcurrencyError, asyncpg.DeadlockDetectedError)


def reacts_to(event_type: str) -> bool:
    return event_type in TRIGGERS or event_type in WAIT_TRIGGERS


async def on_event(
    event: RecordedEvent, uows: UnitOfWorkFactory, scans: RecoveryScans, placements: Placements
) -> None:
    if not reacts_to(event.type):
        return
    placed = await placements.of(scans, UUID(event.stream_id))
    roots: set[UUID] = set()
    if placed is not None and event.type in WAIT_TRIGGERS:
        roots.add(placed.root_session_id)
    # A root's own changes and its own subagents' are not part of its tree's signals.
    if placed is not None and placed.root_session_id not in (UUID(event.stream_id), placed.parent_session_id):
        roots.add(placed.root_session_id)
    elif placed is not None and placed.session_type == "SIDE_TASK":
        roots.add(placed.root_session_id)  # a first-level side task
    if event.type == "SessionPromoted":
        roots.add(UUID(str(event.payload["previous_root_session_id"])))  # its old tree lost it
        roots.add(UUID(event.stream_id))  # and it is the root of its own now
    for root in roots:
        await refresh(uows, root)


async def refresh(uows: UnitOfWorkFactory, root_id: UUID) -> bool:
    """Record the root's tree status if it changed; True when an event was appended."""
    async with uows() as uow:
        status = await uow.tree_status(root_id)  # unlocked: most changes change nothing
    if status is None or not status.changed:
        return False

    async def record() -> bool:
        async with uows() as uow:
            return await record_tree_status(uow, root_id)

    return await retrying.call(retrying.lost_race(RACES, attempts=ATTEMPTS), record)


async def record_tree_status(uow: AbstractUnitOfWork, root_id: UUID) -> bool:
    """The decision, under the root's lock: append the root's `SessionTreeStatusChanged`
    when its tree adds up to something else than the last one recorded."""
    await uow.lock_session(root_id)
    status = await uow.tree_status(root_id)
    if status is None or not status.changed:
        return False
    now = status.current
    changed = SessionTreeStatusChanged(
        tree_running=now.running,
        tree_unread=now.unread,
        pending_approvals=now.approvals,
        pending_questions=now.questions,
    )
    meta = {"root_session_id": str(root_id)}
    await uow.append(str(root_id), [changed], expected_version=status.version, metadata=meta)
    log.info("tree_status_changed root=%s running=%s unread=%s", root_id, now.running, now.unread)
    return True


async def reconcile(uows: UnitOfWorkFactory, scans: RecoveryScans, limit: int = 100) -> int:
    """Record the signals an event lost with the broker never triggered; the count fixed."""
    fixed = 0
    for root in await scans.drifted_trees(limit):
        fixed += await refresh(uows, root)
    if fixed:
        log.info("tree_status_reconciled roots=%d", fixed)
    return fixed
