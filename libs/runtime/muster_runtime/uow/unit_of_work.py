"""The unit of work: one decision, one transaction (cosmicpython's `unit_of_work.py`).

`async with uow as work:` holds a decision; inside, it locks what it decides on
(`lock_session`), reads what the decision needs (the session's state, its executions, its
queued input), appends events naming the version it read (`append`: projections and the
outbox row go with it) and sends the commands it causes (`send`), or makes the whole
decision in one statement (`append_if_current`). Leaving the block commits; an exception
rolls everything back. After the commit the outbox rows written are published by this
process at once (`dispatch`), the relay being the fallback.

Decisions use only this interface, so they run unchanged on `PostgresUnitOfWork`
(`postgres_uow.py`) and on `InMemoryUnitOfWork` (`memory_uow.py`, for fast unit tests).
Both pass `tests/unit/runtime/test_unit_of_work_contract.py`.

Rows are plain mappings with the projection tables' column names (`sessions`, `messages`,
`executions`, `session_inputs`, `session_waits`); decisions read them as the typed
aggregates (`aggregates/`: `Session.of(row)`, `Execution.of(row)`…), which the typed reads
below return already.
"""

from __future__ import annotations

import abc
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from types import TracebackType
from typing import Any, Self
from uuid import UUID

from muster_contracts.envelope import Envelope
from muster_contracts.events import DomainEvent

from muster_runtime.store.eventstore import Recorded, StoredEvent
from muster_runtime.uow.aggregates import Compaction, Input, Message, Session, Wait
from muster_runtime.uow.recovery_views import TreeStatus

Row = dict[str, Any]


class SessionBusy(Exception):
    """`lock_session(nowait=True)` found the row locked by another decision."""


@dataclass(frozen=True)
class SessionSnapshot:
    """A session's row with its visible history (not discarded, by seq), the ids of the
    tool calls whose start was recorded, and its latest compaction (`compactions` row)."""

    row: Row
    messages: list[Row]
    started_tool_calls: frozenset[str]
    compaction: Row | None = None


@dataclass(frozen=True)
class ExecutionClaim:
    first: bool  # the command had not been applied before
    execution: Row | None  # None: no such execution
    leased: bool  # this owner holds the execution's lease now
    child_phase: str | None
    # The child's state as the claim read it, when this owner took the lease (else None):
    # the run's first step needs no read of its own.
    child_state: SessionSnapshot | None = None


@dataclass(frozen=True)
class LockedClaim:
    """A harness's claim of a session command under the session's lock (`claim_session`)."""

    first: bool  # the command had not been applied before
    row: Row | None  # the session's row, locked until commit (None: applied before, or unknown)
    leased: bool  # this owner holds the session's lease now (never for a subagent)


@dataclass(frozen=True)
class RunClose:
    """What a child's close writes besides its session's events, when it closes quietly
    (`close_quietly`): `finished` on its run's stream after the version the worker claimed
    it at, `notice` on its parent's stream after the parent's current version."""

    execution_id: UUID
    execution_version: int
    parent_session_id: UUID
    finished: Sequence[DomainEvent]
    notice: Sequence[DomainEvent]
    finished_metadata: dict[str, Any] | None = None


