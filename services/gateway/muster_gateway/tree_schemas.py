"""REST shapes of side tasks, search, session management and the model context."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from muster_gateway.protocol import PermissionLevel, Text, Title


class SideTask(BaseModel):
    sessionId: str
    title: str | None
    parentSessionId: str
    rootSessionId: str
    modelId: str | None
    permissionLevel: PermissionLevel
    contextMode: Literal["none", "summary", "fork"] | None
    phase: str | None
    unread: bool
    createdAt: str
    updatedAt: str


class SideTaskList(BaseModel):
    items: list[SideTask]


class SearchHit(BaseModel):
    sessionId: str
    sessionType: Literal["NORMAL", "SIDE_TASK"]
    title: str | None
    parentSessionId: str | None
    rootSessionId: str
    messageId: str
    seq: int
    snippet: str


class SearchResults(BaseModel):
    items: list[SearchHit]


class SessionPatch(BaseModel):
    """Absent fields are left as they are."""

    model_config = ConfigDict(strict=True, extra="forbid")
    title: Title | None = None
    modelId: Text | None = None
    permissionLevel: PermissionLevel | None = None


class ModelContext(BaseModel):
    """What the next model call of the session sends (OpenAI chat form, system apart)."""

    system: str
    messages: list[dict[str, Any]] = Field(default_factory=list)
    # The tools it offers (OpenAI function tools): the agent's own, then its MCP servers'.
    tools: list[dict[str, Any]] = Field(default_factory=list)
