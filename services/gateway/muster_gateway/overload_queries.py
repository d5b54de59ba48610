"""The overload signal on PostgreSQL (`overload.py`), cluster-wide: turns accepted and not
yet started, by the partial index of queued input (`session_inputs_queued`), delegations
whose child has not started, by the partial index of open executions (`executions_open`),
and turns under way, by the partial index of running sessions (`sessions_phase`)."""

from __future__ import annotations

import time

from muster_runtime.process.db import Pool
from muster_runtime.uow.phases import ACTIVE_PHASES, RUNNING_PHASES

from muster_gateway.overload_rule import Backlog

QUERY_TIMEOUT_S = 2.0

# Turns: input queued on a session no turn runs on, so its ProcessSession is not claimed
# yet (input queued behind a running turn is that turn's user's own queue, not the
# cluster's backlog).
# Delegations: a running execution whose child has recorded nothing since its task (its
# start message) and can run (not waiting for a person, its LOCAL client or its own
# children, which would have recorded the call). A worker claims (leases) every delegation
# it consumes and runs `MUSTER_WORKER_CONCURRENCY` at once, so those wait in its queue or
# are in their first model call: they count. Only those no live worker holds give the
# oldest wait, because a first model call may take as long as the model does, and a
# RECOVERING execution waits for its lease, not for capacity.
BACKLOG = """
WITH turns AS (
    SELECT count(*) AS n, min(i.queued_at) AS since
    FROM session_inputs i JOIN sessions s ON s.session_id = i.session_id
    WHERE i.state = 'QUEUED' AND NOT s.deleted
      AND (s.phase IS NULL OR NOT (s.phase = ANY($1::text[])))
), delegations AS (
    SELECT count(*) AS n, min(x.started_at) FILTER (WHERE l.resource_id IS NULL) AS since
    FROM executions x
    JOIN sessions c ON c.session_id = x.child_session_id
    JOIN messages m ON m.message_id = x.start_message_id
    LEFT JOIN leases l ON l.resource_id = x.execution_id::text AND l.expires_at > clock_timestamp()
    WHERE x.status = 'RUNNING' AND NOT c.deleted AND c.phase = ANY($2::text[])
      AND c.message_count <= m.seq
), running AS (
    SELECT count(*) AS n FROM sessions s
    WHERE s.phase = ANY($2::text[]) AND s.session_type <> 'SUBAGENT' AND NOT s.deleted
)
SELECT t.n::bigint AS turns, d.n::bigint AS delegations, r.n::bigint AS running,
       coalesce(extract(epoch FROM clock_timestamp() - least(t.since, d.since)) * 1000, 0)::float8
           AS oldest_wait_ms
FROM turns t, delegations d, running r
"""


async def backlog(pool: Pool) -> Backlog:
    asked = time.perf_counter()
    async with pool.acquire() as conn:
        pool_wait_ms = (time.perf_counter() - asked) * 1000
        row = await conn.fetchrow(
            BACKLOG, list(ACTIVE_PHASES), list(RUNNING_PHASES), timeout=QUERY_TIMEOUT_S
        )
    assert row is not None  # aggregates without GROUP BY yield one row
    return Backlog(
        int(row["turns"]),
        float(row["oldest_wait_ms"]),
        pool_wait_ms,
        delegations=int(row["delegations"]),
        running=int(row["running"]),
    )
