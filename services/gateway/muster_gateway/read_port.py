"""The client's reads: what the gateway's handlers may ask of the read models, and nothing
they may decide with. REST lists and details, search, message pages, executions, waits,
file-change merges, where a live subscription starts and the live hub's event fetch, the
LOCAL clients' outstanding requests, the recovery figures of `/metrics`, the health probe.

Handlers depend on this interface; `postgres_reads.PostgresReads` answers it with SQL.
Every read that takes a session id from a client checks that the user owns the session:
an unknown, malformed, deleted or foreign id is the same `not_found`.
"""

from __future__ import annotations

import abc
from collections.abc import Mapping, Sequence
from typing import Any
from uuid import UUID

from muster_gateway.fanout import Cursor, EventRow
from muster_gateway.overload_rule import Backlog
from muster_gateway.recovery_metrics import RecoverySnapshot

Item = dict[str, Any]  # an item of a REST answer, in its public (camelCase) shape


class ClientReads(abc.ABC):
    # -- REST ---------------------------------------------------------------------------

    @abc.abstractmethod
    async def session(self, user_id: str, raw_id: str) -> Item:
        """`GET /v1/sessions/{id}`."""

    @abc.abstractmethod
    async def sessions(self, user_id: str, session_type: str, limit: int) -> list[Item]:
        """`GET /v1/sessions`, newest first, each with its tree's signals."""

    @abc.abstractmethod
    async def messages(
        self, user_id: str, raw_id: str, *, rounds: int, before_seq: int | None, include_discarded: bool
    ) -> Item:
        """A page of the newest `rounds` rounds before `before_seq` (`items`, `nextBeforeSeq`)."""

    @abc.abstractmethod
    async def round_file_changes(self, user_id: str, raw_id: str, raw_message_id: str) -> Item:
        """The file changes of the turn holding the message, merged by path."""

    @abc.abstractmethod
    async def executions(self, user_id: str, raw_id: str, role: str) -> list[Item]:
        """The executions the session delegated (`parent`) or ran as the child of (`child`)."""

    @abc.abstractmethod
    async def side_tasks(self, user_id: str, raw_id: str, recursive: bool) -> list[Item]: ...

    @abc.abstractmethod
    async def search(self, user_id: str, query: str, limit: int) -> list[Item]: ...

    @abc.abstractmethod
    async def waits(self, user_id: str, raw_id: str, kind: str, status: str | None) -> list[Any]:
        """The session's waits of `kind` (`session_waits` rows), oldest first."""

    @abc.abstractmethod
    async def owned_session_id(self, user_id: str, raw_id: str) -> UUID:
        """The id of a session the user owns (else `not_found`)."""

    # -- live delivery --------------------------------------------------------------------

    @abc.abstractmethod
    async def subscription_cursor(
        self, user_id: str, raw_id: str, after_position: int | None
    ) -> tuple[str, Cursor]:
        """Where a new subscription starts: after `after_position`, else after the head."""

    @abc.abstractmethod
    async def events_after(self, session_id: str, after_version: int, limit: int) -> Sequence[EventRow]:
        """The hub's fetch (`fanout.Fetch`): a stream's stored events after a version."""

    @abc.abstractmethod
    async def stream_versions(self, stream_ids: list[str]) -> Mapping[str, int]:
        """The hub's poller (`fanout.Versions`): each stream's latest version, if any."""

    @abc.abstractmethod
    async def outstanding_tool_requests(self, user_id: str) -> list[Any]:
        """The user's pending LOCAL tool requests (`session_waits` rows), oldest first."""

    @abc.abstractmethod
    async def session_owner(self, session_id: UUID) -> str | None: ...

    # -- operations -----------------------------------------------------------------------

    @abc.abstractmethod
    async def recovery_figures(self) -> RecoverySnapshot | None:
        """The recovery figures as of now, None when the store cannot answer."""

    @abc.abstractmethod
    async def turn_backlog(self) -> Backlog:
        """The overload signal, cluster-wide: turns and delegations accepted and not yet
        started, and turns under way."""

    @abc.abstractmethod
    async def healthy(self) -> bool: ...
