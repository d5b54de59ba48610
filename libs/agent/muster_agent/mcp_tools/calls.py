"""The loop's side of MCP tool calls (`tool_round.run_local_calls` runs them among the local
tools, in order, each after its recorded start): whether a call may be sent, and its result."""

from __future__ import annotations

from typing import Any

from muster_agent.agents import UnknownAgentType
from muster_agent.mcp_tools.config import is_mcp_name
from muster_agent.mcp_tools.pool import McpTools, Result
from muster_agent.session_store import SessionState

__all__ = ["is_mcp_name", "refusal", "run"]


def _tools(deps: Any) -> McpTools | None:
    tools: McpTools | None = getattr(deps, "mcp", None)
    return tools


async def refusal(deps: Any, state: SessionState, call: dict[str, Any]) -> str | None:
    """Why the MCP call may not be sent (no such tool for this agent, arguments failing the
    server's schema), checked before its start is recorded, so the server never sees it."""
    tools = _tools(deps)
    if tools is None:
        return f"unknown tool {call['name']!r}"
    try:
        agent = deps.agents.get(state.agent_type)
    except UnknownAgentType:
        return f"unknown tool {call['name']!r}"
    return await tools.refusal(agent, call["name"], call["arguments"])


async def run(deps: Any, state: SessionState, call: dict[str, Any]) -> Result:
    """The call's result (its start is recorded): the server's answer or a clear error."""
    tools = _tools(deps)
    if tools is None:
        return {"success": False, "error": f"unknown tool {call['name']!r}"}
    agent = deps.agents.get(state.agent_type)
    return await tools.call(agent, call["name"], call["arguments"])
