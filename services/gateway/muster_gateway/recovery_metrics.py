"""Recovery and delivery figures of the whole deployment, read from the PostgreSQL projections
at scrape time: they cover every instance and survive restarts, unlike in-process counters.

The read is async (asyncpg) while prometheus_client collects synchronously, so the `/metrics`
handler awaits `read` first and hands the snapshot to the collector just before rendering.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import get_args

from muster_contracts.events import ExecutionStatus
from muster_runtime.process.db import Pool
from prometheus_client.metrics_core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

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


@dataclass(frozen=True)
class RecoverySnapshot:
    session_recoveries: int = 0
    execution_recoveries: int = 0
    lease_expiries: int = 0
    delivered: int = 0
    suppressed: int = 0
    executions: dict[str, int] = field(default_factory=dict)


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


class RecoveryCollector(Collector):
    """Yields the snapshot last handed to it; nothing when there is none (the database did not
    answer this scrape): a missing series is honest, a stale value would not be."""

    def __init__(self) -> None:
        self.snapshot: RecoverySnapshot | None = None

    def collect(self) -> Iterator[Metric]:
        snap = self.snapshot
        if snap is None:
            return
        recoveries = CounterMetricFamily(
            "muster_recoveries", "Takeovers by recovery, by kind (execution or session turn)", labels=["kind"]
        )
        recoveries.add_metric(["execution"], snap.execution_recoveries)
        recoveries.add_metric(["session"], snap.session_recoveries)
        yield recoveries
        yield CounterMetricFamily(
            "muster_lease_expiries",
            "Execution takeovers because the worker's lease expired",
            value=snap.lease_expiries,
        )
        yield CounterMetricFamily(
            "muster_result_deliveries", "Execution results delivered to their parent", value=snap.delivered
        )
        yield CounterMetricFamily(
            "muster_results_suppressed",
            "Execution results suppressed (parent cancelled or ended)",
            value=snap.suppressed,
        )
        executions = GaugeMetricFamily(
            "muster_executions", "Executions now in each status", labels=["status"]
        )
        for status, count in sorted(snap.executions.items()):
            executions.add_metric([status], count)
        yield executions
