"""The files a command changed: the workspace compared before and after it ran.

A scan records each regular file's size, modification time and content hash; a file over
4 MiB is compared by size and time alone (never read), and the text of small UTF-8 files is
kept (up to a total) so a modification gets a diff like a file tool's. What differs after
the command becomes `FileChanged` events through the round's `ChangeRecorder`, with the
command's tool call, session and agent type. Caches that tools write as a side effect
(`__pycache__`, `.pytest_cache`, …) and `.git` are not scanned.
"""

from __future__ import annotations

import hashlib
import json
import os
import stat
from dataclasses import dataclass
from pathlib import Path

from muster_contracts import events as ev

from muster_agent.file_changes import ChangeRecorder
from muster_agent.file_snapshots import Snapshot, take_snapshot
from muster_agent.tools.files import MAX_FILE_BYTES

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
