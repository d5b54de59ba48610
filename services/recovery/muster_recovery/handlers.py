"""Reactions to events on `muster.events`. Each is idempotent by construction: decisions are
re-read under row locks and appends name the version they extend, so a redelivered event
finds nothing left to do."""

from __future__ import annotations

import logging
from uuid import UUID

from muster_contracts.published import RecordedEvent
from muster_runtime.db import Pool

from muster_recovery.barrier import has_undelivered, settle
from muster_recovery.cascade import cancel_children

log = logging.getLogger("muster.recovery")


async def on_event(event: RecordedEvent, pool: Pool) -> None:
    if event.type == "ExecutionFinished":
        parent = await pool.fetchval(
            "SELECT parent_session_id FROM executions WHERE execution_id = $1", UUID(event.stream_id)
        )
        if parent is not None:
            await settle(pool, parent)
    elif event.type == "SessionPhaseChanged" and event.payload.get("phase") == "CANCELLED":
        await cancel_children(pool, UUID(event.stream_id))
    elif event.type == "MessageRecorded" and event.payload.get("role") == "TOOL":
        # A local tool finishing after the children did completes the barrier too.
        session_id = UUID(event.stream_id)
        if await has_undelivered(pool, session_id):
            await settle(pool, session_id)
