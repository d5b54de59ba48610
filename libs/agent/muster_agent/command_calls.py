"""One `run_command` call of a round, and what is kept of it outside the workspace.

While a command runs, its output streams to a log file and the scan of the workspace taken
before it sits beside it (`command_changes.manifest_path`): what a crash's interrupted
result is made of. Once the call's result is recorded, both are removed (`forget`), and the
session's directory with them when it is empty. A cancel (of the turn, a deadline) kills the
command and records its result at once, with the output it printed until then and the files
it changed; a lost lease keeps them for the run that takes the session over.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from muster_contracts import events as ev
from muster_runtime.uow.aggregates import Session

from muster_agent import session_store as store
from muster_agent.command_changes import Scan, changes, load_manifest, manifest_path, save_manifest, scan
from muster_agent.file_changes import ChangeRecorder
from muster_agent.history import pending_tool_calls
from muster_agent.session_store import SessionState
from muster_agent.tools.arguments import RunCommand, parse
from muster_agent.tools.commands import STOPPED, interrupted_result, run_command
from muster_agent.tools.files import Result, error
from muster_agent.tools.workspace import Workspace

log = logging.getLogger("muster.loop")


def log_path(deps: Any, state: SessionState, tool_call_id: str) -> Path:
    path: Path = deps.commands.log_path(deps.workspaces, state.session_id, tool_call_id)
    return path


def forget(paths: Iterable[Path]) -> None:
    """Remove the logs (and the scans beside them) of commands whose results are recorded;
    a session's directory goes with its last one."""
    for path in paths:
        for done in (path, manifest_path(path)):
            done.unlink(missing_ok=True)
        with contextlib.suppress(OSError):  # not empty: another command of the session
            path.parent.rmdir()


async def run_command_call(
    deps: Any, state: SessionState, workspace: Workspace, recorder: ChangeRecorder, call: Mapping[str, Any]
) -> tuple[Result, list[ev.FileChanged]]:
    """Run one `run_command` call of the round: validated, sandboxed, its output streamed
    to its log file (the crash rule reads it), and the files it changed found. The scan
    before it is kept beside its log, so a crash's interrupted result attributes them too.
    The log is left for `forget` once the result is recorded (`recorder.spent`)."""
    given = parse(RunCommand, call["arguments"])
    if isinstance(given, str):
        return error(given), []
    root = workspace.real_root()
    try:
        network = bool(deps.agents.get(state.agent_type).network)
    except KeyError:
        network = False
    path = log_path(deps, state, call["id"])
    before = await asyncio.to_thread(scan, root, keep=True)
    await asyncio.to_thread(save_manifest, manifest_path(path), before)
    try:
        outcome = await run_command(
            root, given.command, given.timeout_s, policy=deps.commands, log_path=path, network=network
        )
    except asyncio.CancelledError:
        await _record_after_cancel(deps, state, root, recorder, call["id"], before, path)
        raise
    after = await asyncio.to_thread(scan, root, keep=False)
    recorder.spent.append(path)
    return outcome, await asyncio.to_thread(changes, recorder, call["id"], root, before, after)


async def _record_after_cancel(
    deps: Any,
    state: SessionState,
    root: Path,
    recorder: ChangeRecorder,
    tool_call_id: str,
    before: Scan,
    path: Path,
) -> None:
    """The command was killed by a cancel (of the turn, a deadline, a lost lease). When the
    session's turn has ended, the call gets its result now, with the output until the kill,
    in the transaction that records what it changed; when the session runs on elsewhere
    (a lost lease), only the changes are recorded, and the run there answers the call."""

    async def record() -> None:
        after = await asyncio.to_thread(scan, root, keep=False)
        made = await asyncio.to_thread(changes, recorder, tool_call_id, root, before, after)
        result = json.dumps(await asyncio.to_thread(interrupted_result, path, STOPPED))
        ended = await _record_stopped(deps, state, tool_call_id, result, made, recorder.blobs)
        recorder.blobs.clear()
        # Recorded: a resumed run's interrupted result must not attribute them again.
        await asyncio.to_thread(forget if ended else _forget_manifest, [path])

    try:
        await asyncio.wait_for(record(), timeout=10)
    except Exception:
        log.warning("command_changes_unrecorded session=%s", state.session_id, exc_info=True)


def _forget_manifest(paths: list[Path]) -> None:
    for path in paths:
        manifest_path(path).unlink(missing_ok=True)


async def _record_stopped(
    deps: Any,
    state: SessionState,
    tool_call_id: str,
    result: str,
    made: list[ev.FileChanged],
    blobs: Mapping[str, str],
) -> bool:
    """Record `made` and, when the session's turn has ended with the call unanswered,
    `result` as its TOOL message. True unless the session still runs (elsewhere) with
    the call unanswered: the run there answers it from the log."""
    async with deps.uows() as uow:
        row = await uow.lock_session(state.session_id)
        if row is None:
            return True
        session = Session.of(row)
        running = session.active
        now = await store.load_state(uow, state.session_id)
        open_ = now is not None and any(c["id"] == tool_call_id for c in pending_tool_calls(now.messages))
        events: list[ev.DomainEvent] = list(made)
        if open_ and not running:
            events.insert(0, store.tool_message(tool_call_id, result)(session.message_count + 1))
        if events:
            await uow.store_blobs(blobs)
            await uow.append(str(state.session_id), events, expected_version=session.version)
        return not (open_ and running)


async def interrupted_command(
    deps: Any, state: SessionState, workspace: Workspace, recorder: ChangeRecorder, call: Mapping[str, Any]
) -> tuple[str, list[ev.FileChanged]]:
    """The result of a command a crash cut off (never run again): its output until then,
    and what it changed, compared with the scan kept before it started (without the
    earlier contents, which died with the process)."""
    path = log_path(deps, state, call["id"])
    recorder.spent.append(path)
    result = json.dumps(await asyncio.to_thread(interrupted_result, path))
    before = await asyncio.to_thread(load_manifest, manifest_path(path))
    if before is None:
        return result, []
    root = workspace.real_root()
    after = await asyncio.to_thread(scan, root, keep=False)
    unknown = "the command was interrupted by a crash"
    made = await asyncio.to_thread(changes, recorder, call["id"], root, before, after, unknown)
    return result, made
