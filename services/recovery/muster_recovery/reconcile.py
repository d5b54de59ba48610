"""Reconciliation from the event store: whatever the broker lost or a crash interrupted is
re-issued from the log of record. Runs at start and then continuously.

The scans are PostgreSQL queries over the projections (they decide nothing: each takeover
is decided again under its row locks, through the unit of work)."""

from __future__ import annotations

import logging
from datetime import datetime
from functools import partial

from muster_agent.barrier import settle
from muster_agent.stopping import DEADLINE_PASSED, stop_execution
from muster_contracts.commands import ProcessSession
from muster_runtime.messaging import topics
from muster_runtime.process.db import Pool
from muster_runtime.uow.postgres_uow import PostgresUnitOfWork

from muster_recovery.cascade import cancel_children
from muster_recovery.takeover import take_over_execution, take_over_session

log = logging.getLogger("muster.recovery")

# Only one recovery instance scans at a time; each takeover is re-checked under row locks
# anyway, so instances racing past this never record one twice.
SCAN_LOCK_KEY = 0x72656376  # "recv"

# A parent waiting for its children needs no runner: the barrier resumes it once they are
# all terminal (and re-sends ResumeSession if that is lost). `$1` is the clock.
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

# Input accepted by the gateway whose ProcessSession was lost (broker restart) or arrived
# while the session's loop was winding down: older than a grace period, nobody running it.
STALE_INPUTS = """
SELECT DISTINCT i.session_id FROM session_inputs i JOIN sessions s USING (session_id)
WHERE i.state = 'QUEUED' AND i.queued_at < $1::timestamptz - make_interval(secs => $2)
  AND (s.phase IS NULL OR s.phase NOT IN ('RUNNING', 'RESUMING', 'WAITING_APPROVAL',
                                          'WAITING_INPUT', 'WAITING_CLIENT'))
  AND s.session_type <> 'SUBAGENT'
LIMIT 500
"""


async def clock(pool: Pool, now: datetime | None) -> datetime:
    """The scan's notion of now: the database's, unless a test injects one."""
    return now if now is not None else await pool.fetchval("SELECT now()")


async def reconcile_sessions(
    pool: Pool, *, grace_s: float = 10.0, input_grace_s: float = 3.0, now: datetime | None = None
) -> int:
    """Resume turns whose runner died; start turns whose queued input was never picked up."""
    at = await clock(pool, now)
    uows = partial(PostgresUnitOfWork, pool)
    async with uows() as uow:
        conn = await uow.connection()
        if not await conn.fetchval("SELECT pg_try_advisory_xact_lock($1)", SCAN_LOCK_KEY):
            return 0
        orphaned = [r["session_id"] for r in await conn.fetch(ORPHANED_TURNS, at, grace_s)]
        stale = [r["session_id"] for r in await conn.fetch(STALE_INPUTS, at, input_grace_s)]
        for session_id in stale:
            await uow.send(
                topics.COMMANDS,
                str(session_id),
                ProcessSession(session_id=session_id, reason="stale_input"),
            )
    resumed = [sid for sid in orphaned if await take_over_session(uows, sid, at)]
    if orphaned or stale:
        log.info(
            "session_recovery_scan orphaned=%d resumed=%d stale_inputs=%d",
            len(orphaned),
            len(resumed),
            len(stale),
        )
    return len(resumed) + len(stale)


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

# Children still running under a parent that no longer runs: its cancellation event may
# have been lost with the broker.
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


async def reconcile_executions(
    pool: Pool, *, grace_s: float, cancel_grace_s: float, now: datetime | None = None
) -> None:
    """Take over runs nobody holds, fail runs past their absolute deadline, deliver what
    finished but was never delivered."""
    at = await clock(pool, now)
    uows = partial(PostgresUnitOfWork, pool)
    async with uows() as uow:
        conn = await uow.connection()
        if not await conn.fetchval("SELECT pg_try_advisory_xact_lock($1)", SCAN_LOCK_KEY + 1):
            return
        orphaned = [
            r["execution_id"] for r in await conn.fetch(ORPHANED_EXECUTIONS, at, grace_s, cancel_grace_s)
        ]
        expired = [r["execution_id"] for r in await conn.fetch(EXPIRED_EXECUTIONS, at, cancel_grace_s)]
        parents = [r["parent_session_id"] for r in await conn.fetch(UNDELIVERED_PARENTS)]
        abandoned = [r["parent_session_id"] for r in await conn.fetch(ABANDONED_CHILDREN_PARENTS)]
    if orphaned or expired or parents or abandoned:
        log.info(
            "subagent_recovery_scan executions=%d parents=%d expired=%d abandoned=%d",
            len(orphaned),
            len(parents),
            len(expired),
            len(abandoned),
        )
    for execution_id in orphaned:
        await take_over_execution(uows, execution_id, at)
    for parent in abandoned:
        await cancel_children(uows, parent)
    for execution_id in expired:
        await stop_execution(uows, execution_id, status="FAILED", error=DEADLINE_PASSED)
    for parent in parents:
        await settle(uows, parent)


async def housekeeping(
    pool: Pool, *, keep_processed_s: float = 7 * 86400, keep_leases_s: float = 3600
) -> None:
    """Prune consumer tracking older than any redelivery can be, and long-expired leases."""
    async with PostgresUnitOfWork(pool) as uow:
        conn = await uow.connection()
        if not await conn.fetchval("SELECT pg_try_advisory_xact_lock($1)", SCAN_LOCK_KEY + 2):
            return
        await conn.execute(
            "DELETE FROM processed_messages WHERE processed_at < now() - make_interval(secs => $1)",
            keep_processed_s,
        )
        await conn.execute(
            "DELETE FROM leases WHERE expires_at < now() - make_interval(secs => $1)", keep_leases_s
        )
