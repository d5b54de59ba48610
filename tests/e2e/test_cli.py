"""The newcomer's path: `muster chat` against a running system, and Ctrl-C on it all."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import time

import httpx
import psutil
import pytest

from .conftest import MUSTER, Launch, Launcher
from .wsclient import call, script

pytestmark = pytest.mark.e2e


async def test_chat_cli_completes_a_scripted_turn(cluster: Launcher) -> None:
    message = script({"tool_calls": [call("write_file", path="cli.txt", content="from the cli")]}, {"content": "cli done"})
    proc = await asyncio.create_subprocess_exec(
        str(MUSTER), "chat", "--url", cluster.gateway_url, "--token", cluster.tokens["alice"], message,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT,
    )
    output, _ = await asyncio.wait_for(proc.communicate(), 60)
    text = output.decode()
    assert proc.returncode == 0, text
    assert "cli done" in text and "COMPLETED" in text and "write_file" in text
    session_id = next(line.split(": ", 1)[1] for line in text.splitlines() if line.startswith("session: "))
    assert (cluster.data_dir / "workspaces" / session_id / "cli.txt").read_text() == "from the cli"


def test_ctrl_c_to_the_process_group_leaves_nothing_behind(launch: Launch) -> None:
    launcher = launch()
    assert launcher.proc is not None
    members = launcher.descendants()
    assert len(members) >= 6  # postgres, broker, four services
    started = time.monotonic()
    os.killpg(launcher.pid, signal.SIGINT)  # what a terminal does on Ctrl-C
    launcher.proc.wait(20)
    assert time.monotonic() - started < 20
    leftovers = launcher.leftovers(members, grace=max(0.0, 20 - (time.monotonic() - started)))
    assert leftovers == [], leftovers
    assert not [p for p in members if p.is_running() and p.status() != psutil.STATUS_ZOMBIE]
    assert subprocess.run(["pgrep", "-g", str(launcher.pid)], capture_output=True, check=False).returncode == 1


async def test_chat_cli_starts_a_forked_side_task(cluster: Launcher) -> None:
    async def chat(*args: str) -> str:
        proc = await asyncio.create_subprocess_exec(
            str(MUSTER), "chat", "--url", cluster.gateway_url, "--token", cluster.tokens["alice"], *args,
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT,
        )
        output, _ = await asyncio.wait_for(proc.communicate(), 60)
        assert proc.returncode == 0, output.decode()
        text = output.decode()
        return next(line.split(": ", 1)[1] for line in text.splitlines() if line.startswith("session: "))

    main = await chat("the main question")
    side = await chat("--side-of", main, "--mode", "fork", "a side question")
    async with httpx.AsyncClient(base_url=cluster.gateway_url,
                                 headers={"Authorization": f"Bearer {cluster.tokens['alice']}"}) as http:
        body = (await http.get(f"/v1/sessions/{side}/context")).json()
    users = [m["content"] for m in body["messages"] if m["role"] == "user"]
    assert users == ["the main question", "a side question"]


async def test_chat_cli_prints_the_answer_as_it_streams(cluster: Launcher) -> None:
    answer = "streamed to the terminal piece by piece"
    message = script({"content": answer, "stream": {"chunk": 3, "delay_ms": 100}})
    proc = await asyncio.create_subprocess_exec(
        str(MUSTER), "chat", "--url", cluster.gateway_url, "--token", cluster.tokens["alice"], message,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT,
    )
    assert proc.stdout is not None
    seen = b""
    async with asyncio.timeout(60):
        while b"assistant: " not in seen:
            piece = await proc.stdout.read(64)
            assert piece, seen
            seen += piece
        # The first pieces are on screen while the model is still streaming the rest.
        assert answer.encode() not in seen.split(b"assistant: ", 1)[1]
        rest, _ = await proc.communicate()
    text = (seen + rest).decode()
    assert proc.returncode == 0, text
    # Once in the echoed script, once streamed: the durable message does not repeat it.
    assert text.count(answer) == 2 and f"assistant: {answer}\n" in text and "COMPLETED" in text
