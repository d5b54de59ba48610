"""The unit of work in memory: the same contract as `PostgresUnitOfWork` (the contract tests
run against both), so the loop, the barrier and delegation are unit-tested without a
database.

A transaction works on a private copy of the store and swaps it in on commit. Transactions
are serialised by one lock taken at begin: stricter than PostgreSQL's row locks, with the
same outcomes for a decision (it sees what committed before it, and a stale expected
version still loses); so `lock_session(nowait=True)` never finds a row busy.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any
from uuid import UUID, uuid4

from muster_contracts import events as ev
from muster_contracts.envelope import Envelope

from muster_runtime.store import lineage
from muster_runtime.store.eventstore import ConcurrencyError, Recorded, StoredEvent
from muster_runtime.uow import memory_trees
from muster_runtime.uow.aggregates import Compaction, Input, Message, Session, Wait
from muster_runtime.uow.memory_projection import Tables, project
from muster_runtime.uow.phases import ACTIVE_PHASES, OPEN_STATUSES, RUNNING_PHASES
from muster_runtime.uow.recovery_views import TreeStatus
from muster_runtime.uow.unit_of_work import (
    AbstractUnitOfWork,
    ExecutionClaim,
    LockedClaim,
    Row,
    RunClose,
    SessionSnapshot,
)


@dataclass
class MemoryState:
    streams: dict[str, list[StoredEvent]] = field(default_factory=dict)
    tables: Tables = field(default_factory=Tables)
    processed: set[tuple[str, str]] = field(default_factory=set)
    blobs: dict[str, str] = field(default_factory=dict)
    leases: dict[str, tuple[str, datetime]] = field(default_factory=dict)
    position: int = 0

    def copy(self) -> MemoryState:
        """What a transaction works on (stored events are immutable, so lists are enough)."""
        return MemoryState(
            streams={k: list(v) for k, v in self.streams.items()},
            tables=self.tables.copy(),
            processed=set(self.processed),
            blobs=dict(self.blobs),
            leases=dict(self.leases),
            position=self.position,
        )


@dataclass
class MemoryStore:
    """What the in-memory units of work share: the committed state and what was sent."""

    state: MemoryState = field(default_factory=MemoryState)
    sent: list[tuple[str, str, Envelope]] = field(default_factory=list)
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)

    def uow(self) -> InMemoryUnitOfWork:
        return InMemoryUnitOfWork(self)


class InMemoryUnitOfWork(AbstractUnitOfWork):
    def __init__(self, store: MemoryStore) -> None:
        self._store = store
        self._work = MemoryState()
        self._sending: list[tuple[str, str, Envelope]] = []

    @property
    def _tables(self) -> Tables:
        return self._work.tables

    async def _begin(self) -> None:
        await self._store.lock.acquire()
        self._work = self._store.state.copy()
        self._sending = []

    async def _commit(self) -> None:
        self._store.state = self._work
        self._store.sent += self._sending
        self._store.lock.release()

    async def _rollback(self) -> None:
        self._store.lock.release()

    async def append(
        self,
        stream_id: str,
        events: Sequence[ev.DomainEvent],
        *,
        expected_version: int | None,
        metadata: dict[str, Any] | None = None,
    ) -> None:
        self._append(stream_id, events, expected_version=expected_version, metadata=metadata)

    def _append(
        self,
        stream_id: str,
        events: Sequence[ev.DomainEvent],
        *,
        expected_version: int | None,
        metadata: dict[str, Any] | None = None,
    ) -> list[StoredEvent]:
        stream = self._work.streams.setdefault(stream_id, [])
        if expected_version is None:
            expected_version = len(stream)
        if expected_version != len(stream):
            raise ConcurrencyError(f"stream {stream_id} moved past {expected_version}")
        now = datetime.now(UTC)
        stored = []
        event_ids = [uuid4() for _ in events]
        filled = lineage.event_metadata(metadata, event_ids[0]) if event_ids else metadata or {}
        for offset, (event_id, event) in enumerate(zip(event_ids, events, strict=True), start=1):
            self._work.position += 1
            version = expected_version + offset
            record = StoredEvent(self._work.position, stream_id, version, event_id, now, filled, event)
            stream.append(record)
            project(self._tables, record)
            stored.append(record)
        return stored

    async def append_if_current(
        self,
        session_id: UUID,
        expected_count: int,
        events: Sequence[ev.DomainEvent],
        *,
        blobs: Mapping[str, str] | None = None,
        ungated: bool = False,
    ) -> Recorded:
        row = self._tables.sessions.get(session_id)
        if row is None or row["phase"] not in RUNNING_PHASES:
            return Recorded("gone", row["version"] if row else None, row["phase"] if row else None, [])
        gates = row.get("permission_level", "auto") != "auto" or row.get("execution_mode", "CLOUD") != "CLOUD"
        if ungated and gates:
            return Recorded("gated", row["version"], row["phase"], [])
        if row["message_count"] != expected_count:
            return Recorded("moved", row["version"], row["phase"], [])
        await self.store_blobs(blobs or {})
        base, phase = row["version"], row["phase"]
        stored = self._append(str(session_id), events, expected_version=base)
        return Recorded("current", base, phase, stored)

    async def close_quietly(
        self, session_id: UUID, expected_count: int, events: Sequence[ev.DomainEvent], *, run: RunClose | None
    ) -> str:
        row = self._tables.sessions.get(session_id)
        if row is None or row["phase"] not in RUNNING_PHASES:
            return "gone"
        if row["message_count"] != expected_count:
            return "moved"
        if await self.next_queued_input(session_id) is not None:
            return "queued"
        parent_version = 0
        if run is not None:
            open_run = await self.open_execution_of(session_id)
            if open_run is None or (open_run["execution_id"], open_run["version"]) != (
                run.execution_id,
                run.execution_version,
            ):
                return "changed"
            parent = self._tables.sessions.get(run.parent_session_id)
            if parent is None:
                return "changed"
            siblings = await self.executions_of(run.parent_session_id, open_only=True)
            if all(e["execution_id"] == run.execution_id for e in siblings):
                return "last"
            parent_version = parent["version"]
        self._append(str(session_id), events, expected_version=row["version"])
        if run is not None:
            self._append(
                str(run.execution_id),
                run.finished,
                expected_version=run.execution_version,
                metadata=run.finished_metadata,
            )
            self._append(str(run.parent_session_id), run.notice, expected_version=parent_version)
        return "closed"

    async def store_blobs(self, blobs: Mapping[str, str]) -> None:
        for digest, content in blobs.items():
            self._work.blobs.setdefault(digest, content)

    async def send(self, topic: str, key: str, message: Envelope) -> None:
        self._sending.append((topic, key, lineage.stamp(message)))

    async def first_delivery(self, consumer: str, message_id: str) -> bool:
        if (consumer, message_id) in self._work.processed:
            return False
        self._work.processed.add((consumer, message_id))
        return True

    async def try_lease(self, resource_id: str, owner: str, ttl_s: float) -> bool:
        now = datetime.now(UTC)
        held = self._work.leases.get(resource_id)
        if held is not None and held[0] != owner and held[1] > now:
            return False
        self._work.leases[resource_id] = (owner, now + timedelta(seconds=ttl_s))
        return True

    async def claim_execution(
        self, consumer: str, message_id: str, execution_id: UUID, owner: str, ttl_s: float
    ) -> ExecutionClaim:
        first = await self.first_delivery(consumer, message_id)
        execution = await self.execution(execution_id)
        open_ = execution is not None and execution["status"] in OPEN_STATUSES
        leased = first and open_ and await self.try_lease(str(execution_id), owner, ttl_s)
        child = self._tables.sessions.get(execution["child_session_id"]) if execution else None
        state = await self.session_state(child["session_id"]) if leased and child else None
        return ExecutionClaim(first, execution, leased, child["phase"] if child else None, state)

    async def claim_session(
        self, consumer: str, message_id: str, session_id: UUID, owner: str, ttl_s: float
    ) -> LockedClaim:
        if not await self.first_delivery(consumer, message_id):
            return LockedClaim(False, None, False)
        row = await self.lock_session(session_id)
        if row is None or row["session_type"] == "SUBAGENT":
            return LockedClaim(True, row, False)
        return LockedClaim(True, row, await self.try_lease(str(session_id), owner, ttl_s))

    async def lock_session(
        self, session_id: UUID, *, nowait: bool = False, then: UUID | None = None
    ) -> Row | None:
        row = self._tables.sessions.get(session_id)
        return dict(row) if row is not None else None

    async def session_state(self, session_id: UUID) -> SessionSnapshot | None:
        row = self._tables.sessions.get(session_id)
        if row is None:
            return None
        history = sorted(
            (
                m
                for m in self._tables.messages.values()
                if m["session_id"] == session_id and not m["discarded"]
            ),
            key=lambda m: m["seq"],
        )
        fields = ("message_id", "seq", "role", "content", "tool_calls", "tool_call_id", "usage")
        messages = [{k: m[k] for k in fields} for m in history]
        started = frozenset(call for sid, call in self._tables.tool_runs if sid == session_id)
        compaction = self._tables.compactions.get(session_id)
        return SessionSnapshot(dict(row), messages, started, dict(compaction) if compaction else None)

    async def read_stream(self, stream_id: str) -> list[StoredEvent]:
        return list(self._work.streams.get(stream_id, []))

    async def current_version(self, stream_id: str) -> int:
        return len(self._work.streams.get(stream_id, []))

    async def next_queued_input(self, session_id: UUID) -> Row | None:
        queued = [
            i
            for i in self._tables.inputs.values()
            if i["session_id"] == session_id and i["state"] == "QUEUED"
        ]
        if not queued:
            return None
        oldest = min(queued, key=lambda i: i["position"])
        return {"message_id": oldest["message_id"], "content": oldest["content"]}  # PostgreSQL's columns

    async def tool_result(self, session_id: UUID, tool_call_id: str) -> str | None:
        results = [
            m
            for m in self._tables.messages.values()
            if m["session_id"] == session_id and m["tool_call_id"] == tool_call_id and m["role"] == "TOOL"
        ]
        return max(results, key=lambda m: m["seq"])["content"] if results else None

    async def execution(self, execution_id: UUID, *, lock: bool = False) -> Row | None:
        row = self._tables.executions.get(execution_id)
        return dict(row) if row is not None else None

    async def open_execution_of(self, child_session_id: UUID) -> Row | None:
        runs = [
            e
            for e in self._tables.executions.values()
            if e["child_session_id"] == child_session_id and e["status"] in OPEN_STATUSES
        ]
        return dict(max(runs, key=lambda e: e["round"])) if runs else None

    async def executions_of(self, parent_session_id: UUID, *, open_only: bool = False) -> list[Row]:
        return self._of_parent(parent_session_id, lambda e: not open_only or e["status"] in OPEN_STATUSES)

    async def undelivered_executions(self, parent_session_id: UUID, *, lock: bool = True) -> list[Row]:
        return self._of_parent(parent_session_id, lambda e: e["delivery_status"] == "PENDING")

    def _of_parent(self, parent_session_id: UUID, keep: Any) -> list[Row]:
        runs = [
            dict(e)
            for e in self._tables.executions.values()
            if e["parent_session_id"] == parent_session_id and keep(e)
        ]
        return sorted(runs, key=lambda e: (e["started_at"], e["execution_id"]))

    async def runs_of(self, child_session_id: UUID) -> list[Row]:
        runs = [
            dict(e) for e in self._tables.executions.values() if e["child_session_id"] == child_session_id
        ]
        return sorted(runs, key=lambda e: e["round"])

    async def wait(self, wait_id: UUID, *, lock: bool = False) -> Row | None:
        row = self._tables.waits.get(wait_id)
        return dict(row) if row is not None else None

    async def call_wait(self, session_id: UUID, tool_call_id: str) -> Row | None:
        waits = [
            w
            for w in self._tables.waits.values()
            if w["session_id"] == session_id and w["tool_call_id"] == tool_call_id
        ]
        return dict(max(waits, key=lambda w: w["position"])) if waits else None

    async def pending_waits(self, session_id: UUID) -> list[Row]:
        waits = self._tables.waits.values()
        pending = [dict(w) for w in waits if w["session_id"] == session_id and w["status"] == "pending"]
        return sorted(pending, key=lambda w: w["position"])

    async def lease_live(self, resource_id: str, now: datetime) -> bool | None:
        held = self._work.leases.get(resource_id)
        return None if held is None else held[1] > now

    # -- recovery's reads -----------------------------------------------------------------

    async def tree_status(self, root_session_id: UUID) -> TreeStatus | None:
        found = memory_trees.nodes(self._work.streams)
        return memory_trees.status(found, self._tables.waits.values(), root_session_id)

    # -- typed reads of the gateway's decisions (aggregates/) -----------------------------

    async def lock_owned_session(self, user_id: str, session_id: UUID) -> Session | None:
        row = self._tables.sessions.get(session_id)
        if row is None or row["user_id"] != user_id or row.get("deleted", False):
            return None
        return Session.of(row)

    async def session(self, session_id: UUID) -> Session | None:
        row = self._tables.sessions.get(session_id)
        return Session.of(row) if row is not None else None

    async def queued_inputs(self, session_id: UUID) -> list[Input]:
        inputs = self._tables.inputs.values()
        queued = [i for i in inputs if i["session_id"] == session_id and i["state"] == "QUEUED"]
        return [Input.of(i) for i in sorted(queued, key=lambda i: i["position"])]

    async def client_input(self, session_id: UUID, client_message_id: str) -> Input | None:
        for row in self._tables.inputs.values():
            if row["session_id"] == session_id and row["client_message_id"] == client_message_id:
                return Input.of(row)
        return None

    async def has_subagents(self, session_id: UUID) -> bool:
        sessions = self._tables.sessions.values()
        return any(s["parent_session_id"] == session_id and s["session_type"] == "SUBAGENT" for s in sessions)

    async def lock_wait(self, wait_id: UUID) -> Wait | None:
        row = self._tables.waits.get(wait_id)
        return Wait.of(row) if row is not None else None

    def _messages(self, session_id: UUID, keep: Any) -> list[Message]:
        rows = [m for m in self._tables.messages.values() if m["session_id"] == session_id and keep(m)]
        return [Message.of(m) for m in sorted(rows, key=lambda m: m["seq"])]

    async def latest_messages(self, session_id: UUID, limit: int) -> list[Message]:
        visible = self._messages(session_id, lambda m: not m["discarded"])
        return visible[-limit:] if limit > 0 else []

    async def message_seq(self, session_id: UUID, message_id: UUID) -> int | None:
        row = self._tables.messages.get(message_id)
        if row is None or row["session_id"] != session_id or row["discarded"]:
            return None
        seq: int = row["seq"]
        return seq

    async def turn_up_to(self, session_id: UUID, seq: int) -> list[Message]:
        visible = self._messages(session_id, lambda m: not m["discarded"] and m["seq"] <= seq)
        start = max((m.seq for m in visible if m.role == "USER"), default=0)
        return [m for m in visible if m.seq >= start]

    async def discarded_up_to(self, session_id: UUID, seq: int) -> list[UUID]:
        return [
            m.message_id for m in self._messages(session_id, lambda m: m["discarded"] and m["seq"] <= seq)
        ]

    async def compaction(self, session_id: UUID) -> Compaction | None:
        row = self._tables.compactions.get(session_id)
        return Compaction.of(row) if row is not None else None

    async def running_trees(self, user_id: str) -> int:
        queued = {i["session_id"] for i in self._tables.inputs.values() if i["state"] == "QUEUED"}
        return len(
            {
                s["root_session_id"]
                for s in self._tables.sessions.values()
                if s["user_id"] == user_id
                and not s.get("deleted", False)
                and (s["phase"] in ACTIVE_PHASES or s["session_id"] in queued)
            }
        )
