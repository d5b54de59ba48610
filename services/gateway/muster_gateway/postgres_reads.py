"""The client's reads (`read_port.ClientReads`) on PostgreSQL. The statements live in the
modules this adapter composes, one per read model: `queries` (sessions, message pages,
executions), `file_changes`, `tree_queries` (side tasks, search), `wait_queries`,
`streams` (subscriptions, the hub's fetch, health), `recovery_queries` and
`overload_queries`."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any
from uuid import UUID

from muster_runtime.process.db import Pool

from muster_gateway import overload_queries, queries, recovery_queries, streams, tree_queries, wait_queries
from muster_gateway.fanout import Cursor, EventRow
from muster_gateway.overload_rule import Backlog
from muster_gateway.read_port import ClientReads, Item
from muster_gateway.recovery_metrics import RecoverySnapshot


class PostgresReads(ClientReads):
    def __init__(self, pool: Pool) -> None:
        self._pool = pool
        self._fetch = streams.event_fetcher(pool)
        self._versions = streams.version_reader(pool)

    @property
    def pool(self) -> Pool:
        """The pool it reads on (the composition root owns and closes it)."""
        return self._pool

    async def session(self, user_id: str, raw_id: str) -> Item:
        return await queries.get_session(self._pool, user_id, raw_id)

    async def sessions(self, user_id: str, session_type: str, limit: int) -> list[Item]:
        return await queries.list_sessions(self._pool, user_id, session_type, limit)

    async def messages(
        self, user_id: str, raw_id: str, *, rounds: int, before_seq: int | None, include_discarded: bool
    ) -> Item:
        return await queries.list_messages(
            self._pool,
            user_id,
            raw_id,
            rounds=rounds,
            before_seq=before_seq,
            include_discarded=include_discarded,
        )

    async def round_file_changes(self, user_id: str, raw_id: str, raw_message_id: str) -> Item:
        return await queries.round_file_changes(self._pool, user_id, raw_id, raw_message_id)

    async def executions(self, user_id: str, raw_id: str, role: str) -> list[Item]:
        return await queries.list_executions(self._pool, user_id, raw_id, role)

    async def side_tasks(self, user_id: str, raw_id: str, recursive: bool) -> list[Item]:
        return await tree_queries.list_side_tasks(self._pool, user_id, raw_id, recursive)

    async def search(self, user_id: str, query: str, limit: int) -> list[Item]:
        return await tree_queries.search(self._pool, user_id, query, limit)

    async def waits(self, user_id: str, raw_id: str, kind: str, status: str | None) -> list[Any]:
        return await wait_queries.waits(self._pool, user_id, raw_id, kind, status)

    async def owned_session_id(self, user_id: str, raw_id: str) -> UUID:
        session_id: UUID = (await queries.owned(self._pool, user_id, raw_id, "session_id"))["session_id"]
        return session_id

    async def subscription_cursor(
        self, user_id: str, raw_id: str, after_position: int | None
    ) -> tuple[str, Cursor]:
        return await streams.subscription_cursor(self._pool, user_id, raw_id, after_position)

    async def events_after(self, session_id: str, after_version: int, limit: int) -> Sequence[EventRow]:
        return await self._fetch(session_id, after_version, limit)

    async def stream_versions(self, stream_ids: list[str]) -> Mapping[str, int]:
        return await self._versions(stream_ids)

    async def outstanding_tool_requests(self, user_id: str) -> list[Any]:
        return list(await self._pool.fetch(wait_queries.OUTSTANDING, user_id))

    async def session_owner(self, session_id: UUID) -> str | None:
        owner: str | None = await self._pool.fetchval(wait_queries.OWNER, session_id)
        return owner

    async def recovery_figures(self) -> RecoverySnapshot | None:
        return await recovery_queries.read(self._pool)

    async def turn_backlog(self) -> Backlog:
        return await overload_queries.backlog(self._pool)

    async def healthy(self) -> bool:
        return await streams.healthy(self._pool)
