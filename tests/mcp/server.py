"""The stdio MCP server of the tests, written with the SDK's FastMCP (`MCPServer` since
mcp 2): `echo` answers at once, `slow` sleeps. Every call appends a line to the file named
by `MCP_TEST_CALLS` (the tests count calls there), and `slow` writes the server's pid to
`MCP_TEST_SLOW_STARTED` when it starts, so a test can wait for that and then kill it."""

from __future__ import annotations

import asyncio
import os
import sys
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
        Path(f"{started}.tmp").write_text(str(os.getpid()))
        os.replace(f"{started}.tmp", started)  # whole, for a reader that waits for it
    await asyncio.sleep(seconds)
    return {"slept": seconds}


def _http(port: int, authorization: str) -> None:
    """Serve streamable HTTP on 127.0.0.1:`port`, answering 401 to a request whose
    `Authorization` header is not `authorization`."""
    import uvicorn
    from starlette.types import ASGIApp, Receive, Scope, Send

    app: ASGIApp = server.streamable_http_app()

    async def guarded(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and dict(scope["headers"]).get(b"authorization") != authorization.encode():
            await send({"type": "http.response.start", "status": 401, "headers": []})
            await send({"type": "http.response.body", "body": b"unauthorized"})
            return
        await app(scope, receive, send)

    uvicorn.run(guarded, host="127.0.0.1", port=port, log_level="warning")


if __name__ == "__main__":
    if sys.argv[1:2] == ["http"]:
        _http(int(sys.argv[2]), sys.argv[3])
    else:
        server.run("stdio")
