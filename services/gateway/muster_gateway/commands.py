"""The gateway's decisions about a session's turns: create it, post to it, cancel it,
compact it. Each is one function over a factory of units of work and one transaction:
events appended (with their inline projections) and commands written to the outbox
together, so an acknowledged request can never be half-applied (invariant 4).

Every writer of a session stream locks the session first (`lock_owned_session`), so
writers queue on the row instead of deadlocking on each other's projection update.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any
from uuid import UUID, uuid4

from muster_agent.answers import dropped_waits
from muster_contracts.commands import CancelSession, CompactSession, ProcessSession
from muster_contracts.events import (
    DomainEvent,
    QueuedMessagesDropped,
    SessionCreated,
    SessionPhaseChanged,
    UserMessageQueued,
)
from muster_runtime.messaging import topics
from muster_runtime.uow.unit_of_work import DuplicateKey, UnitOfWorkFactory

from muster_gateway.deciding import metadata, not_subagent, owned, retried
from muster_gateway.errors import GatewayError
from muster_gateway.ids import parse_session_id
from muster_gateway.limits import NO_LIMITS, TurnAdmission, admit_turn
from muster_gateway.protocol import CreateSessionData, SendMessageData


async def create_session(
    uows: UnitOfWorkFactory,
    user_id: str,
    data: CreateSessionData,
    workspaces_dir: Path,
    *,
    turns: TurnAdmission = NO_LIMITS,
) -> dict[str, Any]:
    """A NORMAL session; with `content` its first turn starts, unless `turns` refuses a
    new turn (`overloaded`, `quota_exceeded`: nothing is created)."""
    session_id = uuid4()
    stream = str(session_id)
    events: list[DomainEvent] = [
        SessionCreated(
            session_id=session_id,
            user_id=user_id,
            session_type="NORMAL",
            root_session_id=session_id,
            title=data.title,
            agent_type=data.agentType or "general",
            model_id=data.modelId,
            permission_level=data.permissionLevel or "auto",
            execution_mode=data.executionMode or "CLOUD",
        )
    ]
    message_id = uuid4() if data.content is not None else None
    if message_id is not None and data.content is not None:
        events.append(
            UserMessageQueued(
                message_id=message_id, client_message_id=data.clientMessageId, content=data.content
            )
        )
    async with uows() as uow:
        if message_id is not None:
            await admit_turn(uow, user_id, turns)
        # Before the commit: the harness may start the turn the instant ProcessSession is out.
        (workspaces_dir / stream).mkdir(parents=True, exist_ok=True)
        await uow.append(
            stream, events, expected_version=0, metadata=metadata(user_id, session_id, message_id)
        )
        if message_id is not None:
            start = ProcessSession(session_id=session_id, correlation_id=message_id, causation_id=message_id)
            await uow.send(topics.COMMANDS, stream, start)
    ack: dict[str, Any] = {"sessionId": stream}
    if message_id is not None:
        ack["messageId"] = str(message_id)
    return ack


async def send_message(
    uows: UnitOfWorkFactory,
    user_id: str,
    raw_id: str,
    data: SendMessageData,
    *,
    turns: TurnAdmission = NO_LIMITS,
) -> dict[str, Any]:
    """Post a USER message: it starts a turn, or waits (`queued`) behind a turn under way
    or behind earlier input not yet started. A repeated `clientMessageId` is not posted
    twice: the ack of the original is given again (`duplicate`). A message that would
    start a turn is refused when `turns` refuses a new turn (`overloaded`,
    `quota_exceeded`); one that queues behind a turn under way is not."""

    async def decide() -> dict[str, Any]:
        message_id = uuid4()
        async with uows() as uow:
            session = await owned(uow, user_id, raw_id)
            not_subagent(session, "post to")
            queued = session.active or bool(await uow.queued_inputs(session.session_id))
            if not queued:
                await admit_turn(uow, user_id, turns)
            posted = UserMessageQueued(
                message_id=message_id, client_message_id=data.clientMessageId, content=data.content
            )
            meta = metadata(user_id, session.root_session_id, message_id)
            await uow.append(
                str(session.session_id), [posted], expected_version=session.version, metadata=meta
            )
            start = ProcessSession(
                session_id=session.session_id, correlation_id=message_id, causation_id=message_id
            )
            await uow.send(topics.COMMANDS, str(session.session_id), start)
        return {"messageId": str(message_id), "queued": queued}

    try:
        return await retried(decide)
    except DuplicateKey as exc:
        # The unique key, not a prior read, decides that a retried clientMessageId was
        # already accepted; the whole decision rolled back, so report the original.
        if exc.key != DuplicateKey.CLIENT_MESSAGE or data.clientMessageId is None:
            raise
        return await _duplicate(uows, parse_session_id(raw_id), data.clientMessageId)


async def _duplicate(uows: UnitOfWorkFactory, session_id: UUID, client_message_id: str) -> dict[str, Any]:
    async with uows() as uow:
        original = await uow.client_input(session_id, client_message_id)
        session = await uow.session(session_id)
    if original is None or session is None:  # vanished (projection rebuild): nothing to point at
        raise GatewayError("conflict", "clientMessageId was already used, retry")
    queued = original.state == "QUEUED" and session.active
    return {"messageId": str(original.message_id), "queued": queued, "duplicate": True}


async def cancel(uows: UnitOfWorkFactory, user_id: str, raw_id: str) -> dict[str, Any]:
    """Stop the running turn and drop what is queued behind it and what it waits for.
    Acknowledged in every phase: cancelling an idle session is a no-op, not an error."""

    async def decide() -> dict[str, Any]:
        async with uows() as uow:
            session = await owned(uow, user_id, raw_id)
            not_subagent(session, "cancel")
            queued = [i.message_id for i in await uow.queued_inputs(session.session_id)]
            events: list[DomainEvent] = []
            if session.waiting:
                events += await dropped_waits(uow, session.session_id)
            if session.cancellable:
                events.append(SessionPhaseChanged(phase="CANCELLED", error=None))
            if queued:
                # Also when idle: input accepted but not yet started would otherwise start
                # a turn right after the user asked to stop.
                events.append(QueuedMessagesDropped(message_ids=queued, reason="cancelled"))
            if events:
                meta = metadata(user_id, session.root_session_id)
                await uow.append(
                    str(session.session_id), events, expected_version=session.version, metadata=meta
                )
            if session.cancellable:
                await uow.send(
                    topics.COMMANDS, str(session.session_id), CancelSession(session_id=session.session_id)
                )
        return {}

    return await retried(decide)


async def request_compaction(uows: UnitOfWorkFactory, user_id: str, raw_id: str) -> dict[str, Any]:
    """Ask the harness to compact an idle session now (`conflict` while a turn runs: a
    running turn compacts itself when its context needs it)."""
    async with uows() as uow:
        session = await owned(uow, user_id, raw_id)
        if session.active:
            raise GatewayError("conflict", "the session is running; compact it once its turn has ended")
        command = CompactSession(session_id=session.session_id)
        await uow.send(topics.COMMANDS, str(session.session_id), command)
    return {"accepted": True, "commandId": str(command.message_id)}
