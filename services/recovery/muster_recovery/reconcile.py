"""Reconciliation from the event store: whatever the broker lost or a crash interrupted is
re-issued from the log of record. Runs at start and then continuously."""

from __future__ import annotations

import logging

from muster_contracts.commands import ProcessSession
from muster_runtime import outbox, topics
from muster_runtime.db import Pool

log = logging.getLogger("muster.recovery")

# Only one recovery instance scans at a time; the commands it sends are idempotent anyway.
SCAN_LOCK_KEY = 0x72656376  # "recv"

ORPHANED_TURNS = """
SELECT s.session_id FROM sessions s
WHERE s.phase IN ('RUNNING', 'RESUMING') AND s.session_type <> 'SUBAGENT'
  AND NOT EXISTS (SELECT 1 FROM leases l
                  WHERE l.resource_id = s.session_id::text AND l.expires_at > now())
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
                conn, topics.COMMANDS, str(session_id),
                ProcessSession(session_id=session_id, reason="recovery"),
            )
        for session_id in stale:
            await outbox.enqueue(
                conn, topics.COMMANDS, str(session_id),
                ProcessSession(session_id=session_id, reason="stale_input"),
            )
    if orphaned or stale:
        log.info("session_recovery_scan orphaned=%d stale_inputs=%d", len(orphaned), len(stale))
    return len(orphaned) + len(stale)
