"""Agent definitions, loaded from a TOML file (MUSTER_AGENTS_FILE, else the built-in one)."""

from __future__ import annotations

import tomllib
from dataclasses import dataclass, replace
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
    network: bool = False  # run_command may reach the network (`network = true` in agents.toml)
    description: str = ""  # what the agent is for, as delegating agents are told
    # Built by the registry from all its definitions (`delegation_hints`): the system
    # prompt's part on delegation, and the agent types `delegate`'s schema enumerates.
    delegation_hints: str = ""
    delegate_types: tuple[str, ...] = ()

    def tools_for(self, session_type: str) -> tuple[str, ...]:
        if session_type == "SUBAGENT":
            return tuple(t for t in self.tools if t not in NOT_FOR_SUBAGENTS)
        return self.tools


class UnknownAgentType(KeyError):
    pass


class AgentRegistry:
    def __init__(self, definitions: dict[str, AgentDefinition]):
        listed = [definitions[name] for name in sorted(definitions)]
        self._definitions = {
            name: _with_hints(definition, listed) for name, definition in definitions.items()
        }

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
        network=bool(spec.get("network", False)),
        description=str(spec.get("description", "")).strip(),
    )


def _summary(agent: AgentDefinition) -> str:
    """The agent's description, else its prompt's first line."""
    lines = (agent.description or agent.system_prompt).strip().splitlines()
    return " ".join(lines).strip() if agent.description else (lines[0].strip() if lines else "")


FOLLOWUP_RULES = """\
`delegate` answers with a JSON result whose `child_session_id` names the subagent's session \
(its `result` is the subagent's final answer). Keep that id: `delegate_followup` with it sends \
the same subagent a further task, and it keeps its whole previous conversation.
Follow up when the new task continues, corrects or re-checks that subagent's own work: ask only \
for what changed and tell it to check only what changed, not to redo or re-scan everything.
Do not follow up for unrelated work (delegate a new task instead), on a subagent whose result \
has not arrived yet (wait for it), or with a session id that no delegate result of this \
conversation gave you."""


def delegation_hints(agent: AgentDefinition, agents: list[AgentDefinition]) -> str:
    """What an agent given `delegate` or `delegate_followup` is told about delegating: the
    agent types it can start (each with what it is for) and the follow-up rules; empty for
    an agent without either tool."""
    tools = set(agent.tools) & DELEGATION_TOOLS
    if not tools:
        return ""
    parts = ["Delegation:"]
    if "delegate" in tools:
        kinds = "\n".join(
            f"- {other.agent_type}: {_summary(other) or '(no description)'}" for other in agents
        )
        parts.append(f"`delegate` starts a subagent of one of these agent types (its `agent_type`):\n{kinds}")
    parts.append(FOLLOWUP_RULES)
    return "\n".join(parts)


def _with_hints(agent: AgentDefinition, agents: list[AgentDefinition]) -> AgentDefinition:
    types = tuple(other.agent_type for other in agents) if "delegate" in agent.tools else ()
    return replace(agent, delegation_hints=delegation_hints(agent, agents), delegate_types=types)
