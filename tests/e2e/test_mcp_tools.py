"""MCP servers as tool sources through a running cluster (issue 40 item 5): an agent type
of a test agents.toml uses the stdio test server; a scripted turn calls both of its tools,
the server is killed in the middle of the slow one, the model gets a clear error and the
turn goes on; `/context` shows the MCP tools offered; a subagent calls them in the worker;
after the cluster stops, no server process is left."""

from __future__ import annotations

import json
import os
import signal
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from tests.mcp.support import agents_toml, calls_made, server_pids, wait_for

from .wsclient import Client, Rest, call, script

if TYPE_CHECKING:
    from .conftest import Launch, Launcher

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    base = tmp_path_factory.mktemp("mcp")
    return {"agents": agents_toml(base / "agents.toml"), "calls": base / "calls.log", "started": base / "slow.pid"}


@pytest.fixture(scope="module")
def mcluster(launch: Launch, files: dict[str, Path]) -> Iterator[Launcher]:
    launcher = launch(
        MUSTER_AGENTS_FILE=str(files["agents"]),
        MCP_TEST_CALLS=str(files["calls"]),
        MCP_TEST_SLOW_STARTED=str(files["started"]),
    )
    yield launcher
    if launcher.proc is not None and launcher.proc.poll() is None:
        launcher.stop()


@pytest.fixture
async def client(mcluster: Launcher) -> AsyncIterator[Client]:
    c = await Client.connect(mcluster.ws_url, mcluster.tokens["alice"])
    yield c
    await c.close()


@pytest.fixture
async def rest(mcluster: Launcher) -> AsyncIterator[Rest]:
    r = Rest(mcluster.gateway_url, mcluster.tokens["alice"])
    yield r
    await r.close()


async def test_mcp_tools_are_offered_called_recorded_and_survive_a_killed_server(
    mcluster: Launcher, client: Client, rest: Rest, files: dict[str, Path]
) -> None:
    content = script(
        {"tool_calls": [call("tests__echo", text="hello", times=2)]},
        {"tool_calls": [call("tests__slow", seconds=120)]},
        {"tool_calls": [call("tests__echo", times="bad")]},
        {"content": "went on"},
    )
    sid = str((await client.ack("create_session", data={"content": content, "agentType": "mcp"}))["sessionId"])
    await wait_for(files["started"].exists, 120)
    os.kill(int(files["started"].read_text()), signal.SIGKILL)  # the server dies mid-call
    assert await client.wait_phase(sid, timeout=120) == "COMPLETED"

    history = await rest.messages(sid)
    assert [m["role"] for m in history] == ["USER", *["ASSISTANT", "TOOL"] * 3, "ASSISTANT"]
    assert history[1]["toolCalls"][0]["function"]["name"] == "tests__echo"
    echo, killed, invalid = (json.loads(m["content"]) for m in history if m["role"] == "TOOL")
    assert echo == {"success": True, "content": "hello hello", "structured_content": {"result": "hello hello"}}
    assert killed["success"] is False and "closed the connection during the call" in killed["error"]
    assert invalid == {"success": False, "error": "invalid arguments for tests__echo: 'text' is a required property"}
    assert history[-1]["content"] == "went on"
    assert calls_made(files["calls"]) == ["echo hello", "slow 120.0"]  # the killed call not repeated

    context = await rest.json(f"/v1/sessions/{sid}/context")
    names = [tool["function"]["name"] for tool in context["tools"]]
    assert names == ["read_file", "tests__echo", "tests__slow"]


async def test_a_subagent_calls_mcp_tools_in_the_worker(client: Client, rest: Rest, files: dict[str, Path]) -> None:
    child = script({"tool_calls": [call("tests__echo", text="from the child")]}, {"content": "child done"})
    parent = script({"tool_calls": [call("delegate", agent_type="mcp", task=child)]}, {"content": "parent done"})
    sid = str((await client.ack("create_session", data={"content": parent}))["sessionId"])
    assert await client.wait_phase(sid, timeout=120) == "COMPLETED"
    history = await rest.messages(sid)
    delegated = json.loads(next(m["content"] for m in history if m["role"] == "TOOL"))
    assert (delegated["success"], delegated["result"]) == (True, "child done")
    child_history = await rest.messages(delegated["child_session_id"])
    (result,) = (json.loads(m["content"]) for m in child_history if m["role"] == "TOOL")
    assert result == {"success": True, "content": "from the child", "structured_content": {"result": "from the child"}}
    assert calls_made(files["calls"])[-1] == "echo from the child"


def test_no_server_process_outlives_the_cluster(mcluster: Launcher, files: dict[str, Path]) -> None:
    assert server_pids(files["calls"])  # the harness's and the gateway's servers run
    mcluster.stop()
    assert server_pids(files["calls"]) == set()
