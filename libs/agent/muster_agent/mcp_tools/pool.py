"""The MCP tools of a process: one connection per (agent type, server), the tools they
offer under their model-facing names, argument validation against each tool's JSON Schema
(`jsonschema`), and calls whose outcome is a tool result in the usual JSON shape.

The loop asks `schemas` what to offer the model, `refusal` whether a call's arguments may
be sent (before its start is recorded: a refused call never reaches the server), and `call`
to run it (after its start is recorded: a crash during the call leaves a started call,
which is never run again). `close` stops every connection (stdio servers included).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import jsonschema
import mcp_types as types
from jsonschema.exceptions import SchemaError
from muster_contracts.tool_arguments import parsed_arguments
from muster_runtime.process.settings import Settings

from muster_agent.agents import AgentDefinition
from muster_agent.mcp_tools.config import McpServerConfig, model_name
from muster_agent.mcp_tools.connection import McpConnection, ServerUnavailable

log = logging.getLogger("muster.mcp")

Result = dict[str, Any]


@dataclass(frozen=True)
class McpTool:
    """One tool as the model is offered it."""

    name: str  # model-facing: server__tool
    server: str
    tool: str  # the server's own name
    schema: dict[str, Any]  # the OpenAI function tool
    input_schema: dict[str, Any]


class McpTools:
    def __init__(self, *, start_timeout_s: float = 20.0, call_timeout_s: float = 60.0) -> None:
        self._start_timeout = start_timeout_s
        self._call_timeout = call_timeout_s
        self._connections: dict[tuple[str, str], McpConnection] = {}
        self._retired: list[McpConnection] = []  # replaced by a changed configuration
        self._closed = False

    @classmethod
    def from_settings(cls, settings: Settings) -> McpTools:
        return cls(start_timeout_s=settings.mcp_start_timeout_s, call_timeout_s=settings.mcp_call_timeout_s)

    def connection(self, agent_type: str, config: McpServerConfig) -> McpConnection:
        key = (agent_type, config.name)
        found = self._connections.get(key)
        if found is None or found.config != config:
            if found is not None:
                self._retired.append(found)
            found = McpConnection(
                config, start_timeout_s=self._start_timeout, call_timeout_s=self._call_timeout
            )
            self._connections[key] = found
        return found

    async def offered(self, agent: AgentDefinition) -> list[McpTool]:
        """The MCP tools `agent` offers now, server by server in the file's order. A server
        that cannot be reached and was never listed offers nothing (logged); one listed
        before keeps offering its tools, so a call tells the model it is down."""
        if self._closed or not agent.mcp_servers:
            return []
        listings = await asyncio.gather(*(self._listing(agent, c) for c in agent.mcp_servers))
        offered: list[McpTool] = []
        taken: set[str] = set()
        for config, tools in zip(agent.mcp_servers, listings, strict=True):
            for tool in tools:
                name = model_name(config.name, tool.name, taken)
                taken.add(name)
                if name not in agent.denied:
                    offered.append(_offer(name, config.name, tool))
        return offered

    async def schemas(self, agent: AgentDefinition) -> list[dict[str, Any]]:
        return [tool.schema for tool in await self.offered(agent)]

    async def find(self, agent: AgentDefinition, name: str) -> McpTool | None:
        return next((t for t in await self.offered(agent) if t.name == name), None)

    async def refusal(self, agent: AgentDefinition, name: str, arguments: str) -> str | None:
        """Why the call may not be sent to its server (unknown tool, arguments failing the
        tool's schema), or None."""
        if name in agent.denied:
            return f"tool {name!r} is not available to this agent"
        tool = await self.find(agent, name)
        if tool is None:
            return f"unknown tool {name!r}"
        return validate(tool, arguments)

    async def call(self, agent: AgentDefinition, name: str, arguments: str) -> Result:
        """Run one call; always a result dict, never raises for the server's failures."""
        tool = await self.find(agent, name)
        if tool is None:
            return _error(f"unknown tool {name!r}")
        invalid = validate(tool, arguments)
        if invalid is not None:
            return _error(invalid)
        config = next(c for c in agent.mcp_servers if c.name == tool.server)
        connection = self.connection(agent.agent_type, config)
        try:
            answer = await connection.call(tool.tool, parsed_arguments(arguments) or {})
        except ServerUnavailable as exc:
            return _error(str(exc))
        except TimeoutError:
            return _error(
                f"MCP tool {tool.server}.{tool.tool} timed out after {connection.call_timeout_s:g} s "
                "(it may still be running on the server); the call was not repeated"
            )
        except Exception as exc:  # a protocol error the server answered with
            return _error(f"MCP tool {tool.server}.{tool.tool} failed: {exc}")
        return tool_result(answer)

    async def close(self) -> None:
        """Stop every connection (stdio servers' processes included); later uses offer nothing."""
        self._closed = True
        connections, self._connections = [*self._connections.values(), *self._retired], {}
        self._retired = []
        await asyncio.gather(*(c.close() for c in connections), return_exceptions=True)

    async def _listing(self, agent: AgentDefinition, config: McpServerConfig) -> Sequence[types.Tool]:
        connection = self.connection(agent.agent_type, config)
        try:
            return await connection.tools()
        except ServerUnavailable as exc:
            log.warning("mcp_tools_unlisted agent_type=%s server=%s", agent.agent_type, config.name)
            log.debug("mcp_tools_unlisted reason=%s", exc)
            return []


def _offer(name: str, server: str, tool: types.Tool) -> McpTool:
    description = tool.description or tool.title or tool.name
    parameters = dict(tool.input_schema) or {"type": "object", "properties": {}}
    return McpTool(
        name=name,
        server=server,
        tool=tool.name,
        input_schema=parameters,
        schema={
            "type": "function",
            "function": {
                "name": name,
                "description": f"[MCP server {server}, tool {tool.name}] {description}",
                "parameters": parameters,
            },
        },
    )


def validate(tool: McpTool, arguments: str) -> str | None:
    """The error for the model when `arguments` (the model's JSON text) do not
    satisfy the tool's input schema; None when they do."""
    parsed = parsed_arguments(arguments)
    if parsed is None:
        return f"arguments of {tool.name} must be a JSON object"
    try:
        validator = jsonschema.validators.validator_for(tool.input_schema)(tool.input_schema)
        error = jsonschema.exceptions.best_match(validator.iter_errors(parsed))
    except SchemaError:
        return None  # the server's schema is unusable: the server validates for itself
    if error is None:
        return None
    where = "/".join(str(p) for p in error.absolute_path)
    return f"invalid arguments for {tool.name}: {f'{where}: ' if where else ''}{error.message}"


def tool_result(answer: types.CallToolResult) -> Result:
    """An MCP answer in the usual shape: text parts joined, structured content as JSON."""
    texts = [part.text for part in answer.content if isinstance(part, types.TextContent)]
    others = [part.type for part in answer.content if not isinstance(part, types.TextContent)]
    content = "\n".join(texts)
    if answer.is_error:
        return _error(content or "the MCP tool reported an error")
    result: Result = {"success": True, "content": content}
    if answer.structured_content is not None:
        result["structured_content"] = answer.structured_content
    if others:
        result["omitted_content"] = others  # images, audio, resources: not passed to the model
    return result


def _error(message: str) -> Result:
    return {"success": False, "error": message}
