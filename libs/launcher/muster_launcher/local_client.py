"""`muster local-client DIR`: a LOCAL client that only serves tool requests.

It connects, says `hello`, and runs the file tools the server sends in DIR until it is
stopped; a dropped socket (a gateway restart) is opened again with backoff and `hello` is
sent again. Tests start it in-process:

    async with LocalClient(url, token, directory, state_dir=tmp) as client:
        ...  # client.tools.runs, client.conn.connects
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Callable
from pathlib import Path
from types import TracebackType

from muster_client import Connection, Lost, ServerError
from websockets.exceptions import WebSocketException

from .local_journal import RequestJournal, default_path
from .local_tools import LocalTools, _print


class LocalClient:
    def __init__(
        self,
        url: str,
        token: str,
        directory: Path,
        *,
        state_dir: Path | None = None,
        persist: bool = True,
        emit: Callable[[str], None] = _print,
        max_delay: float = 5.0,
    ) -> None:
        directory = Path(directory)
        journal = RequestJournal(default_path(directory, state_dir) if persist else None)
        self.tools = LocalTools(directory, journal, emit)
        self.conn = Connection(url, token, reconnect=True, max_delay=max_delay)
        self.tools.attach(self.conn)

    async def start(self, within: float = 60.0) -> None:
        """Connected and `hello` acknowledged; a refused `hello` raises `ServerError`."""
        await self.conn.start(within)

    async def serve(self) -> None:
        """Serve until the connection is gone for good (closed, or a rejected token)."""
        await self.conn.wait_for(lambda: self.conn.finished, None)

    async def close(self) -> None:
        await self.conn.close()
        await self.tools.close()

    async def __aenter__(self) -> LocalClient:
        await self.start()
        return self

    async def __aexit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.close()


async def _serve(url: str, token: str, directory: Path, state_dir: Path | None) -> int:
    client = LocalClient(url, token, directory, state_dir=state_dir)
    try:
        await client.start()
        print(f"local_client_ready dir={directory}", flush=True)
        await client.serve()
    finally:
        await client.close()
    print("error: the gateway closed the connection for good (invalid token?)", file=sys.stderr)
    return 2


def run_local_client(url: str, token: str, directory: Path, state_dir: Path | None = None) -> int:
    if not directory.is_dir():
        print(f"error: {directory} is not a directory", file=sys.stderr)
        return 2
    try:
        return asyncio.run(_serve(url, token, directory, state_dir))
    except KeyboardInterrupt:
        return 0
    except ServerError as exc:
        print(f"error: the gateway refused hello: {exc}", file=sys.stderr)
        return 2
    except (Lost, TimeoutError, OSError, WebSocketException) as exc:
        print(f"error: cannot connect: {exc!r}", file=sys.stderr)
        return 2
