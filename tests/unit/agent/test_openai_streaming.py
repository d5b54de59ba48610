"""OpenAIModel streaming (ADR 0039) against a local OpenAI-compatible server playing
recorded streams in the formats of OpenAI, vLLM, llama.cpp and Ollama: text pieces told
as they arrive, parallel tool calls split across chunks, usage, every finish_reason,
errors and cut-offs mid-stream, and a cancel that closes the stream."""

from __future__ import annotations

import asyncio
import itertools
import json
import socket
from collections.abc import Iterator
from typing import Any

import pytest
from muster_agent.models import ModelError, ModelReply, ModelRequest
from muster_agent.models.openai_provider import OpenAIModel

from tests.e2e.openai_server import ChatServer, completion, tool_call

ARGS_A = '{"path": "ä/notes.txt",  "limit":3}'  # odd spacing and non-ASCII: kept byte for byte
ARGS_B = '{"path":"b.txt"}'


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture
def server() -> Iterator[ChatServer]:
    with ChatServer([], _free_port()).running() as running:
        yield running


def transcript(*data: Any, done: bool = True, delay_s: float = 0) -> dict[str, Any]:
    events = [d if isinstance(d, str) else json.dumps(d) for d in data]
    return {"transcript": [*events, "[DONE]"] if done else events, "delay_s": delay_s}


def chunk(delta: dict[str, Any] | None = None, finish: str | None = None, **extra: Any) -> dict[str, Any]:
    choices = [] if delta is None else [{"index": 0, "delta": delta, "finish_reason": finish, **extra}]
    return {"id": "c1", "object": "chat.completion.chunk", "created": 1, "model": "m", "choices": choices}


def with_usage(body: dict[str, Any], prompt: int, completion_: int) -> dict[str, Any]:
    return {**body, "usage": {"prompt_tokens": prompt, "completion_tokens": completion_,
                              "total_tokens": prompt + completion_}}


def split(text: str, *cuts: int) -> list[str]:
    bounds = [0, *cuts, len(text)]
    return [text[a:b] for a, b in itertools.pairwise(bounds)]


OPENAI = transcript(
    chunk({"role": "assistant", "content": "", "refusal": None}),
    chunk({"content": "Reading "}),
    chunk({"content": "both."}),
    chunk({"tool_calls": [{"index": 0, "id": "call_a", "type": "function",
                           "function": {"name": "read_file", "arguments": ""}}]}),
    *[chunk({"tool_calls": [{"index": 0, "function": {"arguments": p}}]}) for p in split(ARGS_A, 3, 11)[:2]],
    chunk({"tool_calls": [{"index": 1, "id": "call_b", "type": "function",
                           "function": {"name": "read_file", "arguments": ""}}]}),
    chunk({"tool_calls": [{"index": 1, "function": {"arguments": ARGS_B[:5]}}]}),
    chunk({"tool_calls": [{"index": 0, "function": {"arguments": split(ARGS_A, 3, 11)[2]}}]}),
    chunk({"tool_calls": [{"index": 1, "function": {"arguments": ARGS_B[5:]}}]}),
    chunk({}, "tool_calls"),
    with_usage(chunk(), 21, 9),
)

VLLM = transcript(
    with_usage(chunk({"role": "assistant", "content": ""}, logprobs=None, stop_reason=None), 21, 0),
    {**chunk({"content": "Reading "}), "usage": None},
    {**chunk({"content": "both."}), "usage": None},
    chunk({"tool_calls": [{"id": "chatcmpl-tool-1", "type": "function", "index": 0,
                           "function": {"name": "read_file"}}]}),
    chunk({"tool_calls": [{"index": 0, "function": {"arguments": ARGS_A[:20]}}]}),
    chunk({"tool_calls": [{"index": 0, "function": {"arguments": ARGS_A[20:]}}]}),
    chunk({"tool_calls": [{"id": "chatcmpl-tool-2", "type": "function", "index": 1,
                           "function": {"name": "read_file"}}]}),
    chunk({"tool_calls": [{"index": 1, "function": {"arguments": ARGS_B}}]}),
    chunk({"content": ""}, "tool_calls", stop_reason=None),
    with_usage(chunk(), 21, 9),
)

