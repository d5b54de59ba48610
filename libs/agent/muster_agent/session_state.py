"""A session's state as a step decides on it: its row, its visible history (in the model's
chat form after the compaction boundary) and its started tool calls, loaded once and then
carried forward from the runner's own records (`advance`) instead of re-read every step.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any
from uuid import UUID

from muster_contracts import events as ev
from muster_contracts.tool_arguments import with_text_arguments
from muster_runtime.uow import aggregates
from muster_runtime.uow.aggregates import Session
from muster_runtime.uow.phases import RUNNING_PHASES
from muster_runtime.uow.unit_of_work import SessionSnapshot

from muster_agent.history import StoredMessage, to_chat


@dataclass(frozen=True)
class SessionState:
    session_id: UUID
    user_id: str
    session_type: ev.SessionType
    root_session_id: UUID
    parent_session_id: UUID | None
    agent_type: str
    model_id: str | None
    phase: ev.Phase | None
    version: int
    message_count: int
    messages: list[StoredMessage]
    started_tool_calls: frozenset[str]
    # Loaded from the store (a crash may have left a tail to discard), rather than carried
    # forward by this runner from its own records (`advance`), which leave none.
    loaded: bool = True
    # The messages after the compaction boundary in the model's chat form, extended record
    # by record (`advance`) instead of converted again at every step.
    chat: tuple[dict[str, Any], ...] = ()
    compaction: Compaction | None = None
    # A summary side task's background (role, content), for its system prompt (`context`).
    background: tuple[tuple[str, str], ...] | None = None
    workspace_id: UUID | None = None  # the tree's workspace (None: the root's)
    permission_level: ev.PermissionLevel = "auto"  # inherited by the subagents it delegates to
    execution_mode: ev.ExecutionMode = "CLOUD"

    @property
    def running(self) -> bool:
        return self.phase in RUNNING_PHASES


@dataclass(frozen=True)
class Compaction:
    """The session's latest compaction: the model sees `summary` instead of the messages
    up to `boundary_seq`. Usage reported by messages up to `at_seq` predates it."""

    boundary_seq: int
    summary: str
    at_seq: int

    @classmethod
    def of(cls, row: Mapping[str, Any] | None) -> Compaction | None:
        if row is None:
            return None
        stored = aggregates.Compaction.of(row)
        return cls(stored.boundary_seq, stored.summary, stored.at_seq)


def context_chat(
    messages: Sequence[StoredMessage], compaction: Compaction | None
) -> tuple[dict[str, Any], ...]:
    """The chat form of what the model sees of `messages`: those after the boundary."""
    return tuple(to_chat(after_boundary(messages, compaction)))


def after_boundary(messages: Sequence[StoredMessage], compaction: Compaction | None) -> list[StoredMessage]:
    """The messages the model still sees: those after the compaction boundary."""
    boundary = compaction.boundary_seq if compaction is not None else 0
    return [m for m in messages if m.seq > boundary]


def advance(state: SessionState, version: int, events: Sequence[ev.DomainEvent]) -> SessionState:
    """`state` after `events` were appended at `version` (the version the lock showed): what
    a reload would return, without reading the history again (O(1) per step, not O(n))."""
    messages = state.messages
    started = state.started_tool_calls
    phase = state.phase
    count = state.message_count
    chat = state.chat
    compaction = state.compaction
    for event in events:
        if isinstance(event, ev.MessageRecorded):
            calls = [call.model_dump(mode="json") for call in event.tool_calls] if event.tool_calls else None
            usage = event.usage.model_dump() if event.usage is not None else None
            message = StoredMessage(
                event.message_id, event.seq, event.role, event.content, calls, event.tool_call_id, usage
            )
            messages = [*messages, message]
            chat = (*chat, *to_chat([message]))
            count = max(count, event.seq)
        elif isinstance(event, ev.ToolCallStarted):
            started = started | {event.tool_call_id}
        elif isinstance(event, ev.SessionPhaseChanged):
            phase = event.phase
        elif isinstance(event, ev.MessagesDiscarded):
            gone = set(event.message_ids)
            messages = [m for m in messages if m.message_id not in gone]
            chat = context_chat(messages, compaction)
        elif isinstance(event, ev.CompactionRecorded):
            compaction = Compaction(event.boundary_seq, event.summary, event.at_seq)
            chat = context_chat(messages, compaction)
    return replace(
        state,
        messages=messages,
        started_tool_calls=started,
        phase=phase,
        message_count=count,
        version=version + len(events),
        loaded=False,
        chat=chat,
        compaction=compaction,
    )


def snapshot_state(snapshot: SessionSnapshot | None) -> SessionState | None:
    if snapshot is None:
        return None
    row = snapshot.row
    session = Session.of(row)
    messages = [
        StoredMessage(
            m["message_id"],
            m["seq"],
            m["role"],
            m["content"],
            with_text_arguments(m["tool_calls"]),
            m["tool_call_id"],
            m.get("usage"),
        )
        for m in snapshot.messages
    ]
    compaction = Compaction.of(snapshot.compaction)
    return SessionState(
        session_id=session.session_id,
        user_id=session.user_id,
        session_type=session.session_type,
        root_session_id=session.root_session_id,
        parent_session_id=session.parent_session_id,
        agent_type=session.agent_type,
        model_id=session.model_id,
        phase=session.phase,
        version=session.version,
        message_count=session.message_count,
        messages=messages,
        started_tool_calls=snapshot.started_tool_calls,
        chat=context_chat(messages, compaction),
        compaction=compaction,
        background=_background(row.get("background")),
        workspace_id=session.workspace_id,
        permission_level=session.permission_level,
        execution_mode=session.execution_mode,
    )


def _background(stored: list[dict[str, str]] | None) -> tuple[tuple[str, str], ...] | None:
    return None if stored is None else tuple((b["role"], b["content"]) for b in stored)
