"""The recovery scans on PostgreSQL: the queries over the projections that find work (the
only SQL of the recovery service). Each scan runs in a transaction of its own holding an
advisory lock, so only one recovery instance scans at a time; the items found are decided
afterwards, each in its own unit of work."""

from __future__ import annotations

from datetime import datetime
from uuid import UUID

from muster_runtime.process.db import Connection, Pool

from muster_recovery.scan_port import ExecutionsDue, Placement, RecoveryScans, SessionsDue

SCAN_LOCK_KEY = 0x72656376  # "recv"; + 1 for executions, + 2 for housekeeping
TRY_LOCK = "SELECT pg_try_advisory_xact_lock($1)"

# `$1` is the clock everywhere.
ORPHANED_TURNS = """
SELECT s.session_id FROM sessions s
WHERE s.phase IN ('RUNNING', 'RESUMING') AND s.session_type <> 'SUBAGENT'
  AND s.updated_at < $1::timestamptz - make_interval(secs => $2)
  AND NOT EXISTS (SELECT 1 FROM leases l
                  WHERE l.resource_id = s.session_id::text AND l.expires_at > $1::timestamptz)
  AND NOT EXISTS (SELECT 1 FROM executions e
                  WHERE e.parent_session_id = s.session_id AND e.delivery_status = 'PENDING')
LIMIT 500
"""

STALE_INPUTS = """
SELECT DISTINCT i.session_id FROM session_inputs i JOIN sessions s USING (session_id)
WHERE i.state = 'QUEUED' AND i.queued_at < $1::timestamptz - make_interval(secs => $2)
  AND (s.phase IS NULL OR s.phase NOT IN ('RUNNING', 'RESUMING', 'WAITING_APPROVAL',
                                          'WAITING_INPUT', 'WAITING_CLIENT'))
  AND s.session_type <> 'SUBAGENT'
LIMIT 500
"""

# A child waiting for a person or its LOCAL client needs no runner: its answer resumes it
# (and, like any change to the child, gives its worker a grace to take the lease again).
ORPHANED_EXECUTIONS = """
SELECT e.execution_id FROM executions e JOIN sessions c ON c.session_id = e.child_session_id
WHERE e.status IN ('RUNNING', 'RECOVERING') AND e.started_at < $1::timestamptz - make_interval(secs => $2)
  AND c.updated_at < $1::timestamptz - make_interval(secs => $2)
  AND (e.deadline_at + make_interval(secs => $3)) > $1::timestamptz
  AND c.phase IS DISTINCT FROM 'WAITING_APPROVAL' AND c.phase IS DISTINCT FROM 'WAITING_INPUT'
  AND c.phase IS DISTINCT FROM 'WAITING_CLIENT'
  AND NOT EXISTS (SELECT 1 FROM leases l
                  WHERE l.resource_id = e.execution_id::text AND l.expires_at > $1::timestamptz)
LIMIT 500
"""

# Deadlines are absolute (`deadline_at` was fixed when the execution started), so a
# restart never grants a run more time. The grace lets a running worker stop by itself; a
# waiting child has no worker, so it ends at its deadline.
EXPIRED_EXECUTIONS = """
SELECT e.execution_id FROM executions e JOIN sessions c ON c.session_id = e.child_session_id
WHERE e.status IN ('RUNNING', 'RECOVERING')
  AND (e.deadline_at + make_interval(secs => $2) < $1::timestamptz
       OR (e.deadline_at < $1::timestamptz
           AND c.phase IN ('WAITING_APPROVAL', 'WAITING_INPUT', 'WAITING_CLIENT')))
LIMIT 500
"""

ABANDONED_CHILDREN_PARENTS = """
SELECT DISTINCT e.parent_session_id FROM executions e JOIN sessions p ON p.session_id = e.parent_session_id
WHERE e.status IN ('RUNNING', 'RECOVERING') AND p.phase = 'CANCELLED'
LIMIT 500
"""

UNDELIVERED_PARENTS = """
SELECT DISTINCT parent_session_id FROM executions
WHERE delivery_status = 'PENDING' AND status IN ('COMPLETED', 'FAILED', 'CANCELLED')
LIMIT 500
"""

# Only roots with side tasks or pending waits can have a nonzero status, and only they or
# roots still showing one can differ: the set-based `muster_tree_status` runs on those.
DRIFTED_TREES = """
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

PLACEMENT = "SELECT session_type, parent_session_id, root_session_id FROM sessions WHERE session_id = $1"

PRUNE_PROCESSED = "DELETE FROM processed_messages WHERE processed_at < now() - make_interval(secs => $1)"
PRUNE_LEASES = "DELETE FROM leases WHERE expires_at < now() - make_interval(secs => $1)"


class PostgresScans(RecoveryScans):
    def __init__(self, pool: Pool) -> None:
        self._pool = pool

    async def now(self) -> datetime:
        now: datetime = await self._pool.fetchval("SELECT now()")
        return now

    async def sessions_due(self, at: datetime, *, grace_s: float, input_grace_s: float) -> SessionsDue | None:
        async with self._pool.acquire() as conn, conn.transaction():
            if not await conn.fetchval(TRY_LOCK, SCAN_LOCK_KEY):
                return None
            return SessionsDue(
                orphaned_turns=await _ids(conn, ORPHANED_TURNS, at, grace_s),
                stale_inputs=await _ids(conn, STALE_INPUTS, at, input_grace_s),
            )

    async def executions_due(
        self, at: datetime, *, grace_s: float, cancel_grace_s: float
    ) -> ExecutionsDue | None:
        async with self._pool.acquire() as conn, conn.transaction():
            if not await conn.fetchval(TRY_LOCK, SCAN_LOCK_KEY + 1):
                return None
            return ExecutionsDue(
                orphaned=await _ids(conn, ORPHANED_EXECUTIONS, at, grace_s, cancel_grace_s),
                expired=await _ids(conn, EXPIRED_EXECUTIONS, at, cancel_grace_s),
                undelivered_parents=await _ids(conn, UNDELIVERED_PARENTS),
                abandoned_parents=await _ids(conn, ABANDONED_CHILDREN_PARENTS),
            )

    async def drifted_trees(self, limit: int) -> list[UUID]:
        return [row[0] for row in await self._pool.fetch(DRIFTED_TREES, limit)]

    async def placement(self, session_id: UUID) -> Placement | None:
        row = await self._pool.fetchrow(PLACEMENT, session_id)
        return Placement(*row) if row is not None else None

    async def prune(self, *, keep_processed_s: float, keep_leases_s: float) -> bool:
        async with self._pool.acquire() as conn, conn.transaction():
            if not await conn.fetchval(TRY_LOCK, SCAN_LOCK_KEY + 2):
                return False
            await conn.execute(PRUNE_PROCESSED, keep_processed_s)
            await conn.execute(PRUNE_LEASES, keep_leases_s)
        return True


async def _ids(conn: Connection, query: str, *args: object) -> tuple[UUID, ...]:
    return tuple(row[0] for row in await conn.fetch(query, *args))
