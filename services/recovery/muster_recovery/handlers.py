"""Reactions to events on `muster.events`. Each is idempotent by construction: decisions are
re-read under row locks and appends name the version they extend, so a redelivered event
finds nothing left to do."""

from __future__ import annotations

import logging
from uuid import UUID

from muster_agent.barrier import has_undelivered, settle
from muster_contracts.published import RecordedEvent
from muster_runtime.db import Pool

from muster_recovery import tree_status
from muster_recovery.cascade import cancel_children

log = logging.getLogger("muster.recovery")

OPEN_SIBLINGS = """
SELECT e.parent_session_id,
       (SELECT count(*) FROM executions o WHERE o.parent_session_id = e.parent_session_id
          AND o.status IN ('RUNNING', 'RECOVERING')) AS open
FROM executions e WHERE e.execution_id = $1
"""


async def on_event(event: RecordedEvent, pool: Pool) -> None:
    if event.type == "ExecutionFinished":
        # Only the last open sibling can complete the barrier; the others would take the
        # parent's lock to find it still waiting. Its worker normally settled it already, in
        # the transaction that finished it (ADR 0011): then nothing is undelivered. (The
        # periodic scan settles anything missed.)
        row = await pool.fetchrow(OPEN_SIBLINGS, UUID(event.stream_id))
        if row is not None and row["open"] == 0 and await has_undelivered(pool, row["parent_session_id"]):
            await settle(pool, row["parent_session_id"])
    elif event.type == "SessionPhaseChanged" and event.payload.get("phase") == "CANCELLED":
        await cancel_children(pool, UUID(event.stream_id))
    elif event.type == "MessageRecorded" and event.payload.get("role") == "TOOL":
        # A local tool finishing after the children did completes the barrier too.
        session_id = UUID(event.stream_id)
        if await has_undelivered(pool, session_id):
            await settle(pool, session_id)
    # Any change that can move a tree's signals, wherever it is in the tree.
    await tree_status.on_event(event, pool)
