"""REST reads that ride out gateway restarts (connection refused, 5xx) by retrying."""

from __future__ import annotations

import json
from typing import Any

import httpx
from muster_runtime.process import retrying


class _ServerError(Exception):
    """A 5xx: the gateway is restarting or overloaded, worth another try."""


class Rest:
    def __init__(self, base_url: str, token: str) -> None:
        self.http = httpx.AsyncClient(
            base_url=base_url, headers={"Authorization": f"Bearer {token}"}, timeout=10
        )

    async def json(self, path: str, within: float = 120.0, **params: Any) -> Any:
        async def get() -> Any:
            response = await self.http.get(path, params=params)
            if response.status_code >= 500:
                raise _ServerError(f"GET {path}: {response.status_code}")
            if response.status_code != 200:
                raise RuntimeError(f"GET {path}: {response.status_code} {response.text[:200]}")
            return response.json()

        errors = (httpx.TransportError, _ServerError)
        try:
            return await retrying.call(retrying.until_ready(errors, within_s=within, every_s=0.3), get)
        except errors as exc:
            raise TimeoutError(f"GET {path} kept failing for {within:g}s") from exc

    async def session(self, session_id: str) -> dict[str, Any]:
        return dict(await self.json(f"/v1/sessions/{session_id}"))

    async def messages(self, session_id: str) -> list[dict[str, Any]]:
        body = await self.json(f"/v1/sessions/{session_id}/messages", rounds=1000)
        return list(body["items"])

    async def executions(self, session_id: str) -> list[dict[str, Any]]:
        return list((await self.json(f"/v1/sessions/{session_id}/executions"))["items"])

    async def close(self) -> None:
        await self.http.aclose()


def tool_results(history: list[dict[str, Any]]) -> list[dict[str, Any]]:
    results = []
    for message in history:
        if message["role"] == "TOOL":
            try:
                results.append(dict(json.loads(message["content"])))
            except (ValueError, TypeError):
                results.append({"unparsable": message["content"][:200]})
    return results