LLAMA_CPP = transcript(
    chunk({"content": "Reading "}),
    chunk({"content": "both."}),
    chunk({"tool_calls": [{"index": 0, "id": "Xk1", "type": "function",
                           "function": {"name": "read_file", "arguments": ARGS_A[:1]}}]}),
    chunk({"tool_calls": [{"index": 0, "function": {"arguments": ARGS_A[1:]}}]}),
    chunk({"tool_calls": [{"index": 1, "id": "Xk2", "type": "function",
                           "function": {"name": "read_file", "arguments": ARGS_B}}]}),
    {**with_usage(chunk({}, "tool_calls"), 21, 9), "timings": {"predicted_ms": 12.5}},
)

# Ollama sends each call whole, and every call of a round with index 0.
OLLAMA = transcript(
    chunk({"role": "assistant", "content": "Reading "}),
    chunk({"role": "assistant", "content": "both."}),
    chunk({"role": "assistant", "content": "", "tool_calls": [
        {"id": "call_o1", "index": 0, "type": "function", "function": {"name": "read_file", "arguments": ARGS_A}}]}),
    chunk({"role": "assistant", "content": "", "tool_calls": [
        {"id": "call_o2", "index": 0, "type": "function", "function": {"name": "read_file", "arguments": ARGS_B}}]}),
    chunk({"role": "assistant", "content": ""}, "stop"),
    with_usage(chunk(), 21, 9),
)


def model(server: ChatServer) -> OpenAIModel:
    return OpenAIModel(model="test-model", base_url=server.base_url, api_key="sk-test-KEY-0123456789", max_retries=0)


def request(pieces: list[str] | None = None) -> ModelRequest:
    return ModelRequest(
        session_id="s1", model="", messages=[{"role": "user", "content": "hi"}], tools=[],
        on_text=None if pieces is None else pieces.append,
    )


async def answer(server: ChatServer, pieces: list[str] | None) -> ModelReply:
    """The adapter's reply to `request(pieces)`, the adapter closed after it."""
    adapter = model(server)
    try:
        return await adapter.complete(request(pieces))
    finally:
        await adapter.aclose()


@pytest.mark.parametrize("recorded", [OPENAI, VLLM, LLAMA_CPP, OLLAMA], ids=["openai", "vllm", "llama.cpp", "ollama"])
async def test_parallel_calls_split_across_chunks_are_assembled_exactly(
    server: ChatServer, recorded: dict[str, Any]
) -> None:
    server.replies = [recorded]
    pieces: list[str] = []
    reply = await answer(server, pieces)
    assert pieces == ["Reading ", "both."]  # told as they arrived
    assert reply.content == "Reading both."
    assert [(c.name, c.arguments) for c in reply.tool_calls] == [("read_file", ARGS_A), ("read_file", ARGS_B)]
    assert len({c.id for c in reply.tool_calls}) == 2
    assert (reply.usage.prompt_tokens, reply.usage.completion_tokens) == (21, 9)
    sent = server.requests()[-1]
    assert sent["stream"] is True and sent["stream_options"] == {"include_usage": True}


@pytest.mark.parametrize("finish", ["stop", "length", "content_filter"])
async def test_every_finish_reason_of_a_text_answer_keeps_the_text(server: ChatServer, finish: str) -> None:
    server.replies = [transcript(chunk({"content": "Hel"}), chunk({"content": "lo"}), chunk({}, finish))]
    reply = await answer(server, [])
    assert (reply.content, reply.tool_calls) == ("Hello", ())


async def test_a_tool_call_cut_by_the_length_limit_fails_the_call(server: ChatServer) -> None:
    server.replies = [transcript(
        chunk({"tool_calls": [{"index": 0, "id": "c", "type": "function",
                               "function": {"name": "read_file", "arguments": '{"pa'}}]}),
        chunk({}, "length"),
    )]
    adapter = model(server)
    with pytest.raises(ModelError, match="length limit"):
        await adapter.complete(request())
    await adapter.aclose()


