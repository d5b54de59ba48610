"""The recovery scans over the in-memory unit of work's committed state, as
`postgres_scans` asks PostgreSQL: recovery's decisions are unit-tested with no database.
Transactions in memory are serialised, so no other instance is ever scanning."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from uuid import UUID

from muster_runtime.uow import memory_trees
from muster_runtime.uow.memory_uow import MemoryStore
from muster_runtime.uow.phases import OPEN_STATUSES, RUNNING_PHASES, TERMINAL_STATUSES, WAITING_PHASES

from muster_recovery.scan_port import ExecutionsDue, Placement, RecoveryScans, SessionsDue

LIMIT = 500  # as each PostgreSQL scan


class MemoryScans(RecoveryScans):
    def __init__(self, store: MemoryStore) -> None:
        self._store = store

    async def now(self) -> datetime:
        return datetime.now(UTC)

    async def sessions_due(self, at: datetime, *, grace_s: float, input_grace_s: float) -> SessionsDue | None:
        tables = self._store.state.tables
        pending = {
            e["parent_session_id"] for e in tables.executions.values() if e["delivery_status"] == "PENDING"
        }
        orphaned = [
            s["session_id"]
            for s in tables.sessions.values()
            if s["phase"] in RUNNING_PHASES
            and s["session_type"] != "SUBAGENT"
            and s["updated_at"] < at - timedelta(seconds=grace_s)
            and not self._leased(str(s["session_id"]), at)
            and s["session_id"] not in pending
        ]
        idle = [
            s["session_id"]
            for s in tables.sessions.values()
            if s["phase"] not in (*RUNNING_PHASES, *WAITING_PHASES) and s["session_type"] != "SUBAGENT"
        ]
        queued = {
            i["session_id"]
            for i in tables.inputs.values()
            if i["state"] == "QUEUED" and i["queued_at"] < at - timedelta(seconds=input_grace_s)
        }
        stale = [sid for sid in idle if sid in queued]
        return SessionsDue(tuple(orphaned[:LIMIT]), tuple(stale[:LIMIT]))

    async def executions_due(
        self, at: datetime, *, grace_s: float, cancel_grace_s: float
    ) -> ExecutionsDue | None:
        tables = self._store.state.tables
        idle_since = at - timedelta(seconds=grace_s)
        grace = timedelta(seconds=cancel_grace_s)
        open_runs = [
            (e, tables.sessions[e["child_session_id"]])
            for e in tables.executions.values()
            if e["status"] in OPEN_STATUSES and e["child_session_id"] in tables.sessions
        ]
        orphaned = [
            e["execution_id"]
            for e, child in open_runs
            if e["started_at"] < idle_since
            and child["updated_at"] < idle_since
            and e["deadline_at"] + grace > at
            and child["phase"] not in WAITING_PHASES
            and not self._leased(str(e["execution_id"]), at)
        ]
        expired = [
            e["execution_id"]
            for e, child in open_runs
            if e["deadline_at"] + grace < at or (e["deadline_at"] < at and child["phase"] in WAITING_PHASES)
        ]
        undelivered = {
            e["parent_session_id"]
            for e in tables.executions.values()
            if e["delivery_status"] == "PENDING" and e["status"] in TERMINAL_STATUSES
        }
        cancelled = {sid for sid, s in tables.sessions.items() if s["phase"] == "CANCELLED"}
        abandoned = {e["parent_session_id"] for e, _ in open_runs} & cancelled
        return ExecutionsDue(
            tuple(orphaned[:LIMIT]),
            tuple(expired[:LIMIT]),
            tuple(sorted(undelivered)[:LIMIT]),
            tuple(sorted(abandoned)[:LIMIT]),
        )

    async def drifted_trees(self, limit: int) -> list[UUID]:
        state = self._store.state
        return memory_trees.drifted(memory_trees.nodes(state.streams), state.tables.waits.values(), limit)

    async def placement(self, session_id: UUID) -> Placement | None:
        node = memory_trees.nodes(self._store.state.streams).get(session_id)
        if node is None:
            return None
        return Placement(node.session_type, node.parent_session_id, node.root_session_id)

    async def prune(self, *, keep_processed_s: float, keep_leases_s: float) -> bool:
        # Consumer tracking in memory keeps no time: only leases are pruned.
        async with self._store.lock:
            before = datetime.now(UTC) - timedelta(seconds=keep_leases_s)
            leases = self._store.state.leases
            for resource_id in [r for r, (_, expires) in leases.items() if expires < before]:
                del leases[resource_id]
        return True

    def _leased(self, resource_id: str, at: datetime) -> bool:
        held = self._store.state.leases.get(resource_id)
        return held is not None and held[1] > at
