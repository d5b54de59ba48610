"""One supervised connection to one MCP server, with the official `mcp` SDK.

The connection is opened lazily, on the first listing or call, by an owner task that holds
the SDK's context managers (`stdio_client` or `streamable_http_client`, then
`ClientSession`) for as long as the connection lives: anyio scopes must be left by the task
that entered them. Callers in any task send their requests through the open session.

A stdio server is a child process of the service: started by the first use, reused by every
session of the agent type, started again by the next use after it died, and stopped by
`close` (the SDK closes its stdin, then terminates its process group), which the service
calls on shutdown. A call is never repeated: a server that dies during a call gives that
call an error, and only the next call starts it again.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import sys
from collections.abc import AsyncIterator
from typing import Any

import httpx2
import mcp_types as types
from mcp import ClientSession, StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError

from muster_agent.mcp_tools.config import McpServerConfig, MissingSecret

log = logging.getLogger("muster.mcp")

CONNECTION_CLOSED = -32000
# After a failed start, uses within this time fail at once with the same error instead of
# each waiting for a start of their own (a model call lists every server of its agent).
RETRY_AFTER_S = 5.0


class ServerUnavailable(Exception):
    """The server could not be reached, or went away: the message is for the model."""


class McpConnection:
    def __init__(self, config: McpServerConfig, *, start_timeout_s: float, call_timeout_s: float) -> None:
        self.config = config
        self._start_timeout = start_timeout_s
        self._call_timeout = config.timeout_s or call_timeout_s
        self._session: ClientSession | None = None
        self._tools: list[types.Tool] | None = None  # the last listing, kept across restarts
        self._owner: asyncio.Task[None] | None = None
        self._stop = asyncio.Event()
        self._starting = asyncio.Lock()
        self._failed: tuple[float, ServerUnavailable] | None = None  # when, and why
        self.starts = 0  # how many times the connection was opened (tests, logs)

    @property
    def call_timeout_s(self) -> float:
        return self._call_timeout

    @property
    def known_tools(self) -> list[types.Tool] | None:
        return self._tools

    async def tools(self) -> list[types.Tool]:
        """The server's tools: listed when the connection opened, else ServerUnavailable."""
        if self._tools is None:
            await self._open()
        assert self._tools is not None
        return self._tools

    async def call(self, tool: str, arguments: dict[str, Any]) -> types.CallToolResult:
        """One `tools/call`, within the call timeout. Raises ServerUnavailable (down, died
        during the call) or TimeoutError; never retries."""
        session = await self._alive()
        try:
            async with asyncio.timeout(self._call_timeout):
                return await session.call_tool(tool, arguments)
        except MCPError as exc:
            if exc.code == CONNECTION_CLOSED:
                self._lost()
                raise ServerUnavailable(
                    f"MCP server {self.config.name!r} closed the connection during the call "
                    "(it stopped or crashed); the call was not repeated"
                ) from exc
            raise
        except TimeoutError:
            raise  # (an OSError too) the call's own timeout: the connection stays
        except (OSError, httpx2.HTTPError) as exc:
            self._lost()
            raise ServerUnavailable(f"MCP server {self.config.name!r} is unreachable: {exc}") from exc

    async def close(self) -> None:
        """Stop the connection (and a stdio server's process), waiting for it to end."""
        owner = self._owner
        if owner is None:
            return
        self._stop.set()
        with contextlib.suppress(Exception, asyncio.CancelledError):
            await asyncio.wait_for(asyncio.shield(owner), 15)
        if not owner.done():
            owner.cancel()

    async def _alive(self) -> ClientSession:
        """The open session, checked with a ping (a round trip: well under a millisecond
        over stdio): a server that died since it last answered is started again before
        the call is sent, so the call is not lost to a dead process."""
        session = await self._open()
        try:
            async with asyncio.timeout(self._start_timeout):
                await session.send_ping()
        except (MCPError, OSError, httpx2.HTTPError):  # TimeoutError is an OSError
            log.info("mcp_server_lost server=%s", self.config.name)
            self._lost()
            session = await self._open()
        return session

    def _lost(self) -> None:
        """The session is dead: let its owner clean up; the next use opens a new one."""
        self._session = None
        self._stop.set()

    async def _open(self) -> ClientSession:
        async with self._starting:
            if self._session is not None and self._owner is not None and not self._owner.done():
                return self._session
            loop = asyncio.get_running_loop()
            if self._failed is not None and loop.time() - self._failed[0] < RETRY_AFTER_S:
                raise self._failed[1]
            if self._owner is not None:
                await self.close()  # a dead connection's owner: let it finish first
            self._stop = asyncio.Event()
            ready: asyncio.Future[ClientSession] = loop.create_future()
            self._owner = asyncio.create_task(self._own(ready, self._stop), name=f"mcp-{self.config.name}")
            try:
                async with asyncio.timeout(self._start_timeout):
                    session = await asyncio.shield(ready)
            except TimeoutError:
                await self.close()
                failure = ServerUnavailable(
                    f"MCP server {self.config.name!r} did not start within {self._start_timeout:g} s"
                )
                self._failed = (loop.time(), failure)
                raise failure from None
            except ServerUnavailable as failure:
                self._failed = (loop.time(), failure)
                raise
            self._failed = None
            self._session = session
            return session

    async def _own(self, ready: asyncio.Future[ClientSession], stop: asyncio.Event) -> None:
        name, transport = self.config.name, self.config.transport
        try:
            async with self._streams() as (read, write), ClientSession(read, write) as session:
                await session.initialize()
                self._tools = await _list_all(session)
                self.starts += 1
                log.info(
                    "mcp_server_started server=%s transport=%s tools=%d", name, transport, len(self._tools)
                )
                ready.set_result(session)
                await stop.wait()
        except MissingSecret as exc:
            _fail(ready, ServerUnavailable(f"MCP server {name!r} is not configured: {exc}"))
        except Exception as exc:
            failure = type(exc).__name__
            log.warning("mcp_server_failed server=%s transport=%s error=%s", name, transport, failure)
            _fail(ready, ServerUnavailable(f"MCP server {name!r} is unavailable: {_describe(exc)}"))
        finally:
            if self._owner is asyncio.current_task():
                self._session = None
            log.info("mcp_server_stopped server=%s", name)

    @contextlib.asynccontextmanager
    async def _streams(self) -> AsyncIterator[Any]:
        config = self.config
        if config.command is not None:
            params = StdioServerParameters(
                command=config.command, args=list(config.args), env=config.resolved_env(), cwd=config.cwd
            )
            async with stdio_client(params, errlog=sys.stderr) as streams:
                yield streams
            return
        assert config.url is not None
        timeout = httpx2.Timeout(30.0, read=max(300.0, self._call_timeout))
        async with (
            httpx2.AsyncClient(headers=config.resolved_headers(), timeout=timeout) as http,
            streamable_http_client(config.url, http_client=http) as streams,
        ):
            yield streams


async def _list_all(session: ClientSession) -> list[types.Tool]:
    tools: list[types.Tool] = []
    cursor: str | None = None
    while True:
        params = types.PaginatedRequestParams(cursor=cursor) if cursor else None
        page = await session.list_tools(params=params)
        tools.extend(page.tools)
        cursor = page.next_cursor
        if not cursor:
            return tools


def _fail(ready: asyncio.Future[ClientSession], exc: Exception) -> None:
    if not ready.done():
        ready.set_exception(exc)


def _describe(exc: BaseException) -> str:
    if isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        return _describe(exc.exceptions[0])
    text = str(exc).strip()
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__
