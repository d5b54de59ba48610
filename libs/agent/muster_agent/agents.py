"""Agent definitions, loaded from a TOML file (MUSTER_AGENTS_FILE, else the built-in one)."""

from __future__ import annotations

import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from muster_agent.mcp_tools.config import McpServerConfig, parse_servers

DELEGATION_TOOLS = frozenset({"delegate", "delegate_followup"})
# Subagents get neither delegation nor questions for the user: their parent is the handle.
NOT_FOR_SUBAGENTS = DELEGATION_TOOLS | {"ask_user"}
DEFAULT_FILE = Path(__file__).with_name("agents.toml")


@dataclass(frozen=True)
class AgentDefinition:
    agent_type: str
    system_prompt: str
    model: str
    tools: tuple[str, ...]
    max_rounds: int
    context_tokens: int | None = None  # the model's context budget; None: MUSTER_CONTEXT_TOKENS
    mcp_servers: tuple[McpServerConfig, ...] = ()  # whose tools it is offered too (mcp_tools)
    denied: frozenset[str] = frozenset()  # `deny`: also MCP tools, by their `server__tool` name

    def tools_for(self, session_type: str) -> tuple[str, ...]:
        if session_type == "SUBAGENT":
            return tuple(t for t in self.tools if t not in NOT_FOR_SUBAGENTS)
        return self.tools


class UnknownAgentType(KeyError):
    pass


class AgentRegistry:
    def __init__(self, definitions: dict[str, AgentDefinition]):
        self._definitions = definitions

    @classmethod
    def load(cls, path: Path | None = None) -> AgentRegistry:
        """The definitions of `path` (MUSTER_AGENTS_FILE, `Settings.agents_file`), else the built-in ones."""
        path = path or DEFAULT_FILE
        raw: dict[str, Any] = tomllib.loads(path.read_text())
        return cls({name: _parse(name, spec) for name, spec in raw.items()})

    def get(self, agent_type: str) -> AgentDefinition:
        try:
            return self._definitions[agent_type]
        except KeyError:
            raise UnknownAgentType(agent_type) from None

    def names(self) -> list[str]:
        return sorted(self._definitions)


def _parse(name: str, spec: dict[str, Any]) -> AgentDefinition:
    denied = set(spec.get("deny", []))
    return AgentDefinition(
        agent_type=name,
        system_prompt=str(spec.get("system_prompt", "")),
        model=str(spec.get("model", "default")),
        tools=tuple(t for t in spec.get("tools", []) if t not in denied),
        max_rounds=int(spec.get("max_rounds", 50)),
        context_tokens=int(spec["context_tokens"]) if "context_tokens" in spec else None,
        mcp_servers=parse_servers(name, spec.get("mcp_servers")),
        denied=frozenset(denied),
    )
