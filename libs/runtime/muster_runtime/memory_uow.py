"""The unit of work in memory: the same contract as `PostgresUnitOfWork` (the contract tests
run against both), for unit tests of decisions that need no database.

A transaction works on a private copy of the store and swaps it in on commit. Transactions
are serialised by one lock taken at begin: stricter than PostgreSQL's row locks, with the
same outcomes for a decision (it sees what committed before it, and a stale expected
version still loses).
"""

from __future__ import annotations

import asyncio
import copy
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any
from uuid import UUID, uuid4

from muster_contracts import events as ev
from muster_contracts.envelope import Envelope

from muster_runtime.eventstore import ConcurrencyError, Recorded, StoredEvent
from muster_runtime.unit_of_work import AbstractUnitOfWork


@dataclass
class MemoryState:
    streams: dict[str, list[StoredEvent]] = field(default_factory=dict)
    sessions: dict[UUID, dict[str, Any]] = field(default_factory=dict)
    processed: set[tuple[str, str]] = field(default_factory=set)
    blobs: dict[str, str] = field(default_factory=dict)
    position: int = 0


@dataclass
class MemoryStore:
    """What the in-memory units of work share: the committed state and what was sent."""

    state: MemoryState = field(default_factory=MemoryState)
    sent: list[tuple[str, str, Envelope]] = field(default_factory=list)
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)

    def uow(self) -> InMemoryUnitOfWork:
        return InMemoryUnitOfWork(self)


def _project(sessions: dict[UUID, dict[str, Any]], stored: StoredEvent) -> None:
    """The slice of the `sessions` projection that decisions read under their lock."""
    event = stored.event
    if isinstance(event, ev.SessionCreated):
        sessions[event.session_id] = {
            **event.model_dump(exclude={"type", "schema_version"}),
            "phase": None,
            "message_count": 0,
            "version": stored.stream_version,
        }
        return
    row = sessions.get(UUID(stored.stream_id)) if _is_uuid(stored.stream_id) else None
    if row is None:
        return
    if isinstance(event, ev.MessageRecorded):
        row["message_count"] = max(row["message_count"], event.seq)
    elif isinstance(event, ev.SessionPhaseChanged):
        row["phase"] = event.phase
    row["version"] = stored.stream_version


def _is_uuid(value: str) -> bool:
    try:
        UUID(value)
    except ValueError:
        return False
    return True


class InMemoryUnitOfWork(AbstractUnitOfWork):
    def __init__(self, store: MemoryStore) -> None:
        self._store = store
        self._work = MemoryState()
        self._sending: list[tuple[str, str, Envelope]] = []

    async def _begin(self) -> None:
        await self._store.lock.acquire()
        self._work = copy.deepcopy(self._store.state)
        self._sending = []

    async def _commit(self) -> None:
        self._store.state = self._work
        self._store.sent += self._sending
        self._store.lock.release()

    async def _rollback(self) -> None:
        self._store.lock.release()

    async def lock_session(self, session_id: UUID) -> dict[str, Any] | None:
        row = self._work.sessions.get(session_id)
        return dict(row) if row is not None else None

    async def append(
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
        for offset, event in enumerate(events, start=1):
            self._work.position += 1
            version = expected_version + offset
            record = StoredEvent(self._work.position, stream_id, version, uuid4(), now, metadata or {}, event)
            stream.append(record)
            _project(self._work.sessions, record)
            stored.append(record)
        return stored

    async def append_if_current(
        self,
        session_id: UUID,
        expected_count: int,
        events: Sequence[ev.DomainEvent],
        *,
        blobs: dict[str, str] | None = None,
    ) -> Recorded:
        row = self._work.sessions.get(session_id)
        if row is None or row["phase"] not in ("RUNNING", "RESUMING"):
            return Recorded("gone", row["version"] if row else None, row["phase"] if row else None, [])
        if row["message_count"] != expected_count:
            return Recorded("moved", row["version"], row["phase"], [])
        self._work.blobs.update(blobs or {})
        base, phase = row["version"], row["phase"]
        stored = await self.append(str(session_id), events, expected_version=base)
        return Recorded("current", base, phase, stored)

    async def send(self, topic: str, key: str, message: Envelope) -> None:
        self._sending.append((topic, key, message))

    async def first_delivery(self, consumer: str, message_id: str) -> bool:
        if (consumer, message_id) in self._work.processed:
            return False
        self._work.processed.add((consumer, message_id))
        return True

    async def read_stream(self, stream_id: str) -> list[StoredEvent]:
        return list(self._work.streams.get(stream_id, []))