class AbstractUnitOfWork(abc.ABC):
    """What a decision may do between lock and commit. Lock order everywhere: a child
    session before its parent, sessions before executions."""

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

    # -- writes --------------------------------------------------------------------------

    @abc.abstractmethod
    async def append(
        self,
        stream_id: str,
        events: Sequence[DomainEvent],
        *,
        expected_version: int | None,
        metadata: dict[str, Any] | None = None,
    ) -> None:
        """Append after `expected_version` (None: after the current one, for writers that
        hold the stream's lock); a taken version raises `eventstore.ConcurrencyError`, at
        once or, as the append may be written with the decision's next statement, there or
        at commit. Either way nothing of the decision remains."""

    @abc.abstractmethod
    async def append_if_current(
        self,
        session_id: UUID,
        expected_count: int,
        events: Sequence[DomainEvent],
        *,
        blobs: Mapping[str, str] | None = None,
        ungated: bool = False,
    ) -> Recorded:
        """Append to a session only if it still runs (RUNNING or RESUMING) and still has
        `expected_count` messages (and, with `ungated`, is `auto` and CLOUD), storing
        `blobs` with it; the outcome says which."""

    @abc.abstractmethod
    async def close_quietly(
        self, session_id: UUID, expected_count: int, events: Sequence[DomainEvent], *, run: RunClose | None
    ) -> str:
        """End a turn in one step when nothing needs deciding under its locks: the session
        still runs with `expected_count` messages and no queued input, and with `run`, that
        run is still the session's open execution at its claimed version and another run of
        the parent is still open. Then `events` go on the session after its current
        version and `run`'s events on the run's and the parent's streams; "closed". Else
        why not, and nothing was written: "gone" (not running), "moved" (messages were
        recorded since), "queued" (an input waits), "changed" (the run is no longer the
        open execution at its claimed version) or "last" (the round's last open run: its
        barrier is decided under the locks)."""

    @abc.abstractmethod
    async def store_blobs(self, blobs: Mapping[str, str]) -> None:
        """File contents by sha256, kept once (a content already stored is left alone)."""

    @abc.abstractmethod
    async def send(self, topic: str, key: str, message: Envelope) -> None:
        """A command that leaves with the commit, or not at all."""

    @abc.abstractmethod
    async def first_delivery(self, consumer: str, message_id: str) -> bool:
        """True the first time this consumer applies this message (kept on commit only)."""

    @abc.abstractmethod
    async def try_lease(self, resource_id: str, owner: str, ttl_s: float) -> bool:
        """Take or renew the lease on `resource_id` unless another owner's is still live."""

    @abc.abstractmethod
    async def claim_execution(
        self, consumer: str, message_id: str, execution_id: UUID, owner: str, ttl_s: float
    ) -> ExecutionClaim:
        """A worker's claim of a `RunExecution`: `first_delivery`, the execution, and (for a
        first delivery of an open execution) `try_lease` on it, with its child's phase."""

    @abc.abstractmethod
    async def claim_session(
        self, consumer: str, message_id: str, session_id: UUID, owner: str, ttl_s: float
    ) -> LockedClaim:
        """`first_delivery`; for a first delivery `lock_session`; and for a session that
        is not a subagent `try_lease`, in one round trip. The lock's reads (the queued
        input, the session's state) are answered from it until the decision writes."""

    # -- locks and reads -----------------------------------------------------------------

    @abc.abstractmethod
    async def lock_session(
        self, session_id: UUID, *, nowait: bool = False, then: UUID | None = None
    ) -> Row | None:
        """The session's row, locked until commit (None: no such session). With `nowait`,
        a row locked by another decision raises `SessionBusy` instead of waiting. `then`
        (a child's parent, by the lock order) is locked right after it in the same round
        trip (not with `nowait`); a later `lock_session(then)` in this decision returns
        what that lock read, unless the decision wrote meanwhile."""

    @abc.abstractmethod
    async def session_state(self, session_id: UUID) -> SessionSnapshot | None:
        """The session's row and visible history, as this decision sees them."""

    @abc.abstractmethod
    async def read_stream(self, stream_id: str) -> list[StoredEvent]:
        """Every event of the stream, in order, as this transaction sees it."""

    @abc.abstractmethod
    async def current_version(self, stream_id: str) -> int:
        """The stream's version as this decision sees it, its own appends included. For a
        stream it wrote, the caller holds the stream's lock (its session's row)."""

    @abc.abstractmethod
    async def next_queued_input(self, session_id: UUID) -> Row | None:
        """The oldest input accepted while the session ran and not yet turned into a
        message (`message_id`, `content`)."""

    @abc.abstractmethod
    async def tool_result(self, session_id: UUID, tool_call_id: str) -> str | None:
        """The recorded TOOL result of a call, if any."""

    @abc.abstractmethod
    async def execution(self, execution_id: UUID, *, lock: bool = False) -> Row | None: ...

    @abc.abstractmethod
    async def open_execution_of(self, child_session_id: UUID) -> Row | None:
        """The child session's running (or recovering) execution, the latest round."""

    @abc.abstractmethod
    async def executions_of(self, parent_session_id: UUID, *, open_only: bool = False) -> list[Row]:
        """The executions the parent delegated (only the running ones with `open_only`)."""

    @abc.abstractmethod
    async def undelivered_executions(self, parent_session_id: UUID, *, lock: bool = True) -> list[Row]:
        """The parent's executions whose result is neither delivered nor suppressed, by
        start time, locked until commit unless `lock` is False."""

    @abc.abstractmethod
    async def runs_of(self, child_session_id: UUID) -> list[Row]:
        """The executions that ran the child session, by round (a follow-up is the next)."""

    @abc.abstractmethod
    async def wait(self, wait_id: UUID, *, lock: bool = False) -> Row | None:
        """A wait (`session_waits` row: an approval, a question or a LOCAL tool request),
        locked until commit with `lock`."""

    @abc.abstractmethod
    async def call_wait(self, session_id: UUID, tool_call_id: str) -> Row | None:
        """The newest wait of a tool call (an approval's decision, say), if any."""

    @abc.abstractmethod
    async def pending_waits(self, session_id: UUID) -> list[Row]:
        """The session's waits not yet resolved, oldest first."""

    @abc.abstractmethod
    async def lease_live(self, resource_id: str, now: datetime) -> bool | None:
        """Whether the lease on `resource_id` is live at `now`; None: nobody ever held it."""

    # -- recovery's reads -----------------------------------------------------------------

    @abc.abstractmethod
    async def tree_status(self, root_session_id: UUID) -> TreeStatus | None:
        """The root's tree signals as recorded on its stream and as its tree adds up now
        (None: not a live root). Read under the root's lock, it decides whether a
        `SessionTreeStatusChanged` is due."""

    # -- typed reads of the gateway's decisions (aggregates/) -----------------------------

    @abc.abstractmethod
    async def lock_owned_session(self, user_id: str, session_id: UUID) -> Session | None:
        """The session, locked until commit, when `user_id` owns it and it is not deleted;
        None otherwise: another user's session is exactly as absent as a missing one (it
        is not locked either)."""

    @abc.abstractmethod
    async def session(self, session_id: UUID) -> Session | None:
        """The session as committed, without a lock (None: no such session)."""

    @abc.abstractmethod
    async def queued_inputs(self, session_id: UUID) -> list[Input]:
        """The inputs accepted and not yet turned into messages, oldest first."""

    @abc.abstractmethod
    async def client_input(self, session_id: UUID, client_message_id: str) -> Input | None:
        """The input a client posted with this `clientMessageId` in this session, if any."""

    @abc.abstractmethod
    async def has_subagents(self, session_id: UUID) -> bool:
        """Whether the session ever delegated (a SUBAGENT session names it as its parent)."""

    @abc.abstractmethod
    async def lock_wait(self, wait_id: UUID) -> Wait | None:
        """The wait, locked until commit (None: no such wait)."""

    @abc.abstractmethod
    async def latest_messages(self, session_id: UUID, limit: int) -> list[Message]:
        """The session's newest `limit` visible (not discarded) messages, by seq."""

    @abc.abstractmethod
    async def message_seq(self, session_id: UUID, message_id: UUID) -> int | None:
        """The seq of a visible message of the session (None: not one of them)."""

    @abc.abstractmethod
    async def turn_up_to(self, session_id: UUID, seq: int) -> list[Message]:
        """The visible messages from the session's last USER message at or before `seq`
        up to `seq`, by seq: the turn that holds `seq` (everything, with no USER before)."""

    @abc.abstractmethod
    async def discarded_up_to(self, session_id: UUID, seq: int) -> list[UUID]:
        """The ids of the session's discarded messages at or before `seq`, by seq."""

    @abc.abstractmethod
    async def compaction(self, session_id: UUID) -> Compaction | None:
        """The session's latest compaction, if any."""

    @abc.abstractmethod
    async def running_trees(self, user_id: str) -> int:
        """How many of the user's session trees have a turn under way: a session of the
        tree, not deleted, in an active phase (`phases.ACTIVE_PHASES`) or with input
        accepted and not yet started. The per-user quota counts it (ADR 0041)."""


class DuplicateKey(Exception):
    """A decision wrote a row whose unique key was taken (raised by both implementations,
    on the append or at commit; the decision rolled back). Only the keys decisions rely
    on are reported this way: `KEYS`."""

    # A retried `clientMessageId` in a session (`session_inputs` (session_id, client_message_id)).
    CLIENT_MESSAGE = "session_inputs_client_key"
    KEYS = frozenset({CLIENT_MESSAGE})

    def __init__(self, key: str) -> None:
        super().__init__(key)
        self.key = key


UnitOfWorkFactory = Callable[[], AbstractUnitOfWork]
