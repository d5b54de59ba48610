"""Reading a session's state and recording the loop's decisions, each in one transaction.

The session row is locked (`FOR UPDATE`) while deciding, and every append names the stream
version it read: a cancel, a queued message or a zombie runner can never interleave with a
decision half-way.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, NamedTuple
from uuid import UUID, uuid4

from muster_contracts import events as ev
from muster_runtime.unit_of_work import AbstractUnitOfWork, Row, SessionSnapshot, UnitOfWorkFactory

from muster_agent.history import StoredMessage, pending_tool_calls, to_chat

RUNNING_PHASES = ("RUNNING", "RESUMING")


@dataclass(frozen=True)
class SessionState:
    session_id: UUID
    user_id: str
    session_type: str
    root_session_id: UUID
    parent_session_id: UUID | None
    agent_type: str
    model_id: str | None
    phase: str | None
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
        return cls(int(row["boundary_seq"]), str(row["summary"]), int(row["at_seq"]))


def context_chat(
    messages: Sequence[StoredMessage], compaction: Compaction | None
) -> tuple[dict[str, Any], ...]:
    """The chat form of what the model sees of `messages`: those after the boundary."""
    boundary = compaction.boundary_seq if compaction is not None else 0
    return tuple(to_chat([m for m in messages if m.seq > boundary]))


class Recorded(NamedTuple):
    """A decision's outcome for the loop: go on (with `state`, or reload when None) or stop
    (the session no longer runs here)."""

    keep_going: bool
    state: SessionState | None


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
    messages = [
        StoredMessage(
            m["message_id"],
            m["seq"],
            m["role"],
            m["content"],
            m["tool_calls"],
            m["tool_call_id"],
            m.get("usage"),
        )
        for m in snapshot.messages
    ]
    compaction = Compaction.of(snapshot.compaction)
    return SessionState(
        session_id=row["session_id"],
        user_id=row["user_id"],
        session_type=row["session_type"],
        root_session_id=row["root_session_id"],
        parent_session_id=row["parent_session_id"],
        agent_type=row["agent_type"],
        model_id=row["model_id"],
        phase=row["phase"],
        version=row["version"],
        message_count=row["message_count"],
        messages=messages,
        started_tool_calls=snapshot.started_tool_calls,
        chat=context_chat(messages, compaction),
        compaction=compaction,
        # Projected by migration 0010 (the in-memory unit of work's rows may lack them).
        background=_background(row.get("background")),
        workspace_id=row.get("workspace_id"),
        permission_level=row.get("permission_level") or "auto",
        execution_mode=row.get("execution_mode") or "CLOUD",
    )


def _background(stored: list[dict[str, str]] | None) -> tuple[tuple[str, str], ...] | None:
    return None if stored is None else tuple((b["role"], b["content"]) for b in stored)


async def load_state(uow: AbstractUnitOfWork, session_id: UUID) -> SessionState | None:
    """The session's state as this decision sees it (one round trip on PostgreSQL)."""
    return snapshot_state(await uow.session_state(session_id))


async def read_state(uows: UnitOfWorkFactory, session_id: UUID) -> SessionState | None:
    """`load_state` in a unit of work of its own: what a step decides on."""
    async with uows() as uow:
        return await load_state(uow, session_id)


EventsFor = Callable[[int], Sequence[ev.DomainEvent]]


class Lock:
    """What `lock_if_current` found: the session no longer runs (`GONE`), someone recorded
    since the caller looked (`MOVED`), or it is as the caller saw it (`CURRENT`)."""

    GONE = "gone"
    MOVED = "moved"
    CURRENT = "current"


async def lock_if_current(
    uow: AbstractUnitOfWork, session_id: UUID, expected_count: int
) -> tuple[Row | None, str]:
    """Lock the session row and compare it with what the caller decided on."""
    row = await uow.lock_session(session_id)
    if row is None or row["phase"] not in RUNNING_PHASES:
        return row, Lock.GONE
    if row["message_count"] != expected_count:
        return row, Lock.MOVED
    return row, Lock.CURRENT


