"""The tree signals: after any change that can move them (a phase, a read, an archive, a
delete, a promotion) anywhere in a tree, the root's `SessionTreeStatusChanged` is appended
if what its descendants add up to differs from the last one recorded.

Idempotent and order-free: the status is recomputed from the read models each time (the
same `muster_tree_status` that `GET /v1/sessions` calls), so a redelivered or late event
finds nothing to record; every change is followed by its own event, so the last
recomputation sees the last state. The common case (nothing changed) takes no lock.
"""

from __future__ import annotations

import logging
from collections import OrderedDict
from collections.abc import Mapping
from typing import Any
from uuid import UUID

import asyncpg
from muster_contracts.published import RecordedEvent
from muster_contracts.session_events import SessionTreeStatusChanged
from muster_runtime.process import retrying
from muster_runtime.process.db import Pool
from muster_runtime.store import eventstore
from muster_runtime.uow.postgres_uow import PostgresUnitOfWork
from muster_runtime.uow.unit_of_work import Row

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
STATUS = """
SELECT s.session_id, s.version, s.tree_running, s.tree_unread, s.pending_approvals,
    s.pending_questions, t.tree_running AS now_running, t.tree_unread AS now_unread,
    t.pending_approvals AS now_approvals, t.pending_questions AS now_questions
FROM sessions s, muster_tree_status(ARRAY[s.session_id]) t
WHERE s.session_id = $1 AND s.root_session_id = s.session_id AND NOT s.deleted
"""


def reacts_to(event_type: str) -> bool:
    return event_type in TRIGGERS or event_type in WAIT_TRIGGERS


class Placements:
    """Where sessions sit in their trees (type, parent, root), remembered only where it
    can never change: a NORMAL session is a root for good, and a subagent whose parent is
    its root stays so (a root is never moved; a promotion makes a side task a root, which
    only ever makes a subagent's parent its root). Every other session is read each time."""

    def __init__(self, size: int = 65_536) -> None:
        self._size = size
        self._known: OrderedDict[UUID, Row] = OrderedDict()

    def learn(self, created: Mapping[str, Any]) -> None:
        """A `SessionCreated` payload, peeked at before its session's later events: where
        that session sits, remembered when it can never change, so they need no read."""
        try:
            session_id = UUID(str(created["session_id"]))
            root = UUID(str(created["root_session_id"]))
            parent = created.get("parent_session_id")
            row = {
                "session_type": str(created.get("session_type") or "NORMAL"),
                "parent_session_id": UUID(str(parent)) if parent else None,
                "root_session_id": root,
            }
        except (KeyError, ValueError):
            return  # read when needed, as any other
        self._remember(session_id, row)

    async def of(self, pool: Pool, session_id: UUID) -> Row | None:
        row = self._known.get(session_id)
        if row is not None:
            self._known.move_to_end(session_id)
            return row
        found = await pool.fetchrow(
            "SELECT session_type, parent_session_id, root_session_id FROM sessions WHERE session_id = $1",
            session_id,
        )
        if found is None:
            return None
        row = dict(found)
        self._remember(session_id, row)
        return row

    def _remember(self, session_id: UUID, row: Row) -> None:
        fixed = (row["session_type"] == "NORMAL" and row["root_session_id"] == session_id) or (
            row["session_type"] == "SUBAGENT" and row["parent_session_id"] == row["root_session_id"]
        )
        if fixed:
            self._known[session_id] = row
            if len(self._known) > self._size:
                self._known.popitem(last=False)


async def on_event(event: RecordedEvent, pool: Pool, placements: Placements) -> None:
    if not reacts_to(event.type):
        return
    row = await placements.of(pool, UUID(event.stream_id))
    roots: set[UUID] = set()
    if row is not None and event.type in WAIT_TRIGGERS:
        roots.add(row["root_session_id"])
    # A root's own changes and its own subagents' are not part of its tree's signals.
    if row is not None and row["root_session_id"] not in (UUID(event.stream_id), row["parent_session_id"]):
        roots.add(row["root_session_id"])
    elif row is not None and row["session_type"] == "SIDE_TASK":
        roots.add(row["root_session_id"])  # a first-level side task
    if event.type == "SessionPromoted":
        roots.add(UUID(str(event.payload["previous_root_session_id"])))  # its old tree lost it
        roots.add(UUID(event.stream_id))  # and it is the root of its own now
    for root in roots:
        await refresh(pool, root)


def _changed(row: Any) -> bool:
    return bool(
        (row["tree_running"], row["tree_unread"], row["pending_approvals"], row["pending_questions"])
        != (row["now_running"], row["now_unread"], row["now_approvals"], row["now_questions"])
    )


async def refresh(pool: Pool, root_id: UUID) -> bool:
    """Record the root's tree status if it changed; True when an event was appended."""
    row = await pool.fetchrow(STATUS, root_id)
    if row is None or not _changed(row):
        return False

    async def record() -> bool:
        async with PostgresUnitOfWork(pool) as uow:
            return await _record(uow, root_id)

    races = (eventstore.ConcurrencyError, asyncpg.DeadlockDetectedError)
    return await retrying.call(retrying.lost_race(races, attempts=ATTEMPTS), record)


async def _record(uow: PostgresUnitOfWork, root_id: UUID) -> bool:
    await uow.lock_session(root_id)
    # The signals are a query over the tree's rows (a read, like recovery's scans); the
    # decision (compare, append) is made under the root's lock.
    row = await (await uow.connection()).fetchrow(STATUS, root_id)
    if row is None or not _changed(row):
        return False
    status = SessionTreeStatusChanged(
        tree_running=row["now_running"],
        tree_unread=row["now_unread"],
        pending_approvals=row["now_approvals"],
        pending_questions=row["now_questions"],
    )
    meta = {"root_session_id": str(root_id)}
    await uow.append(str(root_id), [status], expected_version=row["version"], metadata=meta)
    log.info(
        "tree_status_changed root=%s running=%s unread=%s", root_id, status.tree_running, status.tree_unread
    )
    return True


# Roots whose recorded signals differ from their tree now: only roots with side tasks or
# pending waits can have a nonzero status, and only they or roots still showing one can differ.
STALE = """
WITH roots AS (
    SELECT s.session_id FROM sessions s
    WHERE s.session_type = 'NORMAL' AND NOT s.deleted
      AND (s.tree_running OR s.tree_unread OR s.pending_approvals > 0 OR s.pending_questions > 0
           OR EXISTS (SELECT 1 FROM sessions c
                      WHERE c.parent_session_id = s.session_id AND c.session_type = 'SIDE_TASK')
           OR s.session_id IN (SELECT c.root_session_id FROM session_waits w
                               JOIN sessions c ON c.session_id = w.session_id
                               WHERE w.status = 'pending' AND w.kind IN ('approval', 'question'))))
SELECT s.session_id FROM sessions s
JOIN muster_tree_status(ARRAY(SELECT session_id FROM roots)) t ON t.root_session_id = s.session_id
WHERE (s.tree_running, s.tree_unread, s.pending_approvals, s.pending_questions)
    IS DISTINCT FROM (t.tree_running, t.tree_unread, t.pending_approvals, t.pending_questions)
LIMIT $1
"""


async def reconcile(pool: Pool, limit: int = 100) -> int:
    """Record the signals an event lost with the broker never triggered; the count fixed."""
    fixed = 0
    for row in await pool.fetch(STALE, limit):
        fixed += await refresh(pool, row["session_id"])
    if fixed:
        log.info("tree_status_reconciled roots=%d", fixed)
    return fixed
