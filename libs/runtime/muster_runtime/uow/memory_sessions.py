"""The in-memory `sessions` rows and what the management of a tree does to them (migration
0010's `muster_project_manage` and `muster_project_forks`): settings, archive, delete,
read, the tree's signals, a promotion (its descendants follow) and a fork's copies."""

from __future__ import annotations

from datetime import datetime
from typing import Any
from uuid import UUID

from muster_contracts import events as ev
from muster_contracts import session_events as se

from muster_runtime.store.fork_ids import copied_id

Row = dict[str, Any]
TREE_DEPTH = 10  # a promotion's walk down the tree stops there, as every tree walk in SQL


def created_row(event: ev.SessionCreated, version: int, at: datetime) -> Row:
    """A new session's row, with every column of PostgreSQL's (its defaults included)."""
    return {
        **event.model_dump(exclude={"type", "schema_version", "background", "workspace_id"}),
        "background": [m.model_dump() for m in event.background] if event.background is not None else None,
        # A side task names its source's workspace; any other session uses its root's.
        "workspace_id": event.workspace_id or event.root_session_id,
        "phase": None, "last_error": None, "message_count": 0, "recoveries": 0,
        "version": version, "created_at": at, "updated_at": at,
        "archived": False, "deleted": False, "turn_ended_position": None, "read_position": None,
        "tree_running": False, "tree_unread": False, "pending_approvals": 0, "pending_questions": 0,
    }  # fmt: skip


MANAGEMENT = (
    se.SessionSettingsChanged,
    se.SessionArchived,
    se.SessionUnarchived,
    se.SessionDeleted,
    se.SessionRead,
    se.SessionTreeStatusChanged,
    se.SessionPromoted,
)


def manage(sessions: dict[UUID, Row], session_id: UUID, event: ev.DomainEvent, position: int) -> None:
    row = sessions.get(session_id)
    if row is None:
        return
    if isinstance(event, se.SessionSettingsChanged):
        for name in ("title", "model_id", "permission_level"):
            value = getattr(event, name)
            if value is not None:
                row[name] = value
    elif isinstance(event, se.SessionArchived | se.SessionUnarchived):
        row["archived"] = isinstance(event, se.SessionArchived)
    elif isinstance(event, se.SessionDeleted):
        row["deleted"] = True
    elif isinstance(event, se.SessionRead):
        row["read_position"] = position
    elif isinstance(event, se.SessionTreeStatusChanged):
        row.update(event.model_dump(exclude={"type", "schema_version"}))
    elif isinstance(event, se.SessionPromoted):
        row.update(session_type="NORMAL", parent_session_id=None, root_session_id=session_id)
        _follow(sessions, session_id)


def _follow(sessions: dict[UUID, Row], root: UUID) -> None:
    """The promoted session's descendants take it as their root."""
    level, depth = {root}, 0
    while level and depth < TREE_DEPTH:
        below = [r for r in sessions.values() if r["parent_session_id"] in level]
        for child in below:
            child["root_session_id"] = root
        level, depth = {r["session_id"] for r in below}, depth + 1


def fork(
    messages: dict[UUID, Row], side: UUID, event: se.SessionForked, position: int, at: datetime
) -> list[Row]:
    """The copies a fork gives its side task: the source's messages up to `up_to_seq` but
    the skipped ones, discarded or not (the projector copies no `discarded` flag)."""
    originals = sorted(
        (
            m
            for m in messages.values()
            if m["session_id"] == event.source_session_id
            and m["seq"] <= event.up_to_seq
            and m["message_id"] not in event.skipped_message_ids
        ),
        key=lambda m: m["seq"],
    )
    return [
        {
            **m,
            "message_id": copied_id(side, m["message_id"]),
            "session_id": side,
            "discarded": False,
            "position": position,
            "created_at": at,
            "forked_from": m["forked_from"] or m["message_id"],
        }
        for m in originals
    ]