async def record_if_current(
    uows: UnitOfWorkFactory,
    state: SessionState,
    events_for: EventsFor,
    *,
    blobs: dict[str, str] | None = None,
) -> SessionState | None:
    """Append `events_for(next_seq)` only if the session still runs and nobody recorded a
    message since the caller looked (`state`), with the `blobs` its events reference: one
    round trip. Returns the state after the append; None means: drop your result."""
    events = list(events_for(state.message_count + 1))
    async with uows() as uow:
        recorded = await uow.append_if_current(state.session_id, state.message_count, events, blobs=blobs)
    if recorded.outcome != "current" or recorded.base_version is None:
        return None
    return advance(replace(state, phase=recorded.phase), recorded.base_version, events)


async def record_if_idle(
    uows: UnitOfWorkFactory, state: SessionState, events: Sequence[ev.DomainEvent]
) -> SessionState | None:
    """Append `events` only if no turn runs and nobody recorded a message since the caller
    looked (`state`): what a compaction on request records. None: drop your result."""
    async with uows() as uow:
        row = await uow.lock_session(state.session_id)
        idle = row is not None and row["phase"] not in (*RUNNING_PHASES, "CANCELLING")
        if row is None or not idle or row["message_count"] != state.message_count:
            return None
        await uow.append(str(state.session_id), events, expected_version=row["version"])
    return advance(replace(state, phase=row["phase"]), row["version"], events)


MessageAt = Callable[[int], ev.MessageRecorded]
Item = ev.DomainEvent | MessageAt


def message_items(items: Sequence[Item], first_seq: int) -> list[ev.DomainEvent]:
    """Materialise `items`, numbering the messages among them from `first_seq`."""
    events: list[ev.DomainEvent] = []
    seq = first_seq
    for item in items:
        if isinstance(item, ev.DomainEvent):
            events.append(item)
        else:
            events.append(item(seq))
            seq += 1
    return events


async def record_items(
    uows: UnitOfWorkFactory,
    state: SessionState,
    items: Sequence[Item],
    *,
    blobs: dict[str, str] | None = None,
) -> SessionState | None:
    """`record_if_current` for a list of events and message builders."""
    return await record_if_current(uows, state, lambda seq: message_items(items, seq), blobs=blobs)


def tool_message(tool_call_id: str, content: str) -> MessageAt:
    return lambda seq: ev.MessageRecorded(
        message_id=uuid4(), seq=seq, role="TOOL", content=content, tool_call_id=tool_call_id
    )


def error_result(reason: str) -> str:
    return json.dumps({"success": False, "error": reason})


async def answer_open_calls(
    uow: AbstractUnitOfWork, session_id: UUID, first_seq: int
) -> list[ev.MessageRecorded]:
    """Error results for the tool calls an ended (cancelled or crashed) turn left open,
    numbered from `first_seq`: a new USER message may only follow a complete round."""
    state = await load_state(uow, session_id)
    assert state is not None
    reason = error_result("interrupted: the turn ended before this tool call finished")
    return [
        tool_message(call["id"], reason)(first_seq + i)
        for i, call in enumerate(pending_tool_calls(state.messages))
    ]


async def start_next_turn(
    uow: AbstractUnitOfWork, row: Mapping[str, Any], *, after: Sequence[ev.DomainEvent] = ()
) -> bool:
    """With the session row locked: turn the oldest queued input into the USER message of
    a new RUNNING turn. Unanswered tool calls of an earlier (cancelled or crashed) turn get
    an error result first, so the history stays valid and nothing is re-run.

    `after` are events the caller appends first in the same transaction (a turn's end)."""
    session_id: UUID = row["session_id"]
    queued = await uow.next_queued_input(session_id)
    events: list[ev.DomainEvent] = list(after)
    seq = row["message_count"] + sum(isinstance(e, ev.MessageRecorded) for e in after)
    if queued is not None:
        closing = await answer_open_calls(uow, session_id, seq + 1)
        events += closing
        seq += len(closing) + 1
        events.append(
            ev.MessageRecorded(
                message_id=queued["message_id"], seq=seq, role="USER", content=queued["content"]
            )
        )
        events.append(ev.SessionPhaseChanged(phase="RUNNING"))
    if events:
        await uow.append(str(session_id), events, expected_version=row["version"])
    return queued is not None
