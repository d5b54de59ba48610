"""The MCP tools of a process against the real stdio test server (the SDK's FastMCP): the
tools listed under their model-facing names, calls and their results, schema errors that
never reach the server, a per-call timeout, a server killed mid-call (a clear error, the
call not repeated, the next call starts it again), and no process left after `close`."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
from muster_agent.agents import AgentDefinition, AgentRegistry
from muster_agent.mcp_tools.connection import ServerUnavailable
from muster_agent.mcp_tools.pool import McpTools

from tests.mcp.support import ROOT, agents_toml, alive, calls_made, server_pids, wait_for


@pytest.fixture
def files(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, Path]:
    found = {"calls": tmp_path / "calls.log", "started": tmp_path / "slow.pid"}
    monkeypatch.setenv("MCP_TEST_CALLS", str(found["calls"]))
    monkeypatch.setenv("MCP_TEST_SLOW_STARTED", str(found["started"]))
    return found


@pytest.fixture
async def mcp(files: dict[str, Path]) -> AsyncIterator[McpTools]:
    tools = McpTools(start_timeout_s=30, call_timeout_s=30)
    yield tools
    await tools.close()
    assert server_pids(files["calls"]) == set()  # no server outlives its pool


def agent(tmp_path: Path, **options: float) -> AgentDefinition:
    return AgentRegistry.load(agents_toml(tmp_path / "agents.toml", **options)).get("mcp")


async def test_the_servers_tools_are_offered_under_server__tool(mcp: McpTools, tmp_path: Path) -> None:
    schemas = await mcp.schemas(agent(tmp_path))
    assert [s["function"]["name"] for s in schemas] == ["tests__echo", "tests__slow"]
    echo = schemas[0]["function"]
    assert echo["description"].startswith("[MCP server tests, tool echo] Echo a text back")
    assert echo["parameters"]["required"] == ["text"]
    assert echo["parameters"]["properties"]["times"]["type"] == "integer"


async def test_a_call_answers_in_the_usual_shape_and_reuses_the_server(
    mcp: McpTools, tmp_path: Path, files: dict[str, Path]
) -> None:
    definition = agent(tmp_path)
    first = await mcp.call(definition, "tests__echo", json.dumps({"text": "hi", "times": 2}))
    assert first == {"success": True, "content": "hi hi", "structured_content": {"result": "hi hi"}}
    second = await mcp.call(definition, "tests__slow", json.dumps({"seconds": 0}))
    assert second == {
        "success": True,
        "content": '{\n  "slept": 0.0\n}',
        "structured_content": {"slept": 0.0},
    }
    assert calls_made(files["calls"]) == ["echo hi", "slow 0.0"]
    assert mcp.connection("mcp", definition.mcp_servers[0]).starts == 1  # one process for both


async def test_arguments_failing_the_schema_never_reach_the_server(
    mcp: McpTools, tmp_path: Path, files: dict[str, Path]
) -> None:
    definition = agent(tmp_path)
    refused = await mcp.refusal(definition, "tests__echo", json.dumps({"times": "many"}))
    assert refused == "invalid arguments for tests__echo: 'text' is a required property"
    result = await mcp.call(definition, "tests__echo", json.dumps({"text": 3}))
    assert result == {
        "success": False,
        "error": "invalid arguments for tests__echo: text: 3 is not of type 'string'",
    }
    assert await mcp.refusal(definition, "tests__nope", "{}") == "unknown tool 'tests__nope'"
    assert calls_made(files["calls"]) == []


async def test_a_call_past_its_timeout_gets_a_clear_error(mcp: McpTools, tmp_path: Path) -> None:
    definition = agent(tmp_path, timeout_s=0.5)
    result = await mcp.call(definition, "tests__slow", json.dumps({"seconds": 30}))
    assert result["success"] is False and "timed out after 0.5 s" in result["error"]
    after = await mcp.call(definition, "tests__echo", json.dumps({"text": "still here"}))
    assert after["content"] == "still here"


async def test_a_server_killed_mid_call_gives_an_error_and_the_next_call_starts_it_again(
    mcp: McpTools, tmp_path: Path, files: dict[str, Path]
) -> None:
    import asyncio

    definition = agent(tmp_path)
    call = asyncio.create_task(mcp.call(definition, "tests__slow", json.dumps({"seconds": 60})))
    await wait_for(files["started"].exists)
    pid = int(files["started"].read_text())
    os.kill(pid, signal.SIGKILL)
    result = await asyncio.wait_for(call, 30)
    assert result["success"] is False
    assert "closed the connection during the call" in result["error"] and "not repeated" in result["error"]
    again = await mcp.call(definition, "tests__echo", json.dumps({"text": "back"}))
    assert again["content"] == "back"
    assert mcp.connection("mcp", definition.mcp_servers[0]).starts == 2
    assert calls_made(files["calls"]) == ["slow 60.0", "echo back"]  # the slow call was not repeated
    assert not alive(pid)


async def test_a_server_that_cannot_start_offers_nothing_and_a_call_says_why(
    mcp: McpTools, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "broken.toml"
    path.write_text('[b]\n[b.mcp_servers.gone]\ncommand = "/nonexistent/mcp-server"\n')
    broken = AgentRegistry.load(path).get("b")
    assert await mcp.schemas(broken) == []
    path.write_text(
        '[b]\n[b.mcp_servers.http]\nurl = "http://127.0.0.1:9/mcp"\nheaders = { Authorization = "NO_SUCH_VAR" }\n'
    )
    monkeypatch.delenv("NO_SUCH_VAR", raising=False)
    assert await mcp.schemas(AgentRegistry.load(path).get("b")) == []


async def test_close_stops_the_stdio_server(tmp_path: Path, files: dict[str, Path]) -> None:
    tools = McpTools()
    definition = agent(tmp_path)
    await tools.call(definition, "tests__slow", json.dumps({"seconds": 0}))
    pid = int(files["started"].read_text())
    assert alive(pid) and server_pids(files["calls"]) == {pid}
    await tools.close()
    assert not alive(pid)
    assert await tools.schemas(definition) == []  # a closed pool starts nothing again


@pytest.fixture
def http_server(tmp_path: Path, files: dict[str, Path]) -> Iterator[str]:
    """The test server over streamable HTTP (a process of its own), wanting a bearer token."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    process = subprocess.Popen(
        [sys.executable, "-m", "tests.mcp.server", "http", str(port), "Bearer t0ken"], cwd=ROOT, env=dict(os.environ)
    )

    def listening() -> bool:
        with socket.socket() as s:
            return s.connect_ex(("127.0.0.1", port)) == 0

    try:
        deadline = time.monotonic() + 60
        while not listening():
            assert process.poll() is None and time.monotonic() < deadline, "the HTTP server did not start"
            time.sleep(0.05)
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        process.terminate()
        process.wait(10)


