"""The tools an agent can call: local file tools confined to a workspace, and the
schemas of every tool including the delegation tools (which the harness implements)."""

from __future__ import annotations

from muster_agent.tools.registry import is_local_tool, run_local_tool
from muster_agent.tools.schemas import (
    ALL_TOOL_NAMES,
    DELEGATION_TOOL_NAMES,
    LOCAL_TOOL_NAMES,
    tool_schemas,
)
from muster_agent.tools.workspace import Workspace, WorkspaceError

__all__ = [
    "ALL_TOOL_NAMES",
    "DELEGATION_TOOL_NAMES",
    "LOCAL_TOOL_NAMES",
    "Workspace",
    "WorkspaceError",
    "is_local_tool",
    "run_local_tool",
    "tool_schemas",
]
