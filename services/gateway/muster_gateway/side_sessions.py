"""`create_side_session`: branch a NORMAL or SIDE_TASK session, in one decision.

The side task's events (creation, its fork or summary, its first input) and the source's
`SideSessionCreated` are appended together with the `ProcessSession` that starts its turn.
The source is locked first, so a running source can be forked: its writers wait, and
everything they recorded before is in the copy (ADR 0014).
"""

from __future__ import annotations

from typing import Any
from uuid import UUID, uuid4

from muster_contracts.commands import ProcessSession
from muster_contracts.events import (
    BackgroundMessage,
    CompactionRecorded,
    DomainEvent,
    SessionCreated,
    UserMessageQueued,
)
from muster_contracts.session_events import SessionForked, SideSessionCreated
from muster_runtime.messaging import topics
from muster_runtime.store.fork_ids import copied_id
from muster_runtime.uow.aggregates import Session
from muster_runtime.uow.unit_of_work import AbstractUnitOfWork, UnitOfWorkFactory

from muster_gateway.deciding import metadata, owned, retried
from muster_gateway.errors import GatewayError
from muster_gateway.fork_cut import complete_prefix
from muster_gateway.limits import NO_LIMITS, TurnAdmission, admit_turn
from muster_gateway.protocol import CreateSideSessionData

SUMMARY_MESSAGES = 10
SUMMARY_CHARS = 300


async def create_side_session(
    uows: UnitOfWorkFactory,
    user_id: str,
    raw_source: str,
    data: CreateSideSessionData,
    *,
    turns: TurnAdmission = NO_LIMITS,
) -> dict[str, Any]:
    """The side task and its first turn, unless `turns` refuses a new turn (`overloaded`,
    `quota_exceeded`: nothing is created)."""
    return await retried(lambda: _create(uows, user_id, raw_source, data, turns))


async def _create(
    uows: UnitOfWorkFactory, user_id: str, raw_source: str, data: CreateSideSessionData, turns: TurnAdmission
) -> dict[str, Any]:
    side_id, message_id = uuid4(), uuid4()
    async with uows() as uow:
        source = await owned(uow, user_id, raw_source)
        if source.is_subagent:
            raise GatewayError("conflict", "a subagent session cannot have side tasks; use its parent")
        if data.forkFromMessageId is not None and data.contextMode != "fork":
            raise GatewayError("bad_request", "data.forkFromMessageId: only with contextMode 'fork'")
        await admit_turn(uow, user_id, turns)
        background = await _summary(uow, source.session_id) if data.contextMode == "summary" else None
        events: list[DomainEvent] = [
            SessionCreated(
                session_id=side_id,
                user_id=user_id,
                session_type="SIDE_TASK",
                parent_session_id=source.session_id,
                root_session_id=source.root_session_id,
                title=data.title,
                agent_type=source.agent_type,
                model_id=data.modelId or source.model_id,
                permission_level=data.permissionLevel or source.permission_level,
                execution_mode=source.execution_mode,
                context_mode=data.contextMode,
                background=background,
                workspace_id=source.workspace,
            )
        ]
        if data.contextMode == "fork":
            fork = await _fork(uow, source, data.forkFromMessageId)
            events.append(fork)
            events += await _forked_compaction(uow, side_id, source.session_id, fork.up_to_seq)
        events.append(
            UserMessageQueued(
                message_id=message_id, client_message_id=data.clientMessageId, content=data.content
            )
        )
        meta = metadata(user_id, source.root_session_id, message_id)
        await uow.append(str(side_id), events, expected_version=0, metadata=meta)
        notice = SideSessionCreated(
            session_id=side_id, root_session_id=source.root_session_id, context_mode=data.contextMode
        )
        await uow.append(str(source.session_id), [notice], expected_version=source.version, metadata=meta)
        start = ProcessSession(session_id=side_id, correlation_id=message_id, causation_id=message_id)
        await uow.send(topics.COMMANDS, str(side_id), start)
    return {"sessionId": str(side_id), "messageId": str(message_id)}


async def _summary(uow: AbstractUnitOfWork, source_id: UUID) -> list[BackgroundMessage]:
    latest = await uow.latest_messages(source_id, SUMMARY_MESSAGES)
    return [BackgroundMessage(role=m.role, content=m.content[:SUMMARY_CHARS]) for m in latest]


async def _forked_compaction(
    uow: AbstractUnitOfWork, side_id: UUID, source_id: UUID, up_to: int
) -> list[DomainEvent]:
    """The source's compaction state, when its boundary is inside the copy: the side task's
    model then sees the same summary and what follows it, with the copies' ids."""
    compaction = await uow.compaction(source_id)
    if compaction is None or compaction.boundary_seq > up_to:
        return []
    return [
        CompactionRecorded(
            boundary_message_id=copied_id(side_id, compaction.boundary_message_id),
            boundary_seq=compaction.boundary_seq,
            summary=compaction.summary,
            messages_compacted=compaction.messages_compacted,
            tokens_before=compaction.tokens_before,
            tokens_after=compaction.tokens_after,
            at_seq=min(compaction.at_seq, up_to),
        )
    ]


async def _fork(uow: AbstractUnitOfWork, source: Session, raw_message_id: str | None) -> SessionForked:
    """The copy's extent: up to the named message (or everything), moved back before a tool
    round whose results are not all recorded. Reads only the turn holding the cut."""
    up_to = source.message_count
    if raw_message_id is not None:
        seq = None
        try:
            message_id = UUID(raw_message_id)
        except ValueError:
            message_id = None
        if message_id is not None:
            seq = await uow.message_seq(source.session_id, message_id)
        if seq is None:
            raise GatewayError("bad_request", "data.forkFromMessageId: not a message of the source session")
        up_to = seq
    cut = complete_prefix(await uow.turn_up_to(source.session_id, up_to), up_to)
    skipped = await uow.discarded_up_to(source.session_id, cut)
    return SessionForked(source_session_id=source.session_id, up_to_seq=cut, skipped_message_ids=skipped)
