"""Agent definitions whose `mcp` agent type uses the test server (`tests/mcp/server.py`)."""

from __future__ import annotations

import asyncio
import json
import sys
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SERVER = "tests"  # the server's name in agents.toml: its tools are tests__echo, tests__slow


def agents_toml(
    path: Path, *, timeout_s: float | None = None, tools: tuple[str, ...] = ("read_file",)
) -> Path:
    """Write an agents file: the built-in types, plus `mcp` with the test server. The
    server's MCP_TEST_* variables are taken from the same names in muster's environment."""
    builtin = (ROOT / "libs/agent/muster_agent/agents.toml").read_text()
    lines = [
        builtin,
        "[mcp]",
        f"tools = {json.dumps(list(tools))}",
        'system_prompt = "You use MCP tools."',
        f"[mcp.mcp_servers.{SERVER}]",
        f"command = {json.dumps(sys.executable)}",
        'args = ["-m", "tests.mcp.server"]',
        f"cwd = {json.dumps(str(ROOT))}",
        'env = { MCP_TEST_CALLS = "MCP_TEST_CALLS", MCP_TEST_SLOW_STARTED = "MCP_TEST_SLOW_STARTED" }',
    ]
    if timeout_s is not None:
        lines.append(f"timeout_s = {timeout_s}")
    path.write_text("\n".join(lines) + "\n")
    return path


def calls_made(calls_file: Path) -> list[str]:
    return calls_file.read_text().splitlines() if calls_file.exists() else []


async def wait_for(condition: Callable[[], bool], timeout_s: float = 30.0) -> None:
    """Until `condition` holds (a file the server wrote, a process gone), checked every 10 ms."""
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError("condition not met in time")
        await asyncio.sleep(0.01)


def alive(pid: int) -> bool:
    """Whether `pid` runs (a zombie, exited but not yet reaped, counts as gone)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, IndexError):
        return False
    return state != "Z"


def server_pids(marker: Path) -> set[int]:
    """The running test servers whose environment names `marker` (a test's own file)."""
    found = set()
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                cmdline = (entry / "cmdline").read_bytes().split(b"\0")
                environ = (entry / "environ").read_bytes()
            except OSError:
                continue
            if b"tests.mcp.server" in cmdline and str(marker).encode() in environ and alive(int(entry.name)):
                found.add(int(entry.name))
    return found


__all__ = ["ROOT", "SERVER", "agents_toml", "alive", "calls_made", "server_pids", "wait_for"]
