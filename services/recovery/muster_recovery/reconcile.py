"""Reconciliation from the event store: whatever the broker lost or a crash interrupted is
re-issued from the log of record. Runs at start and then continuously."""

from __future__ import annotations

import logging

from muster_contracts.commands import ProcessSession, RunExecution
from muster_runtime import outbox, topics
from muster_runtime.db import Pool

from muster_recovery.barrier import settle
from muster_recovery.cascade import cancel_children, stop_execution

log = logging.getLogger("muster.recovery")

# Only one recovery instance scans at a time; the commands it sends are idempotent anyway.
SCAN_LOCK_KEY = 0x72656376  # "recv"

# A parent waiting for running children needs no runner: the barrier resumes it.
ORPHANED_TURNS = """
SELECT s.session_id FROM sessions s
WHERE s.phase IN ('RUNNING', 'RESUMING') AND s.session_type <> 'SUBAGENT'
  AND NOT EXISTS (SELECT 1 FROM leases l
                  WHERE l.resource_id = s.session_id::text AND l.expires_at > now())
  AND NOT EXISTS (SELECT 1 FROM executions e
                  WHERE e.parent_session_id = s.session_id AND e.status IN ('RUNNING', 'RECOVERING'))
LIMIT 500
"""

# Input accepted by the gateway whose ProcessSession was lost (broker restart) or arrived
# while the session's loop was winding down: older than a grace period, nobody running it.
STALE_INPUTS = """
SELECT DISTINCT i.session_id FROM session_inputs i JOIN sessions s USING (session_id)
WHERE i.state = 'QUEUED' AND i.queued_at < now() - make_interval(secs => $1)
  AND (s.phase IS NULL OR s.phase NOT IN ('RUNNING', 'RESUMING'))
  AND s.session_type <> 'SUBAGENT'
LIMIT 500
"""


async def reconcile_sessions(pool: Pool, *, input_grace_s: float = 3.0) -> int:
    async with pool.acquire() as conn, conn.transaction():
        if not await conn.fetchval("SELECT pg_try_advisory_xact_lock($1)", SCAN_LOCK_KEY):
            return 0
        orphaned = [r["session_id"] for r in await conn.fetch(ORPHANED_TURNS)]
        stale = [r["session_id"] for r in await conn.fetch(STALE_INPUTS, input_grace_s)]
        for session_id in orphaned:
            await outbox.enqueue(
                conn,
                topics.COMMANDS,
                str(session_id),
                ProcessSession(session_id=session_id, reason="recovery"),
            )
        for session_id in stale:
            await outbox.enqueue(
                conn,
                topics.COMMANDS,
                str(session_id),
                ProcessSession(session_id=session_id, reason="stale_input"),
            )
    if orphaned or stale:
        log.info("session_recovery_scan orphaned=%d stale_inputs=%d", len(orphaned), len(stale))
    return len(orphaned) + len(stale)


ORPHANED_EXECUTIONS = """
SELECT e.execution_id, e.child_session_id, e.parent_session_id FROM executions e
WHERE e.status IN ('RUNNING', 'RECOVERING') AND e.started_at < now() - make_interval(secs => $1)
  AND (e.deadline_at + make_interval(secs => $2)) > now()
  AND NOT EXISTS (SELECT 1 FROM leases l
                  WHERE l.resource_id = e.execution_id::text AND l.expires_at > now())
LIMIT 500
"""

EXPIRED_EXECUTIONS = """
SELECT execution_id FROM executions
WHERE status IN ('RUNNING', 'RECOVERING') AND deadline_at + make_interval(secs => $1) < now()
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


async def reconcile_executions(pool: Pool, *, grace_s: float, cancel_grace_s: float) -> None:
    """Re-issue runs nobody holds, fail runs past their absolute deadline, deliver what
    finished but was never delivered."""
    async with pool.acquire() as conn, conn.transaction():
        if not await conn.fetchval("SELECT pg_try_advisory_xact_lock($1)", SCAN_LOCK_KEY + 1):
            return
        orphaned = await conn.fetch(ORPHANED_EXECUTIONS, grace_s, cancel_grace_s)
        for row in orphaned:
            await outbox.enqueue(
                conn,
                topics.DELEGATIONS,
                str(row["child_session_id"]),
                RunExecution(
                    execution_id=row["execution_id"],
                    child_session_id=row["child_session_id"],
                    parent_session_id=row["parent_session_id"],
                ),
            )
        expired = [r["execution_id"] for r in await conn.fetch(EXPIRED_EXECUTIONS, cancel_grace_s)]
        parents = [r["parent_session_id"] for r in await conn.fetch(UNDELIVERED_PARENTS)]
        abandoned = [r["parent_session_id"] for r in await conn.fetch(ABANDONED_CHILDREN_PARENTS)]
    for parent in abandoned:
        await cancel_children(pool, parent)
    for execution_id in expired:
        await stop_execution(
            pool, execution_id, status="FAILED", error="timed out: the execution passed its deadline"
        )
    for parent in parents:
        await settle(pool, parent)
    if orphaned or expired or parents or abandoned:
        log.info(
            "subagent_recovery_scan executions=%d expired=%d parents=%d",
            len(orphaned),
            len(expired),
            len(parents),
        )


async def housekeeping(
    pool: Pool, *, keep_processed_s: float = 7 * 86400, keep_leases_s: float = 3600
) -> None:
    """Prune consumer tracking older than any redelivery can be, and long-expired leases."""
    async with pool.acquire() as conn, conn.transaction():
        if not await conn.fetchval("SELECT pg_try_advisory_xact_lock($1)", SCAN_LOCK_KEY + 2):
            return
        await conn.execute(
            "DELETE FROM processed_messages WHERE processed_at < now() - make_interval(secs => $1)",
            keep_processed_s,
        )
        await conn.execute(
            "DELETE FROM leases WHERE expires_at < now() - make_interval(secs => $1)", keep_leases_s
        )
