"""The LOCAL side of the file tools and `run_command`: `tool_request` frames run in the
user's directory.

Wired to a `muster_client.Connection`: `hello` is its `on_connect` hook (sent again after
every reconnect; the server then sends every outstanding request of the user again) and
`on_frame` takes the `tool_request` frames. The tool runs with the server's own code and
path rules (`muster_agent.tools`: absolute paths, `..` escapes and symlinks leading out are
refused). A request runs once: a repeat while it runs waits for that run's answer, a repeat
after it gets the recorded result again (`RequestJournal`). One log line per request:
`tool_request_served request=… tool=… success=…` — never arguments or file contents.
"""

from __future__ import annotations

import asyncio
import json
import tempfile
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

from muster_agent.tools.arguments import RunCommand, parse
from muster_agent.tools.commands import CommandPolicy, run_command
from muster_agent.tools.files import error
from muster_agent.tools.registry import is_local_tool, run_local_tool
from muster_agent.tools.workspace import Workspace
from muster_client import Connection, Frame, Lost, ServerError

from .local_journal import RequestJournal, Result

# The gateway refuses frames over 1 MiB; a bigger result is answered with an error instead.
MAX_RESULT_BYTES = 1_000_000


def _print(line: str) -> None:
    print(line, flush=True)


class LocalTools:
    def __init__(
        self, directory: Path, journal: RequestJournal | None = None, emit: Callable[[str], None] = _print
    ) -> None:
        self.workspace = Workspace(directory)
        self.journal = journal if journal is not None else RequestJournal()
        self.emit = emit
        self.runs = 0  # tools actually run by this process
        self._conn: Connection | None = None
        self._running: dict[str, asyncio.Task[None]] = {}
        # A user's own machine: commands run unsandboxed where no sandbox can be had, and say so.
        self.commands = CommandPolicy(unsafe=True)

    def attach(self, conn: Connection) -> None:
        """Make `conn` a LOCAL client: `hello` on every connect, tool requests served."""
        self._conn = conn
        conn.on_connect = self.hello
        conn.on_frame = self.on_frame

    async def hello(self, conn: Connection) -> None:
        try:
            await conn.ack("hello", data={"localTools": True})
        except ServerError as exc:
            self.emit(f"local_client_hello_refused code={exc.code}")
            raise
        self.emit(f"local_client_hello connects={conn.connects}")

    def on_frame(self, frame: Frame) -> bool:
        """Take a `tool_request` (True); leave any other frame to the connection (False)."""
        if frame.get("type") != "tool_request":
            return False
        data, session_id = frame.get("data"), frame.get("sessionId")
        if not isinstance(data, dict) or not isinstance(data.get("requestId"), str):
            self.emit("tool_request_malformed (no data.requestId)")
            return True
        request_id = data["requestId"]
        if request_id not in self._running:  # else: that run answers on the current socket
            task = asyncio.create_task(self._serve(session_id if isinstance(session_id, str) else None, data))
            self._running[request_id] = task
            task.add_done_callback(lambda _: self._running.pop(request_id, None))
        return True

    async def drain(self) -> None:
        """Wait for the requests being served."""
        while self._running:
            await asyncio.gather(*self._running.values(), return_exceptions=True)

    async def close(self) -> None:
        await self.drain()
        self.journal.close()

    async def _serve(self, session_id: str | None, data: dict[str, Any]) -> None:
        request_id, name = str(data["requestId"]), str(data.get("name"))
        result = self.journal.result(request_id)
        repeat = result is not None
        if result is None:
            self.journal.start(request_id)
            result = await self._run(name, data.get("arguments"))
            self.journal.finish(request_id, result)
        success = "true" if result.get("success") else "false"
        self.emit(
            f"tool_request_served request={request_id} tool={name} success={success}"
            + (" repeat=true" if repeat else "")
        )
        await self._answer(session_id, request_id, result)

    async def _run(self, name: str, arguments: Any) -> Result:
        if not is_local_tool(name) and name != RunCommand.tool:
            return error(f"{name!r} is not a tool a LOCAL client runs")
        self.runs += 1
        try:
            if name == RunCommand.tool:
                result = await self._command(arguments if arguments is not None else {})
            else:
                result = await run_local_tool(
                    self.workspace, name, arguments if arguments is not None else {}
                )
        except Exception as exc:  # the client must answer; the details stay in the error type
            return error(f"the LOCAL client failed to run {name}: {type(exc).__name__}")
        if len(json.dumps(result)) > MAX_RESULT_BYTES:
            too_big = f"the result of {name} is over the {MAX_RESULT_BYTES} bytes a LOCAL client may send"
            return error(too_big)
        return result

    async def _command(self, arguments: Any) -> Result:
        """`run_command` in this client's directory: in bubblewrap where this machine has
        it, else with the same limits and timeout but unsandboxed, which its result says
        (`"sandboxed": false` and a `note`). Its output is logged under the system's temp
        directory, never in the user's directory, and removed once the command has ended."""
        given = parse(RunCommand, arguments)
        if isinstance(given, str):
            return error(given)
        root = await asyncio.to_thread(self.workspace.real_root)
        log_path = Path(tempfile.gettempdir(), "muster-local-commands", f"{uuid.uuid4()}.log")
        try:
            return await run_command(
                root, given.command, given.timeout_s, policy=self.commands, log_path=log_path
            )
        finally:  # the result carries the output: the log has served
            await asyncio.to_thread(log_path.unlink, missing_ok=True)

    async def _answer(self, session_id: str | None, request_id: str, result: Result) -> None:
        if self._conn is None:
            return
        try:
            await self._conn.ack("tool_result", session_id, {"requestId": request_id, "result": result})
        except ServerError as exc:
            self.emit(f"tool_result_refused request={request_id} code={exc.code}")
        except (Lost, TimeoutError):
            # The server sends the request again on the next connect; the journal answers it.
            self.emit(f"tool_result_unsent request={request_id}")
