"""MCP servers in agents.toml, the names their tools get, argument validation against a
tool's JSON Schema and the shape of results: no server runs here."""

from __future__ import annotations

import re
from pathlib import Path

import mcp_types as types
import pytest
from muster_agent.agents import AgentRegistry
from muster_agent.mcp_tools.config import (
    McpConfigError,
    MissingSecret,
    is_mcp_name,
    model_name,
    parse_servers,
    server_of,
)
from muster_agent.mcp_tools.pool import McpTool, tool_result, validate
from muster_agent.tools.schemas import ALL_TOOL_NAMES

OPENAI_NAME = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")


def test_agents_toml_lists_stdio_and_http_servers(tmp_path: Path) -> None:
    path = tmp_path / "agents.toml"
    path.write_text(
        """
[ops]
tools = ["read_file"]
[ops.mcp_servers.tracker]
command = "tracker-mcp"
args = ["--stdio"]
env = { TRACKER_TOKEN = "OPS_TRACKER_TOKEN" }
timeout_s = 5
[ops.mcp_servers.search-1]
url = "https://mcp.example.com/mcp"
headers = { Authorization = "OPS_SEARCH_AUTH" }
"""
    )
    agent = AgentRegistry.load(path).get("ops")
    tracker, search = agent.mcp_servers
    assert (tracker.transport, tracker.command, tracker.args, tracker.timeout_s) == ("stdio", "tracker-mcp", ("--stdio",), 5.0)
    assert (search.transport, search.url, search.headers) == ("http", "https://mcp.example.com/mcp", (("Authorization", "OPS_SEARCH_AUTH"),))
    assert AgentRegistry.load().get("general").mcp_servers == ()  # fmt: skip


def test_secret_values_come_from_the_named_environment_variables(monkeypatch: pytest.MonkeyPatch) -> None:
    (server,) = parse_servers("ops", {"s": {"url": "http://x/mcp", "headers": {"Authorization": "OPS_AUTH"}}})
    monkeypatch.delenv("OPS_AUTH", raising=False)
    with pytest.raises(MissingSecret, match="OPS_AUTH"):
        server.resolved_headers()
    monkeypatch.setenv("OPS_AUTH", "Bearer s3cret")
    assert server.resolved_headers() == {"Authorization": "Bearer s3cret"}


@pytest.mark.parametrize(
    ("servers", "error"),
    [
        ({"a_b": {"command": "x"}}, "server name"),
        ({"a.b": {"command": "x"}}, "server name"),
        ({"s": {}}, "exactly one of"),
        ({"s": {"command": "x", "url": "http://x"}}, "exactly one of"),
        ({"s": {"command": "x", "headers": {"A": "B"}}}, "headers"),
        ({"s": {"url": "http://x", "env": {"A": "B"}}}, "args` and `env"),
        ({"s": {"url": "http://x", "headers": {"Authorization": 1}}}, "environment variable"),
        ({"s": {"command": "x", "timeout_s": 0}}, "timeout_s"),
        (["s"], "table"),
    ],
)
def test_a_bad_server_entry_is_refused_when_the_file_loads(servers: object, error: str) -> None:
    with pytest.raises(McpConfigError, match=re.escape(error)):
        parse_servers("ops", servers)


def test_model_names_are_valid_openai_function_names_and_split_back_to_their_server() -> None:
    assert model_name("tracker", "create_issue") == "tracker__create_issue"
    odd = model_name("tracker", "issues.create/v2")
    assert odd == "tracker__issues_create_v2" and OPENAI_NAME.match(odd)
    long = model_name("tracker", "x" * 100)
    assert len(long) == 64 and OPENAI_NAME.match(long) and long == model_name("tracker", "x" * 100)
    clash = model_name("tracker", "a.b", taken={"tracker__a_b"})
    assert clash != "tracker__a_b" and OPENAI_NAME.match(clash)
    for name in (odd, long, clash):
        assert is_mcp_name(name) and server_of(name) == "tracker"
    assert not any(is_mcp_name(name) for name in ALL_TOOL_NAMES)  # no built-in tool looks like one


TOOL = McpTool(
    name="tests__echo",
    server="tests",
    tool="echo",
    schema={},
    input_schema={
        "type": "object",
        "properties": {"text": {"type": "string"}, "times": {"type": "integer", "minimum": 1}},
        "required": ["text"],
    },
)


def test_arguments_are_validated_against_the_tools_schema() -> None:
    assert validate(TOOL, '{"text": "hi", "times": 2}') is None
    assert validate(TOOL, "") == "invalid arguments for tests__echo: 'text' is a required property"
    assert validate(TOOL, '{"text": "hi", "times": "2"}') == "invalid arguments for tests__echo: times: '2' is not of type 'integer'"
    assert validate(TOOL, '{"text": "hi", "times": 0}') == "invalid arguments for tests__echo: times: 0 is less than the minimum of 1"
    assert validate(TOOL, "[1]") == "arguments of tests__echo must be a JSON object"
    assert validate(TOOL, "{not json") == "arguments of tests__echo must be a JSON object"  # fmt: skip


def test_results_join_text_and_carry_structured_content_as_json() -> None:
    answer = types.CallToolResult(
        content=[types.TextContent(type="text", text="a"), types.TextContent(type="text", text="b")],
        structured_content={"n": 2},
    )
    assert tool_result(answer) == {"success": True, "content": "a\nb", "structured_content": {"n": 2}}
    failed = types.CallToolResult(content=[types.TextContent(type="text", text="no such issue")], is_error=True)
    assert tool_result(failed) == {"success": False, "error": "no such issue"}
    assert tool_result(types.CallToolResult(content=[], is_error=True))["success"] is False
