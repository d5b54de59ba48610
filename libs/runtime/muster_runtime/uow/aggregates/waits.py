"""What a session waits for or has queued: a wait (`session_waits`), an input (`session_inputs`)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal, cast
from uuid import UUID

WaitKind = Literal["approval", "question", "tool"]
WaitStatus = Literal["pending", "approved", "denied", "answered", "dropped"]
InputState = Literal["QUEUED", "CONSUMED", "DROPPED"]


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
