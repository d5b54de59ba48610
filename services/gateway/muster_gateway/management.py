"""Managing sessions: settings, archive, delete, promote, read. Each is one decision over
a factory of units of work, in one transaction on the session's locked row, retried when
it loses a race on the stream; a request that changes nothing appends nothing. The edge
answers with the session as it reads after (`ClientReads.session`)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from muster_agent.answers import dropped_waits
from muster_contracts.commands import CancelSession
from muster_contracts.events import DomainEvent, QueuedMessagesDropped, SessionPhaseChanged
from muster_contracts.session_events import (
    SessionArchived,
    SessionDeleted,
    SessionPromoted,
    SessionRead,
    SessionSettingsChanged,
    SessionUnarchived,
)
from muster_runtime.messaging import topics
from muster_runtime.uow.aggregates import Session
from muster_runtime.uow.unit_of_work import AbstractUnitOfWork, UnitOfWorkFactory

from muster_gateway.deciding import metadata, not_subagent, owned, retried
from muster_gateway.errors import GatewayError

# The events a decision names for the locked session, and whether its running turn stops.
Decide = Callable[[AbstractUnitOfWork, Session], Awaitable[tuple[list[DomainEvent], bool]]]


async def _decided(uows: UnitOfWorkFactory, user_id: str, raw_id: str, decide: Decide) -> None:
    async def once() -> None:
        async with uows() as uow:
            session = await owned(uow, user_id, raw_id)
            events, cancel = await decide(uow, session)
            if events:
                meta = metadata(user_id, session.root_session_id)
                await uow.append(
                    str(session.session_id), events, expected_version=session.version, metadata=meta
                )
            if cancel:
                await uow.send(
                    topics.COMMANDS, str(session.session_id), CancelSession(session_id=session.session_id)
                )

    await retried(once)


async def change_settings(
    uows: UnitOfWorkFactory, user_id: str, raw_id: str, changes: dict[str, Any]
) -> None:
    """`changes`: `title`, `model_id`, `permission_level` (None: unchanged)."""

    async def decide(uow: AbstractUnitOfWork, session: Session) -> tuple[list[DomainEvent], bool]:
        not_subagent(session, "change")
        wanted = {k: v for k, v in changes.items() if v is not None and getattr(session, k) != v}
        return ([SessionSettingsChanged(**wanted)] if wanted else []), False

    await _decided(uows, user_id, raw_id, decide)


async def set_archived(uows: UnitOfWorkFactory, user_id: str, raw_id: str, archived: bool) -> None:
    async def decide(uow: AbstractUnitOfWork, session: Session) -> tuple[list[DomainEvent], bool]:
        if session.session_type != "SIDE_TASK":
            raise GatewayError("conflict", "only side tasks are archived")
        if session.archived == archived:
            return [], False
        return [SessionArchived() if archived else SessionUnarchived()], False

    await _decided(uows, user_id, raw_id, decide)


async def delete(uows: UnitOfWorkFactory, user_id: str, raw_id: str) -> None:
    """That session only, cancelling a running turn first (in the same transaction)."""

    async def decide(uow: AbstractUnitOfWork, session: Session) -> tuple[list[DomainEvent], bool]:
        not_subagent(session, "delete")
        # What it waited for ends with it, whatever its phase says.
        events = await dropped_waits(uow, session.session_id)
        if session.cancellable:
            events.append(SessionPhaseChanged(phase="CANCELLED"))
        queued = [i.message_id for i in await uow.queued_inputs(session.session_id)]
        if queued:
            events.append(QueuedMessagesDropped(message_ids=queued, reason="deleted"))
        return [*events, SessionDeleted()], session.cancellable

    await _decided(uows, user_id, raw_id, decide)


async def promote(uows: UnitOfWorkFactory, user_id: str, raw_id: str) -> None:
    """A side task becomes a NORMAL session, root of its own tree with its descendants."""

    async def decide(uow: AbstractUnitOfWork, session: Session) -> tuple[list[DomainEvent], bool]:
        if session.session_type != "SIDE_TASK":
            raise GatewayError("conflict", "only a side task can be promoted")
        if session.busy:
            raise GatewayError("conflict", "the side task is running; promote it once its turn ends")
        if await uow.has_subagents(session.session_id):
            raise GatewayError("conflict", "a side task that delegated to subagents cannot be promoted")
        assert session.parent_session_id is not None  # a side task has its source
        promoted = SessionPromoted(
            previous_parent_session_id=session.parent_session_id,
            previous_root_session_id=session.root_session_id,
        )
        return [promoted], False

    await _decided(uows, user_id, raw_id, decide)


async def mark_read(uows: UnitOfWorkFactory, user_id: str, raw_id: str) -> None:
    async def decide(uow: AbstractUnitOfWork, session: Session) -> tuple[list[DomainEvent], bool]:
        not_subagent(session, "read")
        return ([SessionRead()] if session.unread else []), False

    await _decided(uows, user_id, raw_id, decide)
