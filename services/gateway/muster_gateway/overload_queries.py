"""The overload signal on PostgreSQL (`overload.py`): turns accepted and not yet started,
cluster-wide, by the partial index of queued input (`session_inputs_queued`)."""

from __future__ import annotations

import time

from muster_runtime.process.db import Pool
from muster_runtime.uow.phases import ACTIVE_PHASES

from muster_gateway.overload import Backlog

QUERY_TIMEOUT_S = 2.0

# Input queued on a session no turn runs on: its ProcessSession is not claimed yet (input
# queued behind a running turn is that turn's user's own queue, not the cluster's backlog).
BACKLOG = """
SELECT count(*)::bigint AS waiting,
       coalesce(extract(epoch FROM clock_timestamp() - min(i.queued_at)) * 1000, 0)::float8 AS oldest_wait_ms
FROM session_inputs i JOIN sessions s ON s.session_id = i.session_id
WHERE i.state = 'QUEUED' AND NOT s.deleted
  AND (s.phase IS NULL OR NOT (s.phase = ANY($1::text[])))
"""


async def backlog(pool: Pool) -> Backlog:
    asked = time.perf_counter()
    async with pool.acquire() as conn:
        pool_wait_ms = (time.perf_counter() - asked) * 1000
        row = await conn.fetchrow(BACKLOG, list(ACTIVE_PHASES), timeout=QUERY_TIMEOUT_S)
    assert row is not None  # an aggregate without GROUP BY yields one row
    return Backlog(int(row["waiting"]), float(row["oldest_wait_ms"]), pool_wait_ms)
