"""The unit of work: one decision, one transaction (cosmicpython's `unit_of_work.py`).

`async with uow as work:` holds a decision; inside, it locks what it decides on
(`lock_session`), appends events naming the version it read (`append`: projections and the
outbox row go with it) and sends the commands it causes (`send`), or makes the whole
decision in one statement (`append_if_current`). Leaving the block commits; an exception
rolls everything back. After the commit, the outbox rows written are
published by this process at once (`dispatch`), the relay being the fallback.

`PostgresUnitOfWork` is the real one; `InMemoryUnitOfWork` (`memory_uow.py`) keeps the same
contract in a dict for fast unit tests. Both pass `tests/unit/runtime/test_unit_of_work_contract.py`.
"""

from __future__ import annotations

import abc
from collections.abc import Sequence
from types import TracebackType
from typing import Any, Self
from uuid import UUID

from muster_contracts.envelope import Envelope
from muster_contracts.events import DomainEvent

from muster_runtime import dispatch, eventstore, outbox, tracking
from muster_runtime.db import Connection, Pool
from muster_runtime.eventstore import StoredEvent


class AbstractUnitOfWork(abc.ABC):
    """What a decision may do between lock and commit."""

    async def __aenter__(self) -> Self:
        await self._begin()
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if exc_type is None:
            await self._commit()
        else:
            await self._rollback()

    @abc.abstractmethod
    async def _begin(self) -> None: ...

    @abc.abstractmethod
    async def _commit(self) -> None: ...

    @abc.abstractmethod
    async def _rollback(self) -> None: ...

    @abc.abstractmethod
    async def lock_session(self, session_id: UUID) -> dict[str, Any] | None:
        """The session's row, locked until commit (None: no such session). Lock order:
        a child session before its parent, sessions before executions."""

    @abc.abstractmethod
    async def append(
        self,
        stream_id: str,
        events: Sequence[DomainEvent],
        *,
        expected_version: int | None,
        metadata: dict[str, Any] | None = None,
    ) -> list[StoredEvent]:
        """Append after `expected_version` (None: after the current one, for writers that
        hold the stream's lock); a taken version raises `eventstore.ConcurrencyError`."""

    @abc.abstractmethod
    async def append_if_current(
        self,
        session_id: UUID,
        expected_count: int,
        events: Sequence[DomainEvent],
        *,
        blobs: dict[str, str] | None = None,
    ) -> eventstore.Recorded:
        """Append to a session only if it still runs (RUNNING or RESUMING) and still has
        `expected_count` messages, storing `blobs` with it; the outcome says which."""

    @abc.abstractmethod
    async def send(self, topic: str, key: str, message: Envelope) -> None:
        """A command that leaves with the commit, or not at all."""

    @abc.abstractmethod
    async def first_delivery(self, consumer: str, message_id: str) -> bool:
        """True the first time this consumer applies this message (kept on commit only)."""

    @abc.abstractmethod
    async def read_stream(self, stream_id: str) -> list[StoredEvent]:
        """Every event of the stream, in order, as this transaction sees it."""


class PostgresUnitOfWork(AbstractUnitOfWork):
    """The transaction starts with the first statement that needs it, so a decision made
    of one `append_if_current` is a single round trip in an implicit transaction."""

    def __init__(self, pool: Pool) -> None:
        self._pool = pool
        self._held: Any = None
        self._transaction: Any = None
        self._collecting: Any = None
        self._outgoing: list[dispatch.Outgoing] = []

    async def connection(self) -> Connection:
        """The transaction's connection, for the reads a decision makes under its locks."""
        assert self._held is not None, "use the unit of work inside `async with`"
        if self._transaction is None:
            self._transaction = self._held.transaction()
            await self._transaction.start()
        conn: Connection = self._held
        return conn

    async def _begin(self) -> None:
        self._held = await self._pool.acquire()
        self._collecting = dispatch.collecting()
        self._outgoing = self._collecting.__enter__()

    async def _commit(self) -> None:
        try:
            if self._transaction is not None:
                await self._transaction.commit()
        finally:
            await self._close()
        dispatcher = dispatch.installed()
        if dispatcher is not None and self._outgoing:
            await dispatcher.dispatch(self._outgoing)

    async def _rollback(self) -> None:
        try:
            if self._transaction is not None:
                await self._transaction.rollback()
        finally:
            await self._close()

    async def _close(self) -> None:
        self._collecting.__exit__(None, None, None)
        held, self._held, self._transaction = self._held, None, None
        await self._pool.release(held)

    async def lock_session(self, session_id: UUID) -> dict[str, Any] | None:
        conn = await self.connection()
        row = await conn.fetchrow("SELECT * FROM sessions WHERE session_id = $1 FOR UPDATE", session_id)
        return dict(row) if row is not None else None

    async def append(
        self,
        stream_id: str,
        events: Sequence[DomainEvent],
        *,
        expected_version: int | None,
        metadata: dict[str, Any] | None = None,
    ) -> list[StoredEvent]:
        return await eventstore.append(
            await self.connection(), stream_id, events, expected_version=expected_version, metadata=metadata
        )

    async def append_if_current(
        self,
        session_id: UUID,
        expected_count: int,
        events: Sequence[DomainEvent],
        *,
        blobs: dict[str, str] | None = None,
    ) -> eventstore.Recorded:
        # Outside a transaction this is the whole decision, committed by the one statement.
        conn: Connection = self._held if self._transaction is None else await self.connection()
        return await eventstore.record_if_current(conn, session_id, expected_count, events, blobs=blobs)

    async def send(self, topic: str, key: str, message: Envelope) -> None:
        await outbox.enqueue(await self.connection(), topic, key, message)

    async def first_delivery(self, consumer: str, message_id: str) -> bool:
        return await tracking.first_delivery(await self.connection(), consumer, message_id)

    async def read_stream(self, stream_id: str) -> list[StoredEvent]:
        return await eventstore.read_stream(await self.connection(), stream_id)
