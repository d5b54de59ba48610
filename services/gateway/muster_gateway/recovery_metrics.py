"""Recovery and delivery figures of the whole deployment, read from the projections at
scrape time (`ClientReads.recovery_figures`; the SQL is `recovery_queries.py`'s): they cover
every instance and survive restarts, unlike in-process counters.

The read is async while prometheus_client collects synchronously, so the `/metrics` handler
awaits the read first and hands the snapshot to the collector just before rendering.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field

from prometheus_client.metrics_core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector


@dataclass(frozen=True)
class RecoverySnapshot:
    session_recoveries: int = 0
    execution_recoveries: int = 0
    lease_expiries: int = 0
    delivered: int = 0
    suppressed: int = 0
    executions: dict[str, int] = field(default_factory=dict)


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
