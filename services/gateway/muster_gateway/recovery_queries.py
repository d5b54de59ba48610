"""The recovery figures of `/metrics` on PostgreSQL: one aggregate over the projections."""

from __future__ import annotations

import asyncio
import logging
from typing import get_args

from muster_contracts.events import ExecutionStatus
from muster_runtime.process.db import Pool

from muster_gateway.recovery_metrics import RecoverySnapshot

log = logging.getLogger("muster.gateway.metrics")

QUERY_TIMEOUT_S = 3.0  # well under Prometheus' default 10 s scrape timeout
STATUSES: tuple[str, ...] = get_args(ExecutionStatus)

# One round trip. An aggregate without GROUP BY always yields exactly one row, even when
# both tables are empty.
QUERY = """
WITH per_status AS (
    SELECT status,
           count(*) AS executions,
           sum(recoveries) AS recoveries,
           sum(lease_expiries) AS lease_expiries,
           count(*) FILTER (WHERE delivery_status = 'DELIVERED') AS delivered,
           count(*) FILTER (WHERE delivery_status = 'SUPPRESSED') AS suppressed
    FROM executions
    GROUP BY status
)
SELECT (SELECT coalesce(sum(recoveries), 0) FROM sessions)::bigint AS session_recoveries,
       coalesce(sum(recoveries), 0)::bigint AS execution_recoveries,
       coalesce(sum(lease_expiries), 0)::bigint AS lease_expiries,
       coalesce(sum(delivered), 0)::bigint AS delivered,
       coalesce(sum(suppressed), 0)::bigint AS suppressed,
       array_agg(status) AS statuses,
       array_agg(executions) AS counts
FROM per_status
"""


async def read(pool: Pool) -> RecoverySnapshot | None:
    """The current figures, or None (after a warning) when the database cannot answer."""
    try:
        async with asyncio.timeout(QUERY_TIMEOUT_S):
            row = await pool.fetchrow(QUERY)
    except Exception as exc:  # any failure: the scrape still serves the in-process metrics
        log.warning("recovery_metrics_unavailable error=%s", type(exc).__name__)
        return None
    assert row is not None
    counts = dict.fromkeys(STATUSES, 0)
    counts.update(zip(row["statuses"] or [], row["counts"] or [], strict=True))
    return RecoverySnapshot(
        session_recoveries=row["session_recoveries"],
        execution_recoveries=row["execution_recoveries"],
        lease_expiries=row["lease_expiries"],
        delivered=row["delivered"],
        suppressed=row["suppressed"],
        executions=counts,
    )
