"""The unit of work: one decision, one transaction (cosmicpython's `unit_of_work.py`).

`async with uow as work:` opens the transaction; inside, the decision locks what it decides
on (`lock_session`), appends events naming the version it read (`append`: projections and
the outbox row go with it) and sends the commands it causes (`send`). Leaving the block
commits; an exception rolls everything back. After the commit, the outbox rows written are
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
    async def send(self, topic: str, key: str, message: Envelope) -> None:
        """A command that leaves with the commit, or not at all."""

    @abc.abstractmethod
    async def first_delivery(self, consumer: str, message_id: str) -> bool:
        """True the first time this consumer applies this message (kept on commit only)."""

    @abc.abstractmethod
    async def read_stream(self, stream_id: str) -> list[StoredEvent]:
        """Every event of the stream, in order, as this transaction sees it."""


class PostgresUnitOfWork(AbstractUnitOfWork):
    def __init__(self, pool: Pool) -> None:
        self._pool = pool
        self._held: Any = None
        self._transaction: Any = None
        self._collecting: Any = None
        self._outgoing: list[dispatch.Outgoing] = []

    @property
    def conn(self) -> Connection:
        """The transaction's connection, for the reads a decision makes under its locks."""
        assert self._held is not None, "use the unit of work inside `async with`"
        conn: Connection = self._held
        return conn

    async def _begin(self) -> None:
        self._held = await self._pool.acquire()
        try:
            self._transaction = self._held.transaction()
            await self._transaction.start()
        except BaseException:
            await self._pool.release(self._held)
            raise
        self._collecting = dispatch.collecting()
        self._outgoing = self._collecting.__enter__()

    async def _commit(self) -> None:
        try:
            await self._transaction.commit()
        finally:
            await self._close()
        dispatcher = dispatch.installed()
        if dispatcher is not None and self._outgoing:
            await dispatcher.dispatch(self._outgoing)

    async def _rollback(self) -> None:
        try:
            await self._transaction.rollback()
        finally:
            await self._close()

    async def _close(self) -> None:
        self._collecting.__exit__(None, None, None)
        held, self._held = self._held, None
        await self._pool.release(held)

    async def lock_session(self, session_id: UUID) -> dict[str, Any] | None:
        row = await self.conn.fetchrow("SELECT * FROM sessions WHERE session_id = $1 FOR UPDATE", session_id)
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
            self.conn, stream_id, events, expected_version=expected_version, metadata=metadata
        )

    async def send(self, topic: str, key: str, message: Envelope) -> None:
        await outbox.enqueue(self.conn, topic, key, message)

    async def first_delivery(self, consumer: str, message_id: str) -> bool:
        return await tracking.first_delivery(self.conn, consumer, message_id)

    async def read_stream(self, stream_id: str) -> list[StoredEvent]:
        return await eventstore.read_stream(self.conn, stream_id)
