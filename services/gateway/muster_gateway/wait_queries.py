"""SQL of the waits' REST reads (`rest_waits.py`)."""

from __future__ import annotations

from typing import Any

from muster_runtime.process.db import Pool

from muster_gateway.queries import owned

WAITS = """
SELECT wait_id, session_id, tool_call_id, detail, status, reason, created_at, resolved_at
FROM session_waits WHERE session_id = $1 AND kind = $2 AND ($3::text IS NULL OR status = $3)
ORDER BY position
"""
OUTSTANDING = """
SELECT wait_id, session_id, tool_call_id, detail FROM session_waits
WHERE user_id = $1 AND kind = 'tool' AND status = 'pending' ORDER BY position
"""
OWNER = "SELECT user_id FROM sessions WHERE session_id = $1"


async def waits(pool: Pool, user_id: str, raw_id: str, kind: str, status: str | None) -> list[Any]:
    row = await owned(pool, user_id, raw_id, "session_id")
    return list(await pool.fetch(WAITS, row["session_id"], kind, status))
