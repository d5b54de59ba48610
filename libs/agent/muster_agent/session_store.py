"""Reading a session's state and recording the loop's decisions, each in one transaction.

The session row is locked (`FOR UPDATE`) while deciding, and every append names the stream
version it read: a cancel, a queued message or a zombie runner can never interleave with a
decision half-way.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import NamedTuple
from uuid import UUID, uuid4

from muster_contracts import events as ev
from muster_runtime.store import lineage
from muster_runtime.uow.aggregates import Session
from muster_runtime.uow.unit_of_work import AbstractUnitOfWork, Row, UnitOfWorkFactory

from muster_agent.history import pending_tool_calls

# Re-exported: the loop and the services read these through this module (`store.…`).
from muster_agent.session_state import SessionState as SessionState
from muster_agent.session_state import advance as advance
from muster_agent.session_state import snapshot_state


class Recorded(NamedTuple):
    """A decision's outcome for the loop: go on (with `state`, or reload when None) or stop
    (the session no longer runs here)."""

    keep_going: bool
    state: SessionState | None


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
    uow: AbstractUnitOfWork, session_id: UUID, expected_count: int, *, then: UUID | None = None
) -> tuple[Session | None, str]:
    """Lock the session row (and `then` right after it, see `lock_session`) and compare it
    with what the caller decided on."""
    row = await uow.lock_session(session_id, then=then)
    session = Session.of(row) if row is not None else None
    if session is None or not session.running:
        return session, Lock.GONE
    if session.message_count != expected_count:
        return session, Lock.MOVED
    return session, Lock.CURRENT


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
        session = Session.of(row) if row is not None else None
        if session is None or session.active or session.message_count != state.message_count:
            return None
        await uow.append(str(state.session_id), events, expected_version=session.version)
    return advance(replace(state, phase=session.phase), session.version, events)


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
    return open_call_errors(state, first_seq)


def open_call_errors(state: SessionState, first_seq: int) -> list[ev.MessageRecorded]:
    """`answer_open_calls` for a state already read."""
    reason = error_result("interrupted: the turn ended before this tool call finished")
    return [
        tool_message(call["id"], reason)(first_seq + i)
        for i, call in enumerate(pending_tool_calls(state.messages))
    ]


async def start_next_turn(
    uow: AbstractUnitOfWork, session: Session, *, after: Sequence[ev.DomainEvent] = ()
) -> SessionState | None:
    """With the session row locked: turn the oldest queued input into the USER message of
    a new RUNNING turn. Unanswered tool calls of an earlier (cancelled or crashed) turn get
    an error result first, so the history stays valid and nothing is re-run.

    `after` are events the caller appends first in the same transaction (a turn's end).
    Returns the session's state once the turn has started, carried forward from the state
    this decision read (a reload would return the same), or None: no input was queued."""
    queued = await uow.next_queued_input(session.session_id)
    return await start_turn_with(uow, session, queued, after=after)


async def start_turn_with(
    uow: AbstractUnitOfWork,
    session: Session,
    queued: Row | None,
    *,
    after: Sequence[ev.DomainEvent] = (),
) -> SessionState | None:
    """`start_next_turn` with the oldest queued input already read (under the same lock)."""
    session_id = session.session_id
    events: list[ev.DomainEvent] = list(after)
    seq = session.message_count + sum(isinstance(e, ev.MessageRecorded) for e in after)
    before: SessionState | None = None
    if queued is not None:
        # Free when a claim read the state with its lock; otherwise the one read the open
        # calls' answers need anyway.
        before = await load_state(uow, session_id)
        assert before is not None
        closing = open_call_errors(before, seq + 1)
        events += closing
        seq += len(closing) + 1
        events.append(
            ev.MessageRecorded(
                message_id=queued["message_id"], seq=seq, role="USER", content=queued["content"]
            )
        )
        events.append(ev.SessionPhaseChanged(phase="RUNNING"))
    if events:
        await uow.append(str(session_id), events, expected_version=session.version)
    if queued is None or before is None:
        return None
    lineage.begin_turn(queued["message_id"])
    # As loaded: the turn's first step still looks for a crash's tail, as after a reload.
    return replace(advance(before, session.version, events), loaded=before.loaded)