async def test_a_streamable_http_server_gets_its_headers_from_the_named_variables(
    mcp: McpTools, tmp_path: Path, http_server: str, files: dict[str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "http.toml"
    path.write_text(f'[h]\n[h.mcp_servers.remote]\nurl = "{http_server}"\nheaders = {{ Authorization = "REMOTE_AUTH" }}\n')
    definition = AgentRegistry.load(path).get("h")
    monkeypatch.setenv("REMOTE_AUTH", "Bearer t0ken")
    assert [s["function"]["name"] for s in await mcp.schemas(definition)] == ["remote__echo", "remote__slow"]
    result = await mcp.call(definition, "remote__echo", json.dumps({"text": "over http"}))
    assert result == {"success": True, "content": "over http", "structured_content": {"result": "over http"}}
    assert calls_made(files["calls"]) == ["echo over http"]


async def test_a_missing_or_wrong_header_variable_makes_the_server_unavailable(
    tmp_path: Path, http_server: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "http.toml"
    path.write_text(f'[h]\n[h.mcp_servers.remote]\nurl = "{http_server}"\nheaders = {{ Authorization = "REMOTE_AUTH" }}\n')
    definition = AgentRegistry.load(path).get("h")
    monkeypatch.delenv("REMOTE_AUTH", raising=False)
    connection = McpTools(start_timeout_s=30).connection("h", definition.mcp_servers[0])
    with pytest.raises(ServerUnavailable, match="needs the environment variable REMOTE_AUTH"):
        await connection.tools()
    monkeypatch.setenv("REMOTE_AUTH", "Bearer wrong")
    wrong = McpTools(start_timeout_s=30)
    try:
        assert await wrong.schemas(definition) == []
        with pytest.raises(ServerUnavailable, match="unavailable"):
            await wrong.connection("h", definition.mcp_servers[0]).tools()  # at once, no new start
    finally:
        await wrong.close()


async def test_a_server_that_died_while_idle_is_started_again_before_the_next_call(
    mcp: McpTools, tmp_path: Path, files: dict[str, Path]
) -> None:
    definition = agent(tmp_path)
    await mcp.call(definition, "tests__slow", json.dumps({"seconds": 0}))
    pid = int(files["started"].read_text())
    os.kill(pid, signal.SIGKILL)
    await wait_for(lambda: not alive(pid))
    result = await mcp.call(definition, "tests__echo", json.dumps({"text": "fresh"}))
    assert result["content"] == "fresh"  # the call was not lost to the dead process
    assert mcp.connection("mcp", definition.mcp_servers[0]).starts == 2


async def test_deny_removes_an_mcp_tool_by_its_model_facing_name(
    mcp: McpTools, tmp_path: Path, files: dict[str, Path]
) -> None:
    path = agents_toml(tmp_path / "agents.toml")
    path.write_text(path.read_text().replace('[mcp]\n', '[mcp]\ndeny = ["tests__slow"]\n'))
    definition = AgentRegistry.load(path).get("mcp")
    assert [s["function"]["name"] for s in await mcp.schemas(definition)] == ["tests__echo"]
    assert await mcp.refusal(definition, "tests__slow", '{"seconds": 0}') == "tool 'tests__slow' is not available to this agent"
    assert (await mcp.call(definition, "tests__slow", '{"seconds": 0}'))["success"] is False
    assert calls_made(files["calls"]) == []
