"""The files a command changed: the workspace compared before and after it ran.

A scan records each regular file's size, modification time and content hash; a file over
4 MiB is compared by size and time alone (never read), and the text of small UTF-8 files is
kept (up to a total) so a modification gets a diff like a file tool's. What differs after
the command becomes `FileChanged` events through the round's `ChangeRecorder`, with the
command's tool call, session and agent type. Caches that tools write as a side effect
(`__pycache__`, `.pytest_cache`, …) and `.git` are not scanned.
"""

from __future__ import annotations

import asyncio
import hashlib
import os
import stat
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from muster_contracts import events as ev

from muster_agent.file_changes import ChangeRecorder
from muster_agent.file_snapshots import Snapshot, take_snapshot
from muster_agent.session_store import SessionState
from muster_agent.tools.arguments import RunCommand, parse
from muster_agent.tools.commands import run_command
from muster_agent.tools.files import MAX_FILE_BYTES, Result, error
from muster_agent.tools.workspace import Workspace

SKIPPED_DIRECTORIES = frozenset(
    {".git", "__pycache__", ".pytest_cache", ".mypy_cache", ".ruff_cache", "node_modules", ".venv"}
)
MAX_FILES = 20_000  # a workspace with more is compared on its first files only
MAX_KEPT_BYTES = 32 * 1024 * 1024  # text kept from before the command, for the diffs


@dataclass(frozen=True)
class Entry:
    size: int
    mtime_ns: int
    digest: str | None  # None: over the size limit, compared by size and time
    before: Snapshot | None = None  # the snapshot kept for a diff


Scan = dict[str, Entry]


def scan(root: Path, *, keep: bool) -> Scan:
    """The workspace's files (relative '/'-separated paths); with `keep`, their snapshots."""
    files: Scan = {}
    kept = 0
    if not root.is_dir():
        return files
    for directory, dirs, names in os.walk(root):
        dirs[:] = sorted(d for d in dirs if d not in SKIPPED_DIRECTORIES)
        for name in sorted(names):
            if len(files) >= MAX_FILES:
                return files
            path = Path(directory, name)
            try:
                info = path.lstat()
            except OSError:
                continue
            if not stat.S_ISREG(info.st_mode):
                continue
            relative = path.relative_to(root).as_posix()
            if info.st_size > MAX_FILE_BYTES:
                files[relative] = Entry(info.st_size, info.st_mtime_ns, None)
                continue
            try:
                data = path.read_bytes()
            except OSError:
                continue
            snapshot = None
            if keep and kept + len(data) <= MAX_KEPT_BYTES:
                snapshot = take_snapshot(path)
                kept += len(data)
            files[relative] = Entry(
                info.st_size, info.st_mtime_ns, hashlib.sha256(data).hexdigest(), snapshot
            )
    return files


def _same(before: Entry, after: Entry) -> bool:
    if before.digest is None or after.digest is None:
        return before.digest is after.digest and (before.size, before.mtime_ns) == (
            after.size,
            after.mtime_ns,
        )
    return before.digest == after.digest


def changes(
    recorder: ChangeRecorder, tool_call_id: str, root: Path, before: Scan, after: Scan
) -> list[ev.FileChanged]:
    """The `FileChanged` events from `before` to `after`, in path order."""
    found: list[ev.FileChanged] = []
    for path in sorted(before.keys() | after.keys()):
        old, new = before.get(path), after.get(path)
        if old is not None and new is not None and _same(old, new):
            continue
        old_snapshot = _before_snapshot(old)
        new_snapshot = take_snapshot(root / path) if new is not None else Snapshot(exists=False)
        change = recorder.describe(tool_call_id, path, old_snapshot, new_snapshot)
        if change is not None:
            found.append(change)
    return found


def _before_snapshot(entry: Entry | None) -> Snapshot:
    if entry is None:
        return Snapshot(exists=False)
    if entry.before is not None:
        return entry.before
    if entry.digest is None:
        return Snapshot(exists=True, size=entry.size, note="content not captured: larger than 4 MiB")
    return Snapshot(exists=True, size=entry.size, note="content not captured: the workspace was too large")


async def run_command_call(
    deps: Any, state: SessionState, workspace: Workspace, recorder: ChangeRecorder, call: Mapping[str, Any]
) -> tuple[Result, list[ev.FileChanged]]:
    """Run one `run_command` call of the round: validated, sandboxed, its output streamed
    to its log file (the crash rule reads it), and the files it changed found."""
    given = parse(RunCommand, call["arguments"])
    if isinstance(given, str):
        return error(given), []
    root = workspace.real_root()
    try:
        agent = deps.agents.get(state.agent_type)
        network = bool(agent.network)
    except KeyError:
        network = False
    before = await asyncio.to_thread(scan, root, keep=True)
    outcome = await run_command(
        root,
        given.command,
        given.timeout_s,
        policy=deps.commands,
        log_path=deps.commands.log_path(deps.workspaces, state.session_id, call["id"]),
        network=network,
    )
    after = await asyncio.to_thread(scan, root, keep=False)
    return outcome, await asyncio.to_thread(changes, recorder, call["id"], root, before, after)
