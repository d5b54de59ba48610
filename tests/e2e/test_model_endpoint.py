"""A real model's endpoint through a running cluster (an OpenAI-compatible test server):
429 and 5xx retried after the server's Retry-After then answered, retries exhausted end the
turn FAILED naming the endpoint (never the key), the per-session token budget, and a title
made by the model."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from .conftest import free_port
from .openai_server import ChatServer, completion, tool_call
from .wsclient import Client, Rest

pytestmark = pytest.mark.e2e

KEY = "sk-test-SECRET-never-shown"
# Each call reports 15 tokens (openai_server.completion): the budget allows one call.
BUDGET = "15"


@pytest.fixture(scope="module")
def endpoint(launch: Any) -> Iterator[tuple[ChatServer, Any]]:
    replies = [completion(None, [tool_call("call_l", "list_files", "{}")]), completion("listed")]
    with ChatServer(replies, free_port()).running() as server:
        cluster = launch(
            MUSTER_MODEL="openai", MUSTER_OPENAI_BASE_URL=server.base_url, MUSTER_OPENAI_MODEL="test-model",
            MUSTER_OPENAI_API_KEY=KEY, MUSTER_MODEL_MAX_RETRIES="2", MUSTER_SESSION_TOKEN_BUDGET=BUDGET,
        )
        yield server, cluster


async def session_of(cluster: Any, content: str, **data: Any) -> tuple[Client, Rest, str]:
    client = await Client.connect(cluster.ws_url, cluster.tokens["alice"])
    rest = Rest(cluster.gateway_url, cluster.tokens["alice"])
    created = await client.ack("create_session", data={"content": content, **data})
    return client, rest, str(created["sessionId"])


async def test_429_and_503_are_retried_after_retry_after_then_the_turn_goes_on(endpoint: Any) -> None:
    server, cluster = endpoint
    server.fail(429, "1")
    server.fail(503, "0.5")
    client, rest, sid = await session_of(cluster, "list the files\nplease")
    try:
        # The first call's two failures are retried; the second call is past the budget.
        assert await client.wait_phase(sid) == "FAILED"
        # The title is recorded once the turn's loop has stopped (ADR 0040): after the phase.
        await client.wait_for(lambda: any(e["type"] == "session_updated" for e in client.events[sid]))
        session = await rest.json(f"/v1/sessions/{sid}")
        messages = [m["role"] for m in await rest.messages(sid)]
    finally:
        await client.close()
        await rest.close()
    first, second, third = server.times[:3]
    assert second - first >= 1.0 and third - second >= 0.5  # the server's Retry-After, honoured
    assert len(server.times) == 3  # then no call: the budget is spent
    assert messages == ["USER", "ASSISTANT", "TOOL"]
    assert session["error"] == f"token budget spent: the session used 15 of its {BUDGET} tokens"
    assert session["usage"] == {"promptTokens": 10, "completionTokens": 5, "totalTokens": 15}
    # The title was asked of the model and recorded.
    assert session["title"] == server.title
    assert any(t["messages"][-1]["content"].startswith("list the files") for t in server.titles)


async def test_retries_exhausted_fail_the_turn_naming_the_endpoint_never_the_key(endpoint: Any) -> None:
    server, cluster = endpoint
    before = len(server.times)
    server.fail(503, "0.2", times=3)
    client, rest, sid = await session_of(cluster, "anything", title="mine")
    try:
        assert await client.wait_phase(sid) == "FAILED"
        session = await rest.json(f"/v1/sessions/{sid}")
    finally:
        await client.close()
        await rest.close()
    assert len(server.times) - before == 3  # one call and its two retries (MUSTER_MODEL_MAX_RETRIES)
    error = session["error"]
    assert error.startswith(f"model endpoint {server.base_url} failed after 3 attempts: model API error (HTTP 503)")
    assert KEY not in error and "SECRET" not in error
    assert session["title"] == "mine"  # a title the user gave is never replaced
