"""What decisions read, typed: a session, a wait, a queued input, a compaction.

Frozen dataclasses built from a projection row (`of`), whichever unit of work read it: the
PostgreSQL one hands `asyncpg.Record`s, the in-memory one dicts with the same column
names. The literal types are the public contract's, so nothing here can drift from it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal, cast
from uuid import UUID

from muster_contracts.events import ExecutionMode, PermissionLevel, Phase, SessionType

from muster_runtime.uow import phases

WaitKind = Literal["approval", "question", "tool"]
WaitStatus = Literal["pending", "approved", "denied", "answered", "dropped"]
InputState = Literal["QUEUED", "CONSUMED", "DROPPED"]


def _uuid(value: Any) -> UUID | None:
    # The in-memory compaction row keeps ids as JSON strings; PostgreSQL gives UUIDs.
    return None if value is None else value if isinstance(value, UUID) else UUID(str(value))


@dataclass(frozen=True)
class Session:
    session_id: UUID
    user_id: str
    session_type: SessionType
    parent_session_id: UUID | None
    root_session_id: UUID
    phase: Phase | None
    version: int
    message_count: int
    title: str | None
    agent_type: str
    model_id: str | None
    permission_level: PermissionLevel
    execution_mode: ExecutionMode
    workspace_id: UUID | None
    archived: bool
    deleted: bool
    unread: bool  # a turn ended after the user last read the session

    @classmethod
    def of(cls, row: Mapping[str, Any]) -> Session:
        ended, read = row.get("turn_ended_position"), row.get("read_position")
        return cls(
            session_id=row["session_id"],
            user_id=row["user_id"],
            session_type=row["session_type"],
            parent_session_id=row["parent_session_id"],
            root_session_id=row["root_session_id"],
            phase=row["phase"],
            version=row["version"],
            message_count=row["message_count"],
            title=row["title"],
            agent_type=row["agent_type"],
            model_id=row["model_id"],
            permission_level=row["permission_level"],
            execution_mode=row["execution_mode"],
            workspace_id=row.get("workspace_id"),
            archived=bool(row.get("archived", False)),
            deleted=bool(row.get("deleted", False)),
            unread=row["session_type"] != "SUBAGENT" and (ended or 0) > (read or 0),
        )

    @property
    def is_subagent(self) -> bool:
        return self.session_type == "SUBAGENT"

    @property
    def running(self) -> bool:
        return self.phase in phases.RUNNING_PHASES

    @property
    def waiting(self) -> bool:
        return self.phase in phases.WAITING_PHASES

    @property
    def cancellable(self) -> bool:
        return self.phase in phases.CANCELLABLE_PHASES

    @property
    def active(self) -> bool:
        return self.phase in phases.ACTIVE_PHASES

    @property
    def busy(self) -> bool:
        return self.phase in phases.BUSY_PHASES

    @property
    def workspace(self) -> UUID:
        """The workspace the session works in (its tree's, unless it names another)."""
        return self.workspace_id or self.root_session_id


@dataclass(frozen=True)
class Wait:
    """An approval, a question or a LOCAL tool request (`session_waits`)."""

    wait_id: UUID
    kind: WaitKind
    session_id: UUID
    user_id: str
    tool_call_id: str
    status: WaitStatus
    detail: Mapping[str, Any]

    @classmethod
    def of(cls, row: Mapping[str, Any]) -> Wait:
        return cls(
            wait_id=row["wait_id"],
            kind=row["kind"],
            session_id=row["session_id"],
            user_id=row["user_id"],
            tool_call_id=row["tool_call_id"],
            status=row["status"],
            detail=row["detail"],
        )

    @property
    def pending(self) -> bool:
        return self.status == "pending"


@dataclass(frozen=True)
class Input:
    """A client's message as accepted (`session_inputs`): queued until its turn starts."""

    message_id: UUID
    session_id: UUID
    content: str
    client_message_id: str | None
    state: InputState

    @classmethod
    def of(cls, row: Mapping[str, Any]) -> Input:
        return cls(
            message_id=row["message_id"],
            session_id=row["session_id"],
            content=row["content"],
            client_message_id=row["client_message_id"],
            state=cast(InputState, row["state"]),
        )


@dataclass(frozen=True)
class Message:
    """A stored message as a fork or a summary reads it."""

    message_id: UUID
    seq: int
    role: Literal["USER", "ASSISTANT", "TOOL"]
    content: str
    tool_calls: list[dict[str, Any]] | None
    tool_call_id: str | None
    discarded: bool

    @classmethod
    def of(cls, row: Mapping[str, Any]) -> Message:
        return cls(
            message_id=row["message_id"],
            seq=row["seq"],
            role=row["role"],
            content=row["content"],
            tool_calls=row["tool_calls"],
            tool_call_id=row["tool_call_id"],
            discarded=bool(row["discarded"]),
        )


@dataclass(frozen=True)
class Compaction:
    """A session's latest compaction (`compactions`)."""

    boundary_message_id: UUID
    boundary_seq: int
    summary: str
    messages_compacted: int
    tokens_before: int
    tokens_after: int
    at_seq: int

    @classmethod
    def of(cls, row: Mapping[str, Any]) -> Compaction:
        boundary = _uuid(row["boundary_message_id"])
        assert boundary is not None
        return cls(
            boundary_message_id=boundary,
            boundary_seq=row["boundary_seq"],
            summary=row["summary"],
            messages_compacted=row["messages_compacted"],
            tokens_before=row["tokens_before"],
            tokens_after=row["tokens_after"],
            at_seq=row["at_seq"],
        )
