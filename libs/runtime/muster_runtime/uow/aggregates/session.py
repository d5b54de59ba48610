"""A session as a decision reads it (`sessions`)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any
from uuid import UUID

from muster_contracts.events import ExecutionMode, PermissionLevel, Phase, SessionType

from muster_runtime.uow import phases


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
