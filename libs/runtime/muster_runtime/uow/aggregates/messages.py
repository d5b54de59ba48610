"""A stored message and a session's latest compaction, as a fork or a summary reads them."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal
from uuid import UUID


def _uuid(value: Any) -> UUID | None:
    # The in-memory compaction row keeps ids as JSON strings; PostgreSQL gives UUIDs.
    return None if value is None else value if isinstance(value, UUID) else UUID(str(value))


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
