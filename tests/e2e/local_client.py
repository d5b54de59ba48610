"""A minimal LOCAL client for the e2e tests, over the tests' WebSocket client."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from .wsclient import Client


class LocalClient:
    """A minimal LOCAL client over the test client: `hello`, then each `tool_request` runs
    in `directory` with the server's own path rules, once per requestId."""

    def __init__(self, client: Client, directory: Path) -> None:
        self.client, self.directory = client, directory
        self.ran: list[str] = []
        self.received: list[str] = []
        self.results: dict[str, dict[str, Any]] = {}

    async def hello(self) -> None:
        assert await self.client.ack("hello", data={"localTools": True}) == {"localTools": True}

    async def serve(self, count: int) -> None:
        """Run and answer requests until `count` distinct ones have run."""
        while len(self.ran) < count:
            frame = await self.receive()
            await self.answer(frame)

    async def receive(self) -> dict[str, Any]:
        """The next `tool_request`, run here unless its requestId already ran."""
        from muster_agent.tools.registry import run_local_tool
        from muster_agent.tools.workspace import Workspace

        while True:
            frame = await self.client.next_unmatched(timeout=60)
            if frame["type"] == "tool_request":
                break
        request = frame["data"]
        self.received.append(request["requestId"])
        if request["requestId"] not in self.results:
            self.ran.append(request["requestId"])
            outcome = await run_local_tool(Workspace(self.directory), request["name"], request["arguments"])
            self.results[request["requestId"]] = dict(outcome)
        return frame

    async def answer(self, frame: dict[str, Any]) -> dict[str, Any]:
        request_id = frame["data"]["requestId"]
        return await self.client.ack("tool_result", frame["sessionId"],
                                     {"requestId": request_id, "result": self.results[request_id]})


