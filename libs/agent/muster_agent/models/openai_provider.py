"""Real models through any OpenAI-compatible chat-completions endpoint.

Configuration comes from `Settings` (MUSTER_OPENAI_* first, then the SDK's usual
OPENAI_* names). The SDK client is created on first use so that importing this module, or
building a provider in a process that never calls it, needs no key and opens no sockets.
"""

from __future__ import annotations

import re
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import httpx
import openai
from muster_runtime.process.settings import Settings
from openai import AsyncOpenAI

from muster_agent.models.base import ModelError, ModelReply, ModelRequest, ToolCall, Usage
from muster_agent.models.streaming import ReplyAssembler

# Keyless local servers (vLLM, llama.cpp, Ollama) still need *some* key for the SDK.
_PLACEHOLDER_KEY = "EMPTY"
_DETAIL_LIMIT = 300
# Servers echo (partially masked) keys in auth errors; never pass those on.
_KEY_PATTERN = re.compile(r"\bsk-[A-Za-z0-9_\-*.]{4,}|\bBearer\s+\S+", re.IGNORECASE)


def _public_url(url: str | None) -> str:
    """The base URL without any user:password part, for error messages."""
    if not url:
        return "the default OpenAI endpoint"
    parts = urlsplit(url)
    netloc = parts.hostname or ""
    if parts.port:
        netloc += f":{parts.port}"
    return urlunsplit((parts.scheme, netloc, parts.path, "", ""))


class OpenAIModel:
    def __init__(
        self,
        *,
        model: str | None = None,
        base_url: str | None = None,
        api_key: str | None = None,
        timeout_s: float = 300.0,
        max_retries: int = 2,
        http_client: Any = None,
        stream: bool = True,
    ) -> None:
        self._model = model
        self._base_url = base_url
        self._api_key = api_key
        self._timeout_s = timeout_s
        self._max_retries = max_retries
        # Any httpx-compatible AsyncClient; tests pass one with a mock transport.
        self._http_client = http_client
        # Stream answers (SSE), telling each text piece to the request's `on_text` (ADR
        # 0039); off (MUSTER_OPENAI_STREAM=0) for a server that cannot stream.
        self._stream = stream
        self._client: AsyncOpenAI | None = None

    @classmethod
    def from_settings(cls, settings: Settings, **overrides: Any) -> OpenAIModel:
        key = settings.openai_api_key
        configured: dict[str, Any] = {
            "model": settings.openai_model,
            "base_url": settings.openai_base_url,
            "api_key": key.get_secret_value() if key is not None else None,
            "stream": settings.openai_stream,
        }
        configured.update(overrides)
        return cls(**configured)

    @classmethod
    def from_env(cls, **overrides: Any) -> OpenAIModel:
        """`from_settings` on this process's environment."""
        return cls.from_settings(Settings.from_env(), **overrides)

    def _get_client(self) -> AsyncOpenAI:
        if self._client is None:
            self._client = AsyncOpenAI(
                api_key=self._api_key or _PLACEHOLDER_KEY,
                base_url=self._base_url,
                timeout=self._timeout_s,
                max_retries=self._max_retries,
                http_client=self._http_client,
            )
        return self._client

    def _model_name(self, request: ModelRequest) -> str:
        # An agent definition may name a model; "" or "default" defers to the environment.
        if request.model and request.model != "default":
            return request.model
        if self._model:
            return self._model
        raise ModelError("no model name configured: set MUSTER_OPENAI_MODEL")

    async def complete(self, request: ModelRequest) -> ModelReply:
        # Already OpenAI chat-format dicts; the SDK's TypedDicts only describe that shape.
        extra: dict[str, Any] = {"messages": request.messages}
        if request.tools:  # some servers reject an empty tools list
            extra["tools"] = request.tools
        if self._stream:
            return await self._streamed(request, extra)
        try:
            response = await self._get_client().chat.completions.create(
                model=self._model_name(request), **extra
            )
        except openai.APIStatusError as exc:
            raise ModelError(f"model API error (HTTP {exc.status_code}): {self._detail(exc)}") from None
        except openai.APITimeoutError:
            raise ModelError(f"model API timed out ({_public_url(self._base_url)})") from None
        except openai.APIConnectionError:
            where = _public_url(self._base_url)
            raise ModelError(f"could not reach model API at {where}") from None
        except openai.OpenAIError as exc:
            raise ModelError(f"model API call failed: {self._scrub(str(exc))}") from None
        if not response.choices:
            raise ModelError("model API returned no choices")
        message = response.choices[0].message
        calls = []
        for call in message.tool_calls or ():
            function = getattr(call, "function", None)
            if function is None:
                continue  # a non-function (custom) tool call: nothing here can run it
            # The text as the model wrote it: it is recorded and sent back verbatim.
            arguments = "{}" if function.arguments is None else function.arguments
            calls.append(ToolCall(call.id, function.name, arguments))
        usage = response.usage
        return ModelReply(
            content=message.content or "",
            tool_calls=tuple(calls),
            usage=Usage(usage.prompt_tokens, usage.completion_tokens) if usage else Usage(),
        ).storable()

    async def _streamed(self, request: ModelRequest, extra: dict[str, Any]) -> ModelReply:
        """The answer streamed (SSE) and assembled; each text piece told to `on_text` as it
        arrives. Cancelling the call closes the stream (and its connection) at once."""
        assembler = ReplyAssembler(request.on_text)
        try:
            stream = await self._get_client().chat.completions.create(
                model=self._model_name(request),
                stream=True,
                stream_options={"include_usage": True},
                **extra,
            )
            try:
                async for chunk in stream:
                    assembler.add(chunk)
            finally:
                await stream.close()
        except openai.APIStatusError as exc:
            raise ModelError(f"model API error (HTTP {exc.status_code}): {self._detail(exc)}") from None
        except (openai.APITimeoutError, httpx.TimeoutException):
            raise ModelError(f"model API timed out ({_public_url(self._base_url)})") from None
        except openai.APIConnectionError:
            where = _public_url(self._base_url)
            raise ModelError(f"could not reach model API at {where}") from None
        except openai.APIError as exc:  # an error event in the stream
            raise ModelError(f"model API error mid-stream: {self._scrub(str(exc.message))}") from None
        except httpx.HTTPError:  # the connection broke off mid-stream
            where = _public_url(self._base_url)
            raise ModelError(f"the model's stream from {where} broke off") from None
        except openai.OpenAIError as exc:
            raise ModelError(f"model API call failed: {self._scrub(str(exc))}") from None
        return assembler.reply().storable()

    def _detail(self, exc: openai.APIStatusError) -> str:
        body = exc.body
        if isinstance(body, dict):
            # OpenAI nests {"error": {"message"}}; SDKs unwrap it for some servers only.
            inner = body.get("error", body)
            message = inner.get("message") if isinstance(inner, dict) else inner
            if message:
                return self._scrub(str(message))
        return self._scrub(exc.message)

    def _scrub(self, text: str) -> str:
        if self._api_key:
            text = text.replace(self._api_key, "[redacted]")
        text = _KEY_PATTERN.sub("[redacted]", text)
        return text[:_DETAIL_LIMIT]

    async def aclose(self) -> None:
        if self._client is not None:
            await self._client.close()
            self._client = None
