"""An OpenAI-compatible chat-completions server for tests, on its own thread: it keeps
every request body as received and answers from a script of replies chosen by how many
assistant messages the request already holds (so a retried request gets the same answer)."""

from __future__ import annotations

import asyncio
import json
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route


def tool_call(call_id: str, name: str, arguments: str) -> dict[str, Any]:
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}


def completion(content: str | None, calls: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": content}
    if calls:
        message["tool_calls"] = calls
    return {
        "id": "chatcmpl-test", "object": "chat.completion", "created": 0, "model": "test-model",
        "choices": [{"index": 0, "message": message, "finish_reason": "tool_calls" if calls else "stop"}],
        "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15},
    }


class ChatServer:
    def __init__(self, replies: list[dict[str, Any]], port: int) -> None:
        self.replies = replies
        self.port = port
        self.bodies: list[bytes] = []
        app = Starlette(routes=[Route("/v1/chat/completions", self._complete, methods=["POST"])])
        self._server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning"))

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def requests(self) -> list[dict[str, Any]]:
        return [json.loads(body) for body in list(self.bodies)]

    async def _complete(self, request: Request) -> JSONResponse:
        body = await request.body()
        self.bodies.append(body)
        messages = json.loads(body)["messages"]
        step = sum(1 for m in messages if m.get("role") == "assistant")
        return JSONResponse(self.replies[min(step, len(self.replies) - 1)])

    @contextmanager
    def running(self) -> Iterator[ChatServer]:
        thread = threading.Thread(target=asyncio.run, args=(self._server.serve(),), daemon=True)
        thread.start()
        deadline = time.monotonic() + 10
        while not self._server.started:
            if time.monotonic() > deadline or not thread.is_alive():
                raise RuntimeError("the test chat server did not start")
            time.sleep(0.01)
        try:
            yield self
        finally:
            self._server.should_exit = True
            thread.join(10)
