"""An OpenAI-compatible chat-completions server for tests, on its own thread: it keeps
every request body as received and answers from a script of replies chosen by how many
assistant messages the request already holds (so a retried request gets the same answer).

A session's title request (muster's title prompt) is answered with `title` and kept apart
(`titles`). `fail(status, retry_after)` queues error answers (429, 5xx, with or without a
`Retry-After`) that the next conversation requests get first; `times` are when each
conversation request arrived.

A request with `"stream": true` is answered with server-sent events: a reply given as a
completion is cut into chunks the way OpenAI streams (`sse_chunks`); a reply given as
`{"transcript": [...]}` plays those `data:` payloads verbatim (recorded streams of OpenAI,
vLLM, llama.cpp, Ollama), `delay_s` apart, and a transcript ending without `[DONE]` breaks
the connection off there."""

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
from starlette.responses import JSONResponse, Response, StreamingResponse
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


def sse_chunks(reply: dict[str, Any], piece: int = 4) -> list[dict[str, Any]]:
    """A completion as OpenAI streams it: a role chunk, the text in pieces, each tool call's
    id and name then its arguments in pieces (calls interleaved by index), the finish
    chunk, and the usage chunk without choices."""
    choice = reply["choices"][0]
    message = choice["message"]

    def chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
        return {
            "id": "chatcmpl-test", "object": "chat.completion.chunk", "created": 0, "model": "test-model",
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
        }

    chunks = [chunk({"role": "assistant", "content": ""})]
    text = message.get("content") or ""
    chunks += [chunk({"content": text[i : i + piece]}) for i in range(0, len(text), piece)]
    calls = message.get("tool_calls") or []
    for index, call in enumerate(calls):
        head = {"name": call["function"]["name"], "arguments": ""}
        chunks.append(chunk({"tool_calls": [{"index": index, "id": call["id"], "type": "function", "function": head}]}))
    longest = max((len(c["function"]["arguments"]) for c in calls), default=0)
    for start in range(0, longest, piece):
        for index, call in enumerate(calls):
            part = call["function"]["arguments"][start : start + piece]
            if part:
                chunks.append(chunk({"tool_calls": [{"index": index, "function": {"arguments": part}}]}))
    chunks.append(chunk({}, choice.get("finish_reason") or "stop"))
    if reply.get("usage"):
        chunks.append({**chunks[0], "choices": [], "usage": reply["usage"]})
    return chunks


class ChatServer:
    def __init__(self, replies: list[dict[str, Any]], port: int) -> None:
        self.replies = replies
        self.port = port
        self.bodies: list[bytes] = []
        self.times: list[float] = []
        self.titles: list[dict[str, Any]] = []
        self.title = "Title from the model"
        self._failures: list[tuple[int, str | None]] = []
        self.streams_open = 0
        self.streams_closed = 0
        app = Starlette(routes=[Route("/v1/chat/completions", self._complete, methods=["POST"])])
        self._server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning"))

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def requests(self) -> list[dict[str, Any]]:
        return [json.loads(body) for body in list(self.bodies)]

    def fail(self, status: int, retry_after: str | None = None, times: int = 1) -> None:
        self._failures.extend([(status, retry_after)] * times)

    async def _complete(self, request: Request) -> Response:
        body = await request.body()
        sent = json.loads(body)
        messages = sent["messages"]
        if messages and messages[0].get("content") == TITLE_PROMPT:
            self.titles.append(sent)
            return self._answer(sent, completion(self.title))
        self.bodies.append(body)
        self.times.append(time.monotonic())
        if self._failures:
            status, retry_after = self._failures.pop(0)
            headers = {} if retry_after is None else {"Retry-After": retry_after}
            error = {"error": {"message": f"try again later ({status})", "type": "server_error"}}
            return JSONResponse(error, status_code=status, headers=headers)
        step = sum(1 for m in messages if m.get("role") == "assistant")
        return self._answer(sent, self.replies[min(step, len(self.replies) - 1)])

    def _answer(self, sent: dict[str, Any], reply: dict[str, Any]) -> Response:
        if not sent.get("stream"):
            return JSONResponse(reply)
        events = reply["transcript"] if "transcript" in reply else [*map(json.dumps, sse_chunks(reply)), "[DONE]"]
        return StreamingResponse(self._play(events, float(reply.get("delay_s", 0))), media_type="text/event-stream")

    async def _play(self, events: list[str], delay_s: float) -> Any:
        self.streams_open += 1
        try:
            for index, data in enumerate(events):
                if index and delay_s:
                    await asyncio.sleep(delay_s)
                yield f"data: {data}\n\n".encode()
            if events and events[-1] != "[DONE]":
                raise ConnectionResetError("the transcript breaks off here")
        finally:
            self.streams_open -= 1
            self.streams_closed += 1

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
