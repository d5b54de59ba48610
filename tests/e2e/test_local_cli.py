"""The LOCAL client as users run it, against the real processes: `muster chat --local DIR`
runs its turn's file tools in DIR, and `muster local-client DIR` serves a LOCAL session
(and its subagent) created elsewhere; the server's workspace never sees the files."""

from __future__ import annotations

import asyncio
import json
import signal
from pathlib import Path

import pytest

from .conftest import MUSTER, Launcher
from .wsclient import Client, Rest, call, script

pytestmark = pytest.mark.e2e


async def test_chat_local_writes_in_the_clients_directory(cluster: Launcher, tmp_path: Path) -> None:
    message = script({"tool_calls": [call("write_file", path="notes/local.md", content="on my machine")]},
                     {"tool_calls": [call("read_file", path="notes/local.md")]}, {"content": "local done"})
    (tmp_path / "dir").mkdir()
    proc = await asyncio.create_subprocess_exec(
        str(MUSTER), "chat", "--url", cluster.gateway_url, "--token", cluster.tokens["alice"],
        "--local", str(tmp_path / "dir"), "--state-dir", str(tmp_path / "state"), message,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT,
    )
    output, _ = await asyncio.wait_for(proc.communicate(), 90)
    text = output.decode()
    assert proc.returncode == 0, text
    assert "local done" in text and text.count("tool_request_served") == 2, text
    session_id = next(line.split(": ", 1)[1] for line in text.splitlines() if line.startswith("session: "))
    assert (tmp_path / "dir" / "notes" / "local.md").read_text() == "on my machine"
    assert not (cluster.data_dir / "workspaces" / session_id / "notes" / "local.md").exists()


async def test_local_client_serves_a_session_and_its_child_created_elsewhere(
    cluster: Launcher, alice: Client, alice_rest: Rest, tmp_path: Path
) -> None:
    device = tmp_path / "device"
    device.mkdir()
    proc = await asyncio.create_subprocess_exec(
        str(MUSTER), "local-client", "--url", cluster.gateway_url, "--token", cluster.tokens["alice"],
        "--state-dir", str(tmp_path / "state"), str(device),
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT,
    )
    assert proc.stdout is not None
    lines: list[str] = []

    async def read_until(marker: str) -> None:
        while not any(marker in line for line in lines):
            raw = await asyncio.wait_for(proc.stdout.readline(), 60)  # type: ignore[union-attr]
            assert raw, "\n".join(lines)
            lines.append(raw.decode().rstrip())

    try:
        await read_until("local_client_ready")
        child = script({"tool_calls": [call("write_file", path="child.txt", content="by the child")]},
                       {"content": "child done"})
        steps = script({"tool_calls": [call("write_file", path="own.txt", content="by the parent")]},
                       {"tool_calls": [call("delegate", agent_type="coder", task=child)]}, {"content": "all done"})
        created = await alice.ack("create_session", data={"content": steps, "executionMode": "LOCAL"})
        sid = str(created["sessionId"])
        assert await alice.wait_phase(sid, timeout=90) == "COMPLETED"
        await read_until("tool_request_served")
    finally:
        proc.send_signal(signal.SIGTERM)
        rest, _ = await asyncio.wait_for(proc.communicate(), 20)
        lines += rest.decode().splitlines()
    assert (device / "own.txt").read_text() == "by the parent"
    assert (device / "child.txt").read_text() == "by the child"
    assert not (cluster.data_dir / "workspaces" / sid / "own.txt").exists()
    assert sum("tool_request_served" in line for line in lines) == 2, lines
    tools = [json.loads(m["content"]) for m in await alice_rest.messages(sid) if m["role"] == "TOOL"]
    assert tools[0]["success"] is True and tools[1]["success"] is True  # own write, delegate result
