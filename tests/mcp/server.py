"""The stdio MCP server of the tests, written with the SDK's FastMCP (`MCPServer` since
mcp 2): `echo` answers at once, `slow` sleeps. Every call appends a line to the file named
by `MCP_TEST_CALLS` (the tests count calls there), and `slow` writes the server's pid to
`MCP_TEST_SLOW_STARTED` when it starts, so a test can wait for that and then kill it."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

from mcp.server.mcpserver import MCPServer

server = MCPServer("muster-test")


def _log(line: str) -> None:
    calls = os.environ.get("MCP_TEST_CALLS")
    if calls:
        with open(calls, "a") as f:
            f.write(line + "\n")


@server.tool(description="Echo a text back, with how many times to repeat it.")
def echo(text: str, times: int = 1) -> str:
    _log(f"echo {text}")
    return " ".join([text] * times)


@server.tool(description="Wait a while, then say so.")
async def slow(seconds: float) -> dict[str, float]:
    _log(f"slow {seconds}")
    started = os.environ.get("MCP_TEST_SLOW_STARTED")
    if started:
        Path(started).write_text(str(os.getpid()))
    await asyncio.sleep(seconds)
    return {"slept": seconds}


if __name__ == "__main__":
    server.run("stdio")
