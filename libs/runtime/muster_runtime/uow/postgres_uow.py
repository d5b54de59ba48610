"""The unit of work on PostgreSQL: one transaction on one pooled connection.

The transaction starts with the first statement that needs it, so a decision made of one
`append_if_current` is a single round trip in an implicit transaction, and a read made
before any lock (`session_state`) costs no BEGIN. Reads that decide under a lock run in the
transaction once it has started.

Locking a session reads, in the same round trip, what decisions under that lock read next
(its queued input, its open execution as a child, its open executions as a parent); those
reads are answered from it until the decision writes (`LockedReads`).

Appends whose version the caller names and commands are staged, then written together in
one round trip right before the decision's next statement or at commit (ADR 0021): every
read still sees the decision's own writes, and a delegation's dozen appends and commands
cost one statement instead of one each. A decision that only writes is that one statement,
in its own implicit transaction.
"""

from __future__ import annotations

import contextlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from types import TracebackType
from typing import Any
from uuid import UUID

import asyncpg
from muster_contracts.envelope import Envelope
from muster_contracts.events import DomainEvent

from muster_runtime.messaging import dispatch, outbox
from muster_runtime.process.db import Connection, Pool
from muster_runtime.store import eventstore
from muster_runtime.store.eventstore import StoredEvent
from muster_runtime.uow import batched, leases, postgres_trees, quiet_close, tracking
from muster_runtime.uow.aggregates import Compaction, Input, Message, Session, Wait
from muster_runtime.uow.phases import ACTIVE_PHASES, OPEN_STATUSES
from muster_runtime.uow.postgres_queries import (
    CLAIM_SESSION,
    LOAD_STATE,
    LOCK_SESSION,
    LOCK_SESSIONS,
    OPEN_EXECUTION_OF,
    STORE_BLOBS,
    UNDELIVERED,
    claimed_state,
    snapshot,
)
from muster_runtime.uow.recovery_views import TreeStatus
from muster_runtime.uow.unit_of_work import (
    AbstractUnitOfWork,
    DuplicateKey,
    ExecutionClaim,
    LockedClaim,
    Row,
    RunClose,
    SessionBusy,
    SessionSnapshot,
)

# The user's trees with a turn under way (`running_trees`): their sessions by the
# `sessions_user_type` index, queued input by `session_inputs_queued`.
RUNNING_TREES = """
SELECT count(DISTINCT s.root_session_id) FROM sessions s
WHERE s.user_id = $1 AND NOT s.deleted
  AND (s.phase = ANY($2::text[])
       OR EXISTS (SELECT 1 FROM session_inputs i WHERE i.session_id = s.session_id AND i.state = 'QUEUED'))
"""


@dataclass(frozen=True)
class LockedReads:
    """What `muster_lock_session` read right after a session's lock was granted. Nothing
    else can change it while the lock is held: the row is written only by appends to the
    session, which wait for its lock, and an input is queued, an execution started or
    finished, only by a decision that holds the session's lock (the child's for its runs,
    the parent's for its children). The decision's own appends can, so they drop it."""

    row: Row
    queued: Row | None
    open_run: Row | None
    open_children: list[Row]
    state: SessionSnapshot | None = None  # read after the lock by a claim (`claim_session`)


