"""OpenAIModel against a fake HTTP transport: no network, no key needed. These answer
with plain completions, so the adapter's streaming is off here (`stream=False`,
MUSTER_OPENAI_STREAM=0); streamed answers are in test_openai_streaming."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Coroutine
from typing import Any

import httpx
import pytest
from muster_agent.models import ModelError, ModelRequest, build_model
from muster_agent.models.endpoint import NamingEndpoint
from muster_agent.models.openai_provider import OpenAIModel
from muster_agent.tools import tool_schemas
from muster_contracts.tool_arguments import parsed_arguments

KEY = "sk-test-SECRET-0123456789abcdef"
BASE = "http://llm.test/v1"
Handler = Callable[[httpx.Request], Coroutine[Any, Any, httpx.Response]]


def completion(message: dict[str, Any], usage: dict[str, int] | None = None) -> dict[str, Any]:
    body: dict[str, Any] = {
        "id": "chatcmpl-1", "object": "chat.completion", "created": 1, "model": "m",
        "choices": [{"index": 0, "finish_reason": "stop", "message": message}],
    }
    if usage is not None:
        body["usage"] = usage
    return body


class FakeServer:
    def __init__(self, status: int = 200, body: Any = None) -> None:
        self.requests: list[httpx.Request] = []
        self.status, self.body = status, body

    async def __call__(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        return httpx.Response(self.status, json=self.body)

    def sent(self) -> dict[str, Any]:
        return json.loads(self.requests[-1].content)  # type: ignore[no-any-return]


def model(handler: Handler, **kwargs: Any) -> OpenAIModel:
    settings: dict[str, Any] = {"model": "test-model", "base_url": BASE, "api_key": KEY,
                                "max_retries": 0, "stream": False}
    settings.update(kwargs)
    client = httpx.AsyncClient(transport=httpx.MockTransport(handler))
    return OpenAIModel(http_client=client, **settings)


def request(model_name: str = "", tools: list[dict[str, Any]] | None = None) -> ModelRequest:
    return ModelRequest(
        session_id="s1", model=model_name,
        messages=[{"role": "system", "content": "sys"}, {"role": "user", "content": "hi"}],
        tools=tools or [],
    )


async def test_sends_messages_tools_model_and_key_and_converts_the_reply() -> None:
    server = FakeServer(body=completion(
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "call_1", "type": "function",
             "function": {"name": "read_file", "arguments": '{"path": "a.txt"}'}},
            {"id": "call_2", "type": "function",
             "function": {"name": "write_file", "arguments": '{"path": '}},
        ]},
        {"prompt_tokens": 11, "completion_tokens": 7, "total_tokens": 18},
    ))
    tools = tool_schemas(["read_file", "write_file"])
    reply = await model(server).complete(request(tools=tools))

    sent = server.requests[0]
    assert str(sent.url) == f"{BASE}/chat/completions"
    assert sent.headers["authorization"] == f"Bearer {KEY}"
    body = server.sent()
    assert body["model"] == "test-model"
    assert body["messages"] == request().messages
    assert body["tools"] == tools

    assert reply.content == ""
    assert [(c.id, c.name) for c in reply.tool_calls] == [
        ("call_1", "read_file"), ("call_2", "write_file")
    ]
    assert reply.tool_calls[0].arguments == '{"path": "a.txt"}'
    assert reply.tool_calls[1].arguments == '{"path": '  # broken JSON is kept verbatim
    assert (reply.usage.prompt_tokens, reply.usage.total_tokens) == (11, 18)


async def test_plain_answer_without_tools_or_usage() -> None:
    server = FakeServer(body=completion({"role": "assistant", "content": "Hello!"}))
    reply = await model(server).complete(request())
    assert "tools" not in server.sent()  # some servers reject "tools": []
    assert (reply.content, reply.tool_calls, reply.usage.total_tokens) == ("Hello!", (), 0)


async def test_request_model_overrides_the_configured_default() -> None:
    server = FakeServer(body=completion({"role": "assistant", "content": "x"}))
    provider = model(server)
    await provider.complete(request("gpt-special"))
    assert server.sent()["model"] == "gpt-special"
    await provider.complete(request("default"))
    assert server.sent()["model"] == "test-model"
    with pytest.raises(ModelError, match="MUSTER_OPENAI_MODEL"):
        await model(server, model=None).complete(request())


def test_parsed_arguments() -> None:
    assert parsed_arguments('{"b": 1, "a": 2}') == {"b": 1, "a": 2}
    assert list(parsed_arguments('{"b": 1, "a": 2}') or {}) == ["b", "a"]
    assert parsed_arguments("") == {} and parsed_arguments("  ") == {}
    assert parsed_arguments("[1]") is None and parsed_arguments("{oops") is None


@pytest.mark.parametrize("status", [400, 401, 429, 500])
async def test_api_errors_become_model_errors_without_the_key(status: int) -> None:
    body = {"error": {"message": f"Incorrect API key provided: {KEY}. Also sk-abc***wxyz.",
                      "type": "invalid_request_error"}}
    with pytest.raises(ModelError) as info:
        await model(FakeServer(status, body)).complete(request())
    text = str(info.value)
    assert f"HTTP {status}" in text
    assert KEY not in text and "SECRET" not in text and "sk-abc" not in text
    assert "Incorrect API key provided" in text
    assert info.value.__cause__ is None and info.value.__suppress_context__


async def test_unreachable_server_names_the_url_but_not_its_credentials() -> None:
    async def refuse(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("connection refused", request=request)

    provider = model(refuse, base_url="http://user:hunter2@llm.test:8000/v1")
    with pytest.raises(ModelError) as info:
        await provider.complete(request())
    assert str(info.value) == "could not reach model API at http://llm.test:8000/v1"


async def test_an_in_flight_call_is_cancellable() -> None:
    started = asyncio.Event()

    async def hang(request: httpx.Request) -> httpx.Response:
        started.set()
        await asyncio.sleep(60)
        raise AssertionError("not reached")

    call = asyncio.create_task(model(hang).complete(request()))
    await asyncio.wait_for(started.wait(), 5)
    call.cancel()
    with pytest.raises(asyncio.CancelledError):
        await call


async def test_no_choices_is_a_model_error() -> None:
    body = completion({"role": "assistant", "content": "x"})
    body["choices"] = []
    with pytest.raises(ModelError, match="no choices"):
        await model(FakeServer(body=body)).complete(request())


async def test_configuration_from_env_and_lazy_client(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "MUSTER_OPENAI_API_KEY"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("MUSTER_OPENAI_BASE_URL", BASE)
    monkeypatch.setenv("MUSTER_OPENAI_MODEL", "env-model")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-fallback-key")
    monkeypatch.setenv("MUSTER_OPENAI_STREAM", "0")
    wrapped = build_model("openai")
    assert isinstance(wrapped, NamingEndpoint) and wrapped.endpoint == BASE  # failures name it
    provider = wrapped.inner
    assert isinstance(provider, OpenAIModel)
    assert provider._client is None  # nothing built, no key checked, until the first call

    server = FakeServer(body=completion({"role": "assistant", "content": "x"}))
    env_model = OpenAIModel.from_env(
        http_client=httpx.AsyncClient(transport=httpx.MockTransport(server)), max_retries=0
    )
    await env_model.complete(request())
    assert server.sent()["model"] == "env-model"
    assert server.requests[0].headers["authorization"] == "Bearer sk-fallback-key"
    monkeypatch.setenv("MUSTER_OPENAI_API_KEY", "sk-muster-key")
    assert OpenAIModel.from_env()._api_key == "sk-muster-key"  # MUSTER_* wins
    await env_model.aclose()


async def test_a_lone_surrogate_in_the_reply_becomes_a_replacement_character() -> None:
    # JSON may escape half a surrogate pair ("\udc00"); UTF-8 and jsonb cannot hold it, so
    # the record of the reply would fail the turn.
    body = completion({"role": "assistant", "content": "ok \udc00 done", "tool_calls": [
        {"id": "call_1", "type": "function", "function": {"name": "write_file", "arguments": '{"content": "\ud800"}'}},
    ]})

    async def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, content=json.dumps(body).encode(), headers={"content-type": "application/json"})

    reply = await model(handler).complete(request())
    assert reply.content == "ok \ufffd done"
    assert reply.tool_calls[0].arguments == '{"content": "\ufffd"}'
    json.dumps(reply.to_message(), ensure_ascii=False).encode()  # storable: UTF-8 holds it
