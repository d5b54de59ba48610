"""Quiescence: every session terminal, no execution running or recovering, nothing
finished but undelivered, no input still queued."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import asyncpg

PENDING_WORK = """
SELECT
  (SELECT count(*) FROM sessions
    WHERE phase IS NULL OR phase NOT IN ('COMPLETED', 'FAILED', 'CANCELLED')) AS open_sessions,
  (SELECT count(*) FROM executions WHERE status IN ('RUNNING', 'RECOVERING')) AS open_executions,
  (SELECT count(*) FROM executions
    WHERE delivery_status = 'PENDING' AND status IN ('COMPLETED', 'FAILED', 'CANCELLED')) AS undelivered,
  (SELECT count(*) FROM session_inputs WHERE state = 'QUEUED') AS queued_inputs
"""

DETAILS = """
SELECT 'session ' || session_id || ' ' || session_type || ' phase=' || coalesce(phase, 'null') AS what
  FROM sessions WHERE phase IS NULL OR phase NOT IN ('COMPLETED', 'FAILED', 'CANCELLED')
UNION ALL
SELECT 'execution ' || execution_id || ' status=' || status || ' delivery=' || delivery_status
  FROM executions WHERE status IN ('RUNNING', 'RECOVERING')
     OR (delivery_status = 'PENDING' AND status IN ('COMPLETED', 'FAILED', 'CANCELLED'))
UNION ALL
SELECT 'input ' || message_id || ' of ' || session_id || ' QUEUED' FROM session_inputs WHERE state = 'QUEUED'
LIMIT 40
"""


async def wait_quiet(pool: asyncpg.Pool, deadline: float, tasks_done: asyncio.Event) -> dict[str, Any]:
    started = time.monotonic()
    left: dict[str, int] = {}
    while True:
        try:
            row = await pool.fetchrow(PENDING_WORK)
            assert row is not None
            left = {k: int(v) for k, v in dict(row).items()}
        except (OSError, asyncpg.PostgresError) as exc:
            left = {"db_error": 1}
            print(f"[chaos] quiescence poll failed: {exc}", flush=True)
        if not any(left.values()) and tasks_done.is_set():
            return {"reached": True, "waited_s": round(time.monotonic() - started, 1), "left": left}
        if time.monotonic() > deadline:
            details = [r["what"] for r in await pool.fetch(DETAILS)]
            return {
                "reached": False,
                "waited_s": round(time.monotonic() - started, 1),
                "left": left,
                "details": details,
            }
        await asyncio.sleep(0.5)
