"""Events of side tasks and session management (issue 10): a tree of sessions that users
branch, fork, rename, archive, delete, promote and read. Registered in `events.py`."""

from __future__ import annotations

from typing import Literal
from uuid import UUID

from muster_contracts.events import ContextMode, DomainEvent, PermissionLevel


class SideSessionCreated(DomainEvent):
    """On the source's stream, so its subscribers see the side task appear."""

    type: Literal["SideSessionCreated"] = "SideSessionCreated"
    session_id: UUID
    root_session_id: UUID
    context_mode: ContextMode


class SessionForked(DomainEvent):
    """On a `fork` side task's stream, right after its creation: it starts with the
    source's messages `seq <= up_to_seq` (those in `skipped_message_ids`, discarded at the
    time, left out) and their file changes. The copies' ids are derived from the side task
    and the originals (`fork_ids.copied_id`), so a replay of this one event rebuilds the
    same rows without the log holding the transcript twice (ADR 0014)."""

    type: Literal["SessionForked"] = "SessionForked"
    source_session_id: UUID
    up_to_seq: int
    skipped_message_ids: list[UUID] = []


class SessionSettingsChanged(DomainEvent):
    """`PATCH /v1/sessions/{id}`: None leaves a setting as it is."""

    type: Literal["SessionSettingsChanged"] = "SessionSettingsChanged"
    title: str | None = None
    model_id: str | None = None
    permission_level: PermissionLevel | None = None


class SessionArchived(DomainEvent):
    type: Literal["SessionArchived"] = "SessionArchived"


class SessionUnarchived(DomainEvent):
    type: Literal["SessionUnarchived"] = "SessionUnarchived"


class SessionDeleted(DomainEvent):
    """That session only: its descendants stay, unreachable from any listing."""

    type: Literal["SessionDeleted"] = "SessionDeleted"


class SessionPromoted(DomainEvent):
    """A side task became a NORMAL session, root of its own tree; its descendants follow."""

    type: Literal["SessionPromoted"] = "SessionPromoted"
    previous_parent_session_id: UUID
    previous_root_session_id: UUID


class SessionRead(DomainEvent):
    """The user read the session: turns that ended before this are no longer unread."""

    type: Literal["SessionRead"] = "SessionRead"


class SessionTreeStatusChanged(DomainEvent):
    """On a root's stream: what its descendants (side tasks at any depth, their subagents;
    archived subtrees and deleted sessions' subtrees left out) add up to now."""

    type: Literal["SessionTreeStatusChanged"] = "SessionTreeStatusChanged"
    tree_running: bool
    tree_unread: bool
    pending_approvals: int = 0
    pending_questions: int = 0


SESSION_EVENTS = (
    SideSessionCreated,
    SessionForked,
    SessionSettingsChanged,
    SessionArchived,
    SessionUnarchived,
    SessionDeleted,
    SessionPromoted,
    SessionRead,
    SessionTreeStatusChanged,
)
