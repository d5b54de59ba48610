"""The recovery service's query port: the read-only scans that find work a crash or a lost
message left behind. A scan decides nothing: each item it finds is decided again, under its
row locks, by one function over the unit of work (`takeover`, `muster_agent.barrier`,
`muster_agent.stopping`, `cascade`, `tree_status`). So a scan may be stale, or see an item
twice, and the outcome is the same.

Two adapters: `postgres_scans.PostgresScans` (the service's, SQL over the projections) and
`memory_scans.MemoryScans` (over the in-memory unit of work's state, for unit tests); both
pass `tests/unit/recovery/test_scan_port_contract.py`."""

from __future__ import annotations

import abc
from dataclasses import dataclass
from datetime import datetime
from uuid import UUID


@dataclass(frozen=True)
class Placement:
    """Where a session sits in its tree."""

    session_type: str
    parent_session_id: UUID | None
    root_session_id: UUID


@dataclass(frozen=True)
class SessionsDue:
    """Turns whose runner died (RUNNING or RESUMING past a grace, nobody's lease, no child
    pending: a parent waiting for its children needs no runner, the barrier resumes it),
    and sessions whose queued input nobody picked up (its `ProcessSession` lost, or sent
    while the loop was winding down)."""

    orphaned_turns: tuple[UUID, ...] = ()
    stale_inputs: tuple[UUID, ...] = ()


@dataclass(frozen=True)
class ExecutionsDue:
    """`orphaned`: open runs nobody holds (started and idle past a grace, within their
    deadline and its grace, the child not waiting for a person or its LOCAL client).
    `expired`: open runs past their absolute deadline plus the cancel grace (a waiting
    child, which no worker runs, at its deadline). `undelivered_parents`: parents with a
    terminal execution neither delivered nor suppressed. `abandoned_parents`: cancelled
    parents with children still open (the cascade's event was lost)."""

    orphaned: tuple[UUID, ...] = ()
    expired: tuple[UUID, ...] = ()
    undelivered_parents: tuple[UUID, ...] = ()
    abandoned_parents: tuple[UUID, ...] = ()

    def __bool__(self) -> bool:
        return bool(self.orphaned or self.expired or self.undelivered_parents or self.abandoned_parents)


class RecoveryScans(abc.ABC):
    """What recovery reads outside its decisions."""

    @abc.abstractmethod
    async def now(self) -> datetime:
        """The store's clock: leases and deadlines are compared with it."""

    @abc.abstractmethod
    async def sessions_due(self, at: datetime, *, grace_s: float, input_grace_s: float) -> SessionsDue | None:
        """The sessions to take over or to start at `at`; None: another recovery instance
        is scanning right now (one scans at a time, the others skip this round)."""

    @abc.abstractmethod
    async def executions_due(
        self, at: datetime, *, grace_s: float, cancel_grace_s: float
    ) -> ExecutionsDue | None:
        """The executions to take over or stop, and the parents to settle or cascade, at
        `at`; None: another recovery instance is scanning right now."""

    @abc.abstractmethod
    async def drifted_trees(self, limit: int) -> list[UUID]:
        """Live NORMAL roots whose recorded tree signals differ from their tree now (their
        triggering event was lost with the broker), at most `limit`."""

    @abc.abstractmethod
    async def placement(self, session_id: UUID) -> Placement | None:
        """Where the session sits now (None: no such session)."""

    @abc.abstractmethod
    async def prune(self, *, keep_processed_s: float, keep_leases_s: float) -> bool:
        """Housekeeping, the port's one write: forget consumer tracking older than any
        redelivery can be and leases long expired; no decision reads either any more.
        False: another instance is pruning."""
