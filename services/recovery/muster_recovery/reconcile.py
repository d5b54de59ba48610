"""Reconciliation from the log of record: whatever the broker lost or a crash interrupted is
re-issued. Runs at start and then continuously.

The scans (`scan_port`) decide nothing: each item they find is decided again under its row
locks by its one function over the unit of work, so instances racing past a scan, or a
stale scan, never record anything twice:

| found | decided by |
|---|---|
| a turn nobody runs | `takeover.take_over_session` |
| queued input nobody picked up | `takeover.start_queued_input` |
| a run nobody holds | `takeover.take_over_execution` |
| a cancelled parent's open children | `cascade.cancel_children` |
| a run past its absolute deadline | `muster_agent.stopping.stop_execution` |
| a terminal, undelivered execution | `muster_agent.barrier.settle` |
"""

from __future__ import annotations

import logging
from datetime import datetime

from muster_agent.barrier import settle
from muster_agent.stopping import DEADLINE_PASSED, stop_execution
from muster_runtime.uow.unit_of_work import UnitOfWorkFactory

from muster_recovery.cascade import cancel_children
from muster_recovery.scan_port import RecoveryScans
from muster_recovery.takeover import start_queued_input, take_over_execution, take_over_session

log = logging.getLogger("muster.recovery")


async def reconcile_sessions(
    uows: UnitOfWorkFactory,
    scans: RecoveryScans,
    *,
    grace_s: float = 10.0,
    input_grace_s: float = 3.0,
    now: datetime | None = None,
) -> int:
    """Resume turns whose runner died; start turns whose queued input was never picked up.
    `now`: the scan's clock, the store's unless a test injects one."""
    at = now if now is not None else await scans.now()
    due = await scans.sessions_due(at, grace_s=grace_s, input_grace_s=input_grace_s)
    if due is None:
        return 0  # another instance is scanning
    if due.stale_inputs:
        await start_queued_input(uows, due.stale_inputs)
    resumed = [sid for sid in due.orphaned_turns if await take_over_session(uows, sid, at)]
    if due.orphaned_turns or due.stale_inputs:
        log.info(
            "session_recovery_scan orphaned=%d resumed=%d stale_inputs=%d",
            len(due.orphaned_turns),
            len(resumed),
            len(due.stale_inputs),
        )
    return len(resumed) + len(due.stale_inputs)


async def reconcile_executions(
    uows: UnitOfWorkFactory,
    scans: RecoveryScans,
    *,
    grace_s: float,
    cancel_grace_s: float,
    now: datetime | None = None,
) -> None:
    """Take over runs nobody holds, fail runs past their absolute deadline, deliver what
    finished but was never delivered."""
    at = now if now is not None else await scans.now()
    due = await scans.executions_due(at, grace_s=grace_s, cancel_grace_s=cancel_grace_s)
    if not due:
        return  # nothing due, or another instance is scanning
    log.info(
        "subagent_recovery_scan executions=%d parents=%d expired=%d abandoned=%d",
        len(due.orphaned),
        len(due.undelivered_parents),
        len(due.expired),
        len(due.abandoned_parents),
    )
    for execution_id in due.orphaned:
        await take_over_execution(uows, execution_id, at)
    for parent in due.abandoned_parents:
        await cancel_children(uows, parent)
    for execution_id in due.expired:
        await stop_execution(uows, execution_id, status="FAILED", error=DEADLINE_PASSED)
    for parent in due.undelivered_parents:
        await settle(uows, parent)


async def housekeeping(
    scans: RecoveryScans, *, keep_processed_s: float = 7 * 86400, keep_leases_s: float = 3600
) -> None:
    """Prune consumer tracking older than any redelivery can be, and long-expired leases."""
    await scans.prune(keep_processed_s=keep_processed_s, keep_leases_s=keep_leases_s)
