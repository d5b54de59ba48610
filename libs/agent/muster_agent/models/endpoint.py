"""A real model's failures name its endpoint (never its key), after its retries.

The OpenAI SDK retries a call answered 429 or 5xx (and one that timed out or could not
connect) `MUSTER_MODEL_MAX_RETRIES` times, each after the server's `Retry-After` (up to the
SDK's bound; else its exponential backoff). What still fails becomes the turn's error:
this wrapper says which endpoint failed and after how many attempts, so a person reading a
FAILED turn knows where to look.
"""

from __future__ import annotations

import re
from urllib.parse import urlsplit, urlunsplit

from muster_agent.models.base import ModelError, ModelProvider, ModelReply, ModelRequest

# The failures the SDK retries before giving up (`_should_retry`): 408, 409, 429, 5xx,
# timeouts and connection errors.
_RETRIED = re.compile(r"HTTP (408|409|429|5\d\d)\b|timed out|could not reach")


def public_url(url: str | None) -> str:
    """The base URL without any user:password part, query or fragment, for error messages."""
    if not url:
        return "https://api.openai.com/v1"
    parts = urlsplit(url)
    netloc = parts.hostname or ""
    if parts.port:
        netloc += f":{parts.port}"
    return urlunsplit((parts.scheme, netloc, parts.path, "", ""))


class NamingEndpoint:
    """`inner`'s answers; its failures as "model endpoint <url> failed [after N attempts]: …"."""

    def __init__(self, inner: ModelProvider, endpoint: str, max_retries: int) -> None:
        self.inner, self.endpoint, self.max_retries = inner, endpoint, max_retries

    async def complete(self, request: ModelRequest) -> ModelReply:
        try:
            return await self.inner.complete(request)
        except ModelError as exc:
            raise ModelError(self.failure(str(exc))) from None

    def failure(self, reason: str) -> str:
        after = f" after {self.max_retries + 1} attempts" if _RETRIED.search(reason) else ""
        return f"model endpoint {self.endpoint} failed{after}: {reason}"

    async def aclose(self) -> None:
        close = getattr(self.inner, "aclose", None)
        if close is not None:
            await close()
