"""An OpenAI-compatible chat-completions server for tests, on its own thread: it keeps
every request body as received and answers from a script of replies chosen by how many
assistant messages the request already holds (so a retried request gets the same answer).

A session's title request (muster's title prompt) is answered with `title` and kept apart
(`titles`). `fail(status, retry_after)` queues error answers (429, 5xx, with or without a
`Retry-After`) that the next conversation requests get first; `times` are when each
conversation request arrived."""

from __future__ import annotations

import asyncio
import json
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import uvicorn
from muster_agent.titles import TITLE_PROMPT
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
        self.times: list[float] = []
        self.titles: list[dict[str, Any]] = []
        self.title = "Title from the model"
        self._failures: list[tuple[int, str | None]] = []
        app = Starlette(routes=[Route("/v1/chat/completions", self._complete, methods=["POST"])])
        self._server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning"))

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def requests(self) -> list[dict[str, Any]]:
        return [json.loads(body) for body in list(self.bodies)]

    def fail(self, status: int, retry_after: str | None = None, times: int = 1) -> None:
        self._failures.extend([(status, retry_after)] * times)

    async def _complete(self, request: Request) -> JSONResponse:
        body = await request.body()
        messages = json.loads(body)["messages"]
        if messages and messages[0].get("content") == TITLE_PROMPT:
            self.titles.append(json.loads(body))
            return JSONResponse(completion(self.title))
        self.bodies.append(body)
        self.times.append(time.monotonic())
        if self._failures:
            status, retry_after = self._failures.pop(0)
            headers = {} if retry_after is None else {"Retry-After": retry_after}
            error = {"error": {"message": f"try again later ({status})", "type": "server_error"}}
            return JSONResponse(error, status_code=status, headers=headers)
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
