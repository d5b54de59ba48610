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
import json
import logging
import os
import stat
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from muster_contracts import events as ev

from muster_agent.file_changes import ChangeRecorder, record_unanswered
from muster_agent.file_snapshots import Snapshot, take_snapshot
from muster_agent.session_store import SessionState
from muster_agent.tools.arguments import RunCommand, parse
from muster_agent.tools.commands import interrupted_result, run_command
from muster_agent.tools.files import MAX_FILE_BYTES, Result, error
from muster_agent.tools.workspace import Workspace

log = logging.getLogger("muster.loop")

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
    recorder: ChangeRecorder,
    tool_call_id: str,
    root: Path,
    before: Scan,
    after: Scan,
    unknown: str = "the workspace was too large",
) -> list[ev.FileChanged]:
    """The `FileChanged` events from `before` to `after`, in path order; `unknown` says
    why a changed file's earlier content is not known."""
    found: list[ev.FileChanged] = []
    for path in sorted(before.keys() | after.keys()):
        old, new = before.get(path), after.get(path)
        if old is not None and new is not None and _same(old, new):
            continue
        old_snapshot = _before_snapshot(old, unknown)
        new_snapshot = take_snapshot(root / path) if new is not None else Snapshot(exists=False)
        change = recorder.describe(tool_call_id, path, old_snapshot, new_snapshot)
        if change is not None:
            found.append(change)
    return found


def _before_snapshot(entry: Entry | None, unknown: str) -> Snapshot:
    if entry is None:
        return Snapshot(exists=False)
    if entry.before is not None:
        return entry.before
    if entry.digest is None:
        return Snapshot(exists=True, size=entry.size, note="content not captured: larger than 4 MiB")
    return Snapshot(exists=True, size=entry.size, note=f"content not captured: {unknown}")


def manifest_path(log_path: Path) -> Path:
    """Where the scan before a command is kept while it runs, beside its output."""
    return log_path.with_name(log_path.stem + ".files.json")


def save_manifest(path: Path, files: Scan) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps({p: [e.size, e.mtime_ns, e.digest] for p, e in files.items()}))
    os.replace(tmp, path)


def load_manifest(path: Path) -> Scan | None:
    try:
        raw = json.loads(path.read_text())
        return {
            str(p): Entry(int(v[0]), int(v[1]), v[2] if isinstance(v[2], str) else None)
            for p, v in raw.items()
        }
    except (OSError, ValueError, TypeError, IndexError, AttributeError):
        return None


async def run_command_call(
    deps: Any, state: SessionState, workspace: Workspace, recorder: ChangeRecorder, call: Mapping[str, Any]
) -> tuple[Result, list[ev.FileChanged]]:
    """Run one `run_command` call of the round: validated, sandboxed, its output streamed
    to its log file (the crash rule reads it), and the files it changed found. The scan
    before it is kept beside its log, so a crash's interrupted result attributes them too;
    a cancel records them on their own (the files did change)."""
    given = parse(RunCommand, call["arguments"])
    if isinstance(given, str):
        return error(given), []
    root = workspace.real_root()
    try:
        agent = deps.agents.get(state.agent_type)
        network = bool(agent.network)
    except KeyError:
        network = False
    log_path = deps.commands.log_path(deps.workspaces, state.session_id, call["id"])
    before = await asyncio.to_thread(scan, root, keep=True)
    await asyncio.to_thread(save_manifest, manifest_path(log_path), before)
    try:
        outcome = await run_command(
            root, given.command, given.timeout_s, policy=deps.commands, log_path=log_path, network=network
        )
    except asyncio.CancelledError:
        await _record_after_cancel(deps, state, root, recorder, call["id"], before, manifest_path(log_path))
        raise
    after = await asyncio.to_thread(scan, root, keep=False)
    return outcome, await asyncio.to_thread(changes, recorder, call["id"], root, before, after)


async def _record_after_cancel(
    deps: Any,
    state: SessionState,
    root: Path,
    recorder: ChangeRecorder,
    tool_call_id: str,
    before: Scan,
    manifest: Path,
) -> None:
    """The command was killed by a cancel (of the turn, a deadline, a lost lease): its
    result is never recorded, but what it changed is, on its own."""

    async def record() -> None:
        after = await asyncio.to_thread(scan, root, keep=False)
        made = await asyncio.to_thread(changes, recorder, tool_call_id, root, before, after)
        await record_unanswered(deps.uows, state.session_id, made, recorder.blobs)
        recorder.blobs.clear()
        # Recorded: a resumed run's interrupted result must not attribute them again.
        await asyncio.to_thread(manifest.unlink, missing_ok=True)

    try:
        await asyncio.wait_for(record(), timeout=10)
    except Exception:
        log.warning("command_changes_unrecorded session=%s", state.session_id, exc_info=True)


async def interrupted_command(
    deps: Any, state: SessionState, workspace: Workspace, recorder: ChangeRecorder, call: Mapping[str, Any]
) -> tuple[str, list[ev.FileChanged]]:
    """The result of a command a crash cut off (never run again): its output until then,
    and what it changed, compared with the scan kept before it started (without the
    earlier contents, which died with the process)."""
    log_path = deps.commands.log_path(deps.workspaces, state.session_id, call["id"])
    result = json.dumps(await asyncio.to_thread(interrupted_result, log_path))
    before = await asyncio.to_thread(load_manifest, manifest_path(log_path))
    if before is None:
        return result, []
    root = workspace.real_root()
    after = await asyncio.to_thread(scan, root, keep=False)
    unknown = "the command was interrupted by a crash"
    made = await asyncio.to_thread(changes, recorder, call["id"], root, before, after, unknown)
    return result, made