class PostgresUnitOfWork(AbstractUnitOfWork):
    def __init__(self, pool: Pool, claims: batched.ClaimCoalescer | None = None) -> None:
        self._pool = pool
        self._claims = claims  # claims sent with others made at the same moment (ADR 0027)
        self._held: Any = None
        self._transaction: Any = None
        self._collecting: Any = None
        self._outgoing: list[dispatch.Outgoing] = []
        self._appends: list[eventstore.StagedAppend] = []
        self._commands: list[eventstore.StagedCommand] = []
        self._locked: dict[UUID, LockedReads] = {}
        self._written: dict[str, int] = {}  # the last version this decision wrote per stream

    async def connection(self) -> Connection:
        """The transaction's connection (started on first use), for queries that are
        PostgreSQL's own (recovery's scans, the gateway's reads); staged writes go first."""
        assert self._held is not None, "use the unit of work inside `async with`"
        if self._transaction is None:
            self._transaction = self._held.transaction()
            await self._transaction.start()
        conn: Connection = self._held
        await self._write_staged(conn)
        return conn

    async def _reader(self) -> Connection:
        """The transaction if one runs, else the connection on its own: one statement."""
        assert self._held is not None, "use the unit of work inside `async with`"
        if self._appends or self._commands:
            return await self.connection()
        conn: Connection = self._held
        return conn

    async def _write_staged(self, conn: Connection) -> None:
        if self._appends or self._commands:
            appends, commands = self._appends, self._commands
            self._appends, self._commands = [], []
            await eventstore.write_staged(conn, appends, commands)
            for written in appends:
                self._wrote(written.stream_id, written.first_version + len(written.batch.events) - 1)

    def _wrote(self, stream_id: str, version: int) -> None:
        self._written[stream_id] = max(version, self._written.get(stream_id, 0))

    async def _begin(self) -> None:
        self._held = await self._pool.acquire()
        self._collecting = dispatch.collecting()
        self._outgoing = self._collecting.__enter__()

    async def _commit(self) -> None:
        try:
            # Without a transaction (nothing was locked), the staged writes are the whole
            # decision: one statement in its own implicit transaction, no BEGIN or COMMIT.
            await self._write_staged(self._held)
            if self._transaction is not None:
                await self._transaction.commit()
        except BaseException:
            # The staged writes failed (a taken version): nothing of the decision remains.
            if self._transaction is not None:
                with contextlib.suppress(asyncpg.InterfaceError):  # already ended
                    await self._transaction.rollback()
            raise
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
        self._appends, self._commands = [], []
        self._locked.clear()
        self._written.clear()
        self._collecting.__exit__(None, None, None)
        held, self._held, self._transaction = self._held, None, None
        await self._pool.release(held)

    async def append(
        self,
        stream_id: str,
        events: Sequence[DomainEvent],
        *,
        expected_version: int | None,
        metadata: dict[str, Any] | None = None,
    ) -> None:
        self._locked.clear()
        if expected_version is None:
            stored = await eventstore.append(await self.connection(), stream_id, events, metadata=metadata)
            if stored:
                self._wrote(stream_id, stored[-1].stream_version)
        elif events:
            self._appends.append(eventstore.stage(stream_id, events, expected_version, metadata))

    async def append_if_current(
        self,
        session_id: UUID,
        expected_count: int,
        events: Sequence[DomainEvent],
        *,
        blobs: Mapping[str, str] | None = None,
        ungated: bool = False,
    ) -> eventstore.Recorded:
        # Outside a transaction this is the whole decision, committed by the one statement.
        self._locked.clear()
        return await eventstore.record_if_current(
            await self._reader(), session_id, expected_count, events, blobs=dict(blobs or {}), ungated=ungated
        )

    async def close_quietly(
        self, session_id: UUID, expected_count: int, events: Sequence[DomainEvent], *, run: RunClose | None
    ) -> str:
        # Outside a transaction this is the whole close: one statement, its locks released
        # at its end whatever it answers, so the long way after a refusal starts afresh.
        self._locked.clear()
        return await quiet_close.close_quietly(await self._reader(), session_id, expected_count, events, run)

    async def store_blobs(self, blobs: Mapping[str, str]) -> None:
        if not blobs:
            return
        digests = sorted(blobs)  # a fixed order: concurrent writers of shared blobs cannot deadlock
        contents = [blobs[d] for d in digests]
        sizes = [len(c.encode("utf-8")) for c in contents]
        await (await self.connection()).execute(STORE_BLOBS, digests, contents, sizes)

    async def send(self, topic: str, key: str, message: Envelope) -> None:
        self._commands.append(outbox.command(topic, key, message))

    async def first_delivery(self, consumer: str, message_id: str) -> bool:
        return await tracking.first_delivery(await self.connection(), consumer, message_id)

    async def try_lease(self, resource_id: str, owner: str, ttl_s: float) -> bool:
        return await leases.try_acquire(await self.connection(), resource_id, owner, ttl_s)

    async def claim_execution(
        self, consumer: str, message_id: str, execution_id: UUID, owner: str, ttl_s: float
    ) -> ExecutionClaim:
        self._locked.clear()
        conn = await self._reader()
        claim = batched.Claim(consumer, message_id, execution_id, owner, ttl_s)
        # Alone, the claim is a whole decision: it may share its statement with others'.
        if self._claims is None or self._transaction is not None:
            row = await batched.claim_alone(conn, claim)
        else:
            row = await self._claims.call(conn, claim)
        first, leased, phase = row.pop("claim_first"), row.pop("claim_leased"), row.pop("claim_child_phase")
        state = claimed_state(row)
        return ExecutionClaim(first, row if row["execution_id"] is not None else None, leased, phase, state)

    async def claim_session(
        self, consumer: str, message_id: str, session_id: UUID, owner: str, ttl_s: float
    ) -> LockedClaim:
        self._locked.pop(session_id, None)
        conn = await self.connection()
        row = await conn.fetchrow(
            CLAIM_SESSION, consumer, message_id, session_id, owner, ttl_s, list(OPEN_STATUSES)
        )
        if not row["claim_first"]:
            return LockedClaim(False, None, False)
        self._remember(row)
        reads = self._locked.get(session_id)
        if reads is None:
            return LockedClaim(True, None, False)
        if row["claim_leased"]:
            state = {**reads.row, **{k: row[k] for k in ("history", "started", "compaction")}}
            self._locked[session_id] = replace(reads, state=snapshot(state))
        return LockedClaim(True, dict(reads.row), row["claim_leased"])

    async def lock_session(
        self, session_id: UUID, *, nowait: bool = False, then: UUID | None = None
    ) -> Row | None:
        if session_id in self._locked:  # locked by this decision, nothing written since
            return dict(self._locked[session_id].row)
        conn = await self.connection()
        if not nowait:
            if then is None:
                rows = [await conn.fetchrow(LOCK_SESSION, session_id, list(OPEN_STATUSES))]
            else:
                rows = await conn.fetch(LOCK_SESSIONS, [session_id, then], list(OPEN_STATUSES))
            for row in rows:
                self._remember(row)
            return dict(self._locked[session_id].row) if session_id in self._locked else None
        try:
            async with conn.transaction():  # a savepoint: a refused lock must not abort ours
                row = await conn.fetchrow(
                    "SELECT * FROM sessions WHERE session_id = $1 FOR UPDATE NOWAIT", session_id
                )
        except asyncpg.LockNotAvailableError:
            raise SessionBusy(str(session_id)) from None
        return dict(row) if row is not None else None

    def _remember(self, row: Any) -> None:
        locked, run = row["locked"], row["open_run"]
        if locked is None or locked["session_id"] is None:
            return
        self._locked[locked["session_id"]] = LockedReads(
            dict(locked),
            {"message_id": row["queued_id"], "content": row["queued_content"]}
            if row["queued_id"] is not None
            else None,
            dict(run) if run is not None and run["execution_id"] is not None else None,
            [dict(child) for child in row["open_children"]],
        )

    async def session_state(self, session_id: UUID) -> SessionSnapshot | None:
        locked = self._locked.get(session_id)
        if locked is not None and locked.state is not None:  # read by the claim, nothing written since
            return locked.state
        return snapshot(await (await self._reader()).fetchrow(LOAD_STATE, session_id))

    async def read_stream(self, stream_id: str) -> list[StoredEvent]:
        return await eventstore.read_stream(await self._reader(), stream_id)

    async def current_version(self, stream_id: str) -> int:
        # A stream this decision wrote, under its lock: nobody else extends it, so its own
        # last version is the answer, without a read (and without writing what is staged).
        staged = [
            append.first_version + len(append.batch.events) - 1
            for append in self._appends
            if append.stream_id == stream_id
        ]
        if staged or stream_id in self._written:
            return max([*staged, self._written.get(stream_id, 0)])
        return await eventstore.current_version(await self._reader(), stream_id)

    async def next_queued_input(self, session_id: UUID) -> Row | None:
        if session_id in self._locked:
            return self._locked[session_id].queued
        row = await (await self._reader()).fetchrow(
            """SELECT message_id, content FROM session_inputs
               WHERE session_id = $1 AND state = 'QUEUED' ORDER BY position LIMIT 1""",
            session_id,
        )
        return dict(row) if row is not None else None

    async def tool_result(self, session_id: UUID, tool_call_id: str) -> str | None:
        content: str | None = await (await self._reader()).fetchval(
            """SELECT content FROM messages WHERE session_id = $1 AND tool_call_id = $2 AND role = 'TOOL'
               ORDER BY seq DESC LIMIT 1""",
            session_id,
            tool_call_id,
        )
        return content

    async def execution(self, execution_id: UUID, *, lock: bool = False) -> Row | None:
        query = "SELECT * FROM executions WHERE execution_id = $1" + (" FOR UPDATE" if lock else "")
        conn = await self.connection() if lock else await self._reader()
        row = await conn.fetchrow(query, execution_id)
        return dict(row) if row is not None else None

    async def open_execution_of(self, child_session_id: UUID) -> Row | None:
        if child_session_id in self._locked:
            return self._locked[child_session_id].open_run
        row = await (await self._reader()).fetchrow(OPEN_EXECUTION_OF, child_session_id, list(OPEN_STATUSES))
        return dict(row) if row is not None else None

    async def executions_of(self, parent_session_id: UUID, *, open_only: bool = False) -> list[Row]:
        if open_only and parent_session_id in self._locked:
            return list(self._locked[parent_session_id].open_children)
        statuses = list(OPEN_STATUSES) if open_only else None
        rows = await (await self._reader()).fetch(
            """SELECT * FROM executions WHERE parent_session_id = $1
               AND ($2::text[] IS NULL OR status = ANY($2::text[])) ORDER BY started_at""",
            parent_session_id,
            statuses,
        )
        return [dict(r) for r in rows]

    async def undelivered_executions(self, parent_session_id: UUID, *, lock: bool = True) -> list[Row]:
        conn = await self.connection() if lock else await self._reader()
        rows = await conn.fetch(UNDELIVERED + (" FOR UPDATE" if lock else ""), parent_session_id)
        return [dict(r) for r in rows]

    async def runs_of(self, child_session_id: UUID) -> list[Row]:
        rows = await (await self._reader()).fetch(
            "SELECT * FROM executions WHERE child_session_id = $1 ORDER BY round", child_session_id
        )
        return [dict(r) for r in rows]

    async def wait(self, wait_id: UUID, *, lock: bool = False) -> Row | None:
        query = "SELECT * FROM session_waits WHERE wait_id = $1" + (" FOR UPDATE" if lock else "")
        conn = await self.connection() if lock else await self._reader()
        row = await conn.fetchrow(query, wait_id)
        return dict(row) if row is not None else None

    async def call_wait(self, session_id: UUID, tool_call_id: str) -> Row | None:
        row = await (await self._reader()).fetchrow(
            """SELECT * FROM session_waits WHERE session_id = $1 AND tool_call_id = $2
               ORDER BY position DESC LIMIT 1""",
            session_id,
            tool_call_id,
        )
        return dict(row) if row is not None else None

    async def pending_waits(self, session_id: UUID) -> list[Row]:
        rows = await (await self._reader()).fetch(
            "SELECT * FROM session_waits WHERE session_id = $1 AND status = 'pending' ORDER BY position",
            session_id,
        )
        return [dict(r) for r in rows]

    async def lease_live(self, resource_id: str, now: datetime) -> bool | None:
        live: bool | None = await (await self._reader()).fetchval(
            "SELECT expires_at > $2::timestamptz FROM leases WHERE resource_id = $1", resource_id, now
        )
        return live

    # -- recovery's reads -----------------------------------------------------------------

    async def tree_status(self, root_session_id: UUID) -> TreeStatus | None:
        return await postgres_trees.tree_status(await self._reader(), root_session_id)

    # -- typed reads of the gateway's decisions (aggregates/) -----------------------------

    async def lock_owned_session(self, user_id: str, session_id: UUID) -> Session | None:
        # The owner is in the WHERE clause: another user's row is neither read nor locked.
        row = await (await self.connection()).fetchrow(
            "SELECT * FROM sessions WHERE session_id = $1 AND user_id = $2 AND NOT deleted FOR UPDATE",
            session_id,
            user_id,
        )
        return Session.of(row) if row is not None else None

    async def session(self, session_id: UUID) -> Session | None:
        row = await (await self._reader()).fetchrow(
            "SELECT * FROM sessions WHERE session_id = $1", session_id
        )
        return Session.of(row) if row is not None else None

    async def queued_inputs(self, session_id: UUID) -> list[Input]:
        rows = await (await self._reader()).fetch(
            "SELECT * FROM session_inputs WHERE session_id = $1 AND state = 'QUEUED' ORDER BY position",
            session_id,
        )
        return [Input.of(r) for r in rows]

    async def client_input(self, session_id: UUID, client_message_id: str) -> Input | None:
        row = await (await self._reader()).fetchrow(
            "SELECT * FROM session_inputs WHERE session_id = $1 AND client_message_id = $2",
            session_id,
            client_message_id,
        )
        return Input.of(row) if row is not None else None

    async def has_subagents(self, session_id: UUID) -> bool:
        found: bool = await (await self._reader()).fetchval(
            """SELECT EXISTS (SELECT 1 FROM sessions
                              WHERE parent_session_id = $1 AND session_type = 'SUBAGENT')""",
            session_id,
        )
        return found

    async def lock_wait(self, wait_id: UUID) -> Wait | None:
        row = await (await self.connection()).fetchrow(
            "SELECT * FROM session_waits WHERE wait_id = $1 FOR UPDATE", wait_id
        )
        return Wait.of(row) if row is not None else None

    async def latest_messages(self, session_id: UUID, limit: int) -> list[Message]:
        rows = await (await self._reader()).fetch(
            f"""SELECT * FROM (SELECT {_MESSAGE} FROM messages WHERE session_id = $1 AND NOT discarded
                               ORDER BY seq DESC LIMIT $2) newest ORDER BY seq""",
            session_id,
            limit,
        )
        return [Message.of(r) for r in rows]

    async def message_seq(self, session_id: UUID, message_id: UUID) -> int | None:
        seq: int | None = await (await self._reader()).fetchval(
            "SELECT seq FROM messages WHERE session_id = $1 AND message_id = $2 AND NOT discarded",
            session_id,
            message_id,
        )
        return seq

    async def turn_up_to(self, session_id: UUID, seq: int) -> list[Message]:
        rows = await (await self._reader()).fetch(
            f"""SELECT {_MESSAGE} FROM messages
                WHERE session_id = $1 AND NOT discarded AND seq <= $2
                  AND seq >= (SELECT coalesce(max(seq), 0) FROM messages
                              WHERE session_id = $1 AND NOT discarded AND role = 'USER' AND seq <= $2)
                ORDER BY seq""",
            session_id,
            seq,
        )
        return [Message.of(r) for r in rows]

    async def discarded_up_to(self, session_id: UUID, seq: int) -> list[UUID]:
        rows = await (await self._reader()).fetch(
            "SELECT message_id FROM messages WHERE session_id = $1 AND discarded AND seq <= $2 ORDER BY seq",
            session_id,
            seq,
        )
        return [r["message_id"] for r in rows]

    async def compaction(self, session_id: UUID) -> Compaction | None:
        row = await (await self._reader()).fetchrow(
            "SELECT * FROM compactions WHERE session_id = $1", session_id
        )
        return Compaction.of(row) if row is not None else None

    async def running_trees(self, user_id: str) -> int:
        count: int = await (await self._reader()).fetchval(RUNNING_TREES, user_id, list(ACTIVE_PHASES))
        return count

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        # A unique key a decision relies on comes out as the implementation-neutral
        # `DuplicateKey`, whether the staged write met it mid-decision or at commit.
        try:
            await super().__aexit__(exc_type, exc, tb)
        except asyncpg.UniqueViolationError as failed:
            if _decided_key(failed):
                raise DuplicateKey(failed.constraint_name) from failed
            raise
        if isinstance(exc, asyncpg.UniqueViolationError) and _decided_key(exc):
            raise DuplicateKey(exc.constraint_name) from exc


_MESSAGE = "message_id, seq, role, content, tool_calls, tool_call_id, discarded"


def _decided_key(exc: asyncpg.UniqueViolationError) -> bool:
    return exc.constraint_name in DuplicateKey.KEYS
