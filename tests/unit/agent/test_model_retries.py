"""A real model's 429 and 5xx: retried after the server's Retry-After, a bounded number of
times (MUSTER_MODEL_MAX_RETRIES), then a failure naming the endpoint, never the key."""

from __future__ import annotations

import time

import httpx
import pytest
from muster_agent.models import ModelError, ModelRequest, build_model
from muster_agent.models.endpoint import NamingEndpoint, public_url
from muster_agent.models.openai_provider import OpenAIModel
from muster_runtime.process.settings import Settings

KEY = "sk-test-SECRET-0123456789abcdef"
BASE = "http://llm.test/v1"
OK = {
    "id": "c", "object": "chat.completion", "created": 1, "model": "m",
    "choices": [{"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": "fine"}}],
    "usage": {"prompt_tokens": 3, "completion_tokens": 2, "total_tokens": 5},
}


class Flaky:
    """Answers `failures` (status, Retry-After) first, then OK; keeps when each call came."""

    def __init__(self, *failures: tuple[int, str | None]) -> None:
        self.failures, self.times = list(failures), list[float]()

    async def __call__(self, request: httpx.Request) -> httpx.Response:
        self.times.append(time.monotonic())
        if self.failures:
            status, retry_after = self.failures.pop(0)
            headers = {"retry-after": retry_after} if retry_after is not None else {}
            return httpx.Response(status, json={"error": {"message": f"busy, key {KEY}"}}, headers=headers)
        return httpx.Response(200, json=OK)


def wrapped(server: Flaky, retries: int) -> NamingEndpoint:
    client = httpx.AsyncClient(transport=httpx.MockTransport(server))
    # A plain JSON answer: this test is about retries, not streaming.
    inner = OpenAIModel(model="m", base_url=BASE, api_key=KEY, max_retries=retries, http_client=client, stream=False)
    return NamingEndpoint(inner, public_url(BASE), retries)


def request() -> ModelRequest:
    return ModelRequest(session_id="s", model="", messages=[{"role": "user", "content": "hi"}], tools=[])


async def test_429_and_5xx_are_retried_after_the_servers_retry_after_then_answer() -> None:
    server = Flaky((429, "0.3"), (503, "0.2"), (502, None))
    reply = await wrapped(server, retries=3).complete(request())
    assert reply.content == "fine" and len(server.times) == 4
    gaps = [b - a for a, b in zip(server.times, server.times[1:], strict=False)]
    assert gaps[0] >= 0.3 and gaps[1] >= 0.2  # the server's Retry-After, honoured


async def test_the_last_failure_names_the_endpoint_and_the_attempts_never_the_key() -> None:
    server = Flaky(*[(503, "0.01")] * 5)
    with pytest.raises(ModelError) as failed:
        await wrapped(server, retries=2).complete(request())
    assert len(server.times) == 3
    text = str(failed.value)
    assert text.startswith(f"model endpoint {BASE} failed after 3 attempts: model API error (HTTP 503)")
    assert KEY not in text and "SECRET" not in text


async def test_a_refusal_is_not_retried_and_still_names_the_endpoint() -> None:
    server = Flaky((400, None))
    with pytest.raises(ModelError, match=f"^model endpoint {BASE} failed: model API error \\(HTTP 400\\)"):
        await wrapped(server, retries=3).complete(request())
    assert len(server.times) == 1


def test_the_endpoint_shown_drops_credentials_and_the_retries_are_a_setting() -> None:
    assert public_url("https://user:pw@llm.example:8443/v1?key=x#f") == "https://llm.example:8443/v1"
    settings = Settings.from_environ({"MUSTER_MODEL_MAX_RETRIES": "5", "MUSTER_OPENAI_BASE_URL": BASE})
    model = build_model("openai", settings)
    assert isinstance(model, NamingEndpoint) and model.max_retries == 5
    assert isinstance(model.inner, OpenAIModel) and model.inner._max_retries == 5
    assert Settings.from_environ({}).model_max_retries == 3