async def test_a_completion_streamed_by_the_test_server_is_the_completion(server: ChatServer) -> None:
    calls = [tool_call("call_1", "write_file", ARGS_A), tool_call("call_2", "read_file", ARGS_B)]
    server.replies = [completion("Writing.", calls)]
    reply = await answer(server, [])
    assert reply.to_message() == {"role": "assistant", "content": "Writing.", "tool_calls": calls}
    assert (reply.usage.prompt_tokens, reply.usage.completion_tokens) == (10, 5)


async def test_an_error_mid_stream_fails_the_call_without_a_partial_answer(server: ChatServer) -> None:
    server.replies = [transcript(
        chunk({"content": "Partial "}),
        {"error": {"message": "upstream overloaded (key sk-live-abcdef123456)", "type": "server_error"}},
    )]
    pieces: list[str] = []
    adapter = model(server)
    with pytest.raises(ModelError) as raised:
        await adapter.complete(request(pieces))
    await adapter.aclose()
    assert "upstream overloaded" in str(raised.value)
    assert "sk-live" not in str(raised.value)
    assert pieces == ["Partial "]


async def test_a_stream_broken_off_fails_the_call(server: ChatServer) -> None:
    server.replies = [transcript(chunk({"content": "Partial "}), chunk({"content": "answ"}), done=False)]
    adapter = model(server)
    with pytest.raises(ModelError):
        await adapter.complete(request([]))
    await adapter.aclose()


async def test_a_stream_ending_without_a_finish_reason_fails_the_call(server: ChatServer) -> None:
    server.replies = [transcript(chunk({"content": "Partial"}))]
    adapter = model(server)
    with pytest.raises(ModelError, match="ended before"):
        await adapter.complete(request([]))
    await adapter.aclose()


async def test_cancel_closes_the_stream_at_once(server: ChatServer) -> None:
    server.replies = [transcript(*[chunk({"content": "x"}) for _ in range(200)], chunk({}, "stop"), delay_s=0.05)]
    pieces: list[str] = []
    arrived = asyncio.Event()
    adapter = model(server)

    def told(text: str) -> None:
        pieces.append(text)
        if len(pieces) == 3:
            arrived.set()

    call = asyncio.create_task(adapter.complete(ModelRequest(
        session_id="s1", model="", messages=[{"role": "user", "content": "hi"}], tools=[], on_text=told)))
    await asyncio.wait_for(arrived.wait(), 10)
    call.cancel()
    with pytest.raises(asyncio.CancelledError):
        await call
    # The server sees its response closed (its generator ends) long before the 10 s the
    # whole stream takes.
    for _ in range(200):
        if server.streams_closed:
            break
        await asyncio.sleep(0.01)
    await adapter.aclose()
    assert server.streams_closed == 1 and server.streams_open == 0
    assert len(pieces) < 50


async def test_streaming_off_uses_the_plain_completion(server: ChatServer) -> None:
    server.replies = [completion("plain")]
    adapter = OpenAIModel(model="m", base_url=server.base_url, api_key="k", max_retries=0, stream=False)
    try:
        reply = await adapter.complete(request([]))
    finally:
        await adapter.aclose()
    assert reply.content == "plain"
    assert "stream" not in server.requests()[-1]


async def test_a_pair_split_across_pieces_is_joined_and_a_lone_half_replaced(server: ChatServer) -> None:
    server.replies = [transcript(
        chunk({"content": "smile \ud83d"}), chunk({"content": "\ude00 and \udc00"}),
        chunk({"tool_calls": [{"index": 0, "id": "c", "type": "function",
                               "function": {"name": "write_file", "arguments": '{"content": "\udfff"}'}}]}),
        chunk({}, "stop"),
    )]
    pieces: list[str] = []
    reply = await answer(server, pieces)
    assert reply.content == "smile \U0001f600 and \ufffd"
    assert reply.tool_calls[0].arguments == '{"content": "\ufffd"}'
    # Each piece is published on its own: its halves cannot be joined, only replaced.
    assert pieces == ["smile \ufffd", "\ufffd and \ufffd"]
