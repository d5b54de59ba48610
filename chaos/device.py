"""A user's LOCAL client under chaos: it says `hello {localTools: true}`, runs each
`tool_request` in its own directory (once per requestId: a repeat gets the first result
again), and drops its socket at seeded random moments, reconnecting at once (a gateway
kill drops it too), sometimes right after running a tool and before answering. What it
ran is kept for the checks: no request may run twice."""

from __future__ import annotations

import asyncio
import contextlib
import json
import random
from collections import Counter
from pathlib import Path
from typing import Any

import websockets
from muster_agent.tools.registry import run_local_tool
from muster_agent.tools.workspace import Workspace


class Device:
    def __init__(self, ws_url: str, token: str, directory: Path, seed: str) -> None:
        self.url = f"{ws_url}?token={token}"
        self.directory = directory
        self.rng = random.Random(seed)
        self.runs: Counter[str] = Counter()  # requestId → times the tool ran here
        self.received: Counter[str] = Counter()  # requestId → times it was sent to us
        self.results: dict[str, dict[str, Any]] = {}
        # One run per requestId, outliving the connection that asked: a drop while the tool
        # runs (its thread cannot be stopped) must not make the resent request run it again.
        self._running: dict[str, asyncio.Task[Any]] = {}
        self.sessions: dict[str, str] = {}  # requestId → sessionId
        self.connections = 0
        self.drops = 0
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self.directory.mkdir(parents=True, exist_ok=True)
        self._task = asyncio.create_task(self._run())

    async def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
        await asyncio.gather(*self._running.values(), return_exceptions=True)

    async def _run(self) -> None:
        while True:
            try:
                async with websockets.connect(self.url, max_size=None) as ws:
                    self.connections += 1
                    await ws.send(json.dumps({"type": "hello", "id": "hello", "data": {"localTools": True}}))
                    await asyncio.wait_for(self._serve(ws), timeout=self.rng.uniform(2.0, 8.0))
            except TimeoutError:
                self.drops += 1  # our own drop: the connection's time was up
            except (OSError, websockets.WebSocketException):
                # Refused or cut handshakes too (a gateway restarting answers 503 or closes
                # mid-handshake): a device whose loop died would leave its user's LOCAL
                # sessions waiting for ever (found by the soak).
                pass
            await asyncio.sleep(0.2)

    async def _serve(self, ws: Any) -> None:
        async for raw in ws:
            frame = json.loads(raw)
            if frame.get("type") != "tool_request":
                continue
            request = frame["data"]
            request_id = str(request["requestId"])
            self.received[request_id] += 1
            self.sessions[request_id] = str(frame["sessionId"])
            if request_id not in self.results:
                first = request_id not in self._running
                if first:
                    self.runs[request_id] += 1
                    self._running[request_id] = asyncio.create_task(
                        run_local_tool(Workspace(self.directory), request["name"], request["arguments"])
                    )
                self.results[request_id] = dict(await asyncio.shield(self._running[request_id]))
                if first and self.rng.random() < 0.3:
                    self.drops += 1  # gone between running the tool and answering: sent again later
                    return
            with contextlib.suppress(websockets.ConnectionClosed):
                answer = {"requestId": request_id, "result": self.results[request_id]}
                await ws.send(
                    json.dumps(
                        {
                            "type": "tool_result",
                            "id": request_id,
                            "sessionId": frame["sessionId"],
                            "data": answer,
                        }
                    )
                )
