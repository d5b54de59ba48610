"""The in-memory session rows' management columns (migration 0010's `muster_project_manage`,
event by event: archived, deleted, read and turn-end positions, a promotion) and the unique
key of a client's message (`session_inputs_client_key`)."""

from __future__ import annotations

from typing import Any
from uuid import UUID

from muster_contracts import events as ev
from muster_contracts import session_events as se

from muster_runtime.uow.unit_of_work import DuplicateKey

Row = dict[str, Any]
MANAGEMENT = (se.SessionArchived, se.SessionUnarchived, se.SessionDeleted, se.SessionRead, se.SessionPromoted)
TURN_ENDS = ("COMPLETED", "FAILED")  # what makes a session unread until the user reads it


def project_management(
    sessions: dict[UUID, Row], session_id: UUID, event: ev.DomainEvent, position: int
) -> None:
    row = sessions.get(session_id)
    if row is None:
        return
    if isinstance(event, se.SessionArchived | se.SessionUnarchived):
        row["archived"] = isinstance(event, se.SessionArchived)
    elif isinstance(event, se.SessionDeleted):
        row["deleted"] = True
    elif isinstance(event, se.SessionRead):
        row["read_position"] = position
    elif isinstance(event, se.SessionPromoted):
        row.update(session_type="NORMAL", parent_session_id=None, root_session_id=session_id)
        _reroot_below(sessions, session_id)


def _reroot_below(sessions: dict[UUID, Row], root: UUID) -> None:
    # The same defensive cap of 10 levels as PostgreSQL's walk.
    level = {root}
    for _ in range(10):
        level = {sid for sid, row in sessions.items() if row["parent_session_id"] in level}
        if not level:
            return
        for sid in level:
            sessions[sid]["root_session_id"] = root


def end_turn(row: Row, event: ev.SessionPhaseChanged, position: int) -> None:
    if event.phase in TURN_ENDS:
        row["turn_ended_position"] = position


def check_client_key(inputs: dict[UUID, Row], session_id: UUID, event: ev.UserMessageQueued) -> None:
    """PostgreSQL's UNIQUE (session_id, client_message_id): NULLs never collide."""
    if event.client_message_id is None:
        return
    for row in inputs.values():
        if row["session_id"] == session_id and row["client_message_id"] == event.client_message_id:
            raise DuplicateKey(DuplicateKey.CLIENT_MESSAGE)
