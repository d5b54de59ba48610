"""The local file tools. Synchronous on purpose: the registry runs them in a worker thread.

Each returns the tool-result dict the model reads, `{"success": True, ...}` or
`{"success": False, "error": ...}`; nothing raises for a bad path or a missing file.
"""

from __future__ import annotations

import contextlib
import functools
import itertools
import operator
import os
import stat
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any, ParamSpec

from muster_agent.tools.workspace import Workspace, WorkspaceError

MAX_FILE_BYTES = 4 * 1024 * 1024
MAX_LIST_ENTRIES = 1000
# Writes go through a temp file that is renamed into place, so a process killed mid-write
# (interrupted tools are never re-run) leaves the old file or the new one, never half.
_TMP_PREFIX, _TMP_SUFFIX = ".muster-", ".tmp"

P = ParamSpec("P")
Result = dict[str, Any]


class ToolError(Exception):
    """The tool cannot do what was asked; the message is the error the model sees."""


def error(message: str) -> Result:
    return {"success": False, "error": message}


def _tool(fn: Callable[P, Result]) -> Callable[P, Result]:
    @functools.wraps(fn)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> Result:
        try:
            return fn(*args, **kwargs)
        except (ToolError, WorkspaceError) as exc:
            return error(str(exc))
        except OSError as exc:
            # str(exc) would carry the host's absolute path; name the model's path instead.
            reason = exc.strerror or type(exc).__name__
            return error(f"{fn.__name__} failed for {kwargs.get('path')!r}: {reason}")

    return wrapper


def _read_text(target: Path, path: str) -> str:
    if not target.exists():
        raise ToolError(f"file not found: {path!r}")
    info = target.stat()
    if stat.S_ISDIR(info.st_mode):
        raise ToolError(f"{path!r} is a directory, not a file")
    if not stat.S_ISREG(info.st_mode):
        raise ToolError(f"{path!r} is not a regular file")  # a FIFO would block forever
    too_big = f"file {path!r} is larger than 4 MiB (the limit is {MAX_FILE_BYTES} bytes)"
    if info.st_size > MAX_FILE_BYTES:
        raise ToolError(too_big)
    with target.open("rb") as f:
        data = f.read(MAX_FILE_BYTES + 1)  # the file may have grown since stat()
    if len(data) > MAX_FILE_BYTES:
        raise ToolError(too_big)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise ToolError(f"file {path!r} is not UTF-8 text") from None


def _file_in_the_way(root: Path, target: Path) -> Path | None:
    """The first directory of `target` inside the workspace (from its root down) that
    exists and is not a directory. `target` comes from `Workspace.resolve`: lexically under
    the root, so its directories there are the root and the root joined with its parts."""
    for parent in itertools.accumulate(target.relative_to(root).parts[:-1], operator.truediv, initial=root):
        try:
            mode = os.stat(parent).st_mode
        except (OSError, ValueError):
            continue  # missing (or unreadable): nothing in the way here
        if not stat.S_ISDIR(mode):
            return parent
    return None


def _write_text(workspace: Workspace, target: Path, path: str, content: str) -> int:
    data = content.encode("utf-8")
    if len(data) > MAX_FILE_BYTES:
        raise ToolError(f"content is larger than 4 MiB (the limit is {MAX_FILE_BYTES} bytes)")
    if target.is_dir():
        raise ToolError(f"{path!r} is a directory, not a file")
    blocking = _file_in_the_way(workspace.real_root(), target)
    if blocking is not None:
        raise ToolError(f"cannot write {path!r}: {workspace.relative(blocking)!r} is a file")
    target.parent.mkdir(parents=True, exist_ok=True)
    # Write through an in-workspace symlink to its target rather than replacing the link.
    final = target.resolve()
    mode = final.stat().st_mode & 0o7777 if final.exists() else 0o644
    fd, tmp = tempfile.mkstemp(dir=final.parent, prefix=_TMP_PREFIX, suffix=_TMP_SUFFIX)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.chmod(tmp, mode)
        os.replace(tmp, final)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    return len(data)


@_tool
def read_file(workspace: Workspace, *, path: str) -> Result:
    target = workspace.resolve(path)
    content = _read_text(target, path)
    return {"success": True, "path": workspace.relative(target), "content": content}


@_tool
def write_file(workspace: Workspace, *, path: str, content: str) -> Result:
    target = workspace.resolve(path)
    size = _write_text(workspace, target, path, content)
    return {"success": True, "path": workspace.relative(target), "bytes": size}


@_tool
def edit_file(
    workspace: Workspace,
    *,
    path: str,
    old_string: str,
    new_string: str,
    replace_all: bool = False,
) -> Result:
    if not old_string:
        raise ToolError("old_string must not be empty")
    target = workspace.resolve(path)
    text = _read_text(target, path)
    count = text.count(old_string)
    if count == 0:
        raise ToolError(f"old_string not found in {path!r}")
    if count > 1 and not replace_all:
        raise ToolError(f"old_string occurs {count} times; pass replace_all or make it unique")
    _write_text(workspace, target, path, text.replace(old_string, new_string))
    return {"success": True, "path": workspace.relative(target), "replacements": count}


@_tool
def delete_file(workspace: Workspace, *, path: str) -> Result:
    target = workspace.resolve(path)
    if not target.exists() and not target.is_symlink():
        raise ToolError(f"file not found: {path!r}")
    if target.is_dir() and not target.is_symlink():
        raise ToolError(f"{path!r} is a directory; delete_file deletes files only")
    target.unlink()  # a symlink is removed itself, never its target
    return {"success": True, "path": workspace.relative(target)}


@_tool
def list_files(workspace: Workspace, *, path: str | None = None) -> Result:
    """Every file and directory under `path` (default: the root), relative to the root,
    sorted, directories ending in '/'. Symlinked directories are listed, not entered."""
    root = workspace.real_root()
    base = root if path in (None, "", ".") else workspace.resolve(path or "")
    if not base.exists():
        raise ToolError(f"directory not found: {path!r}")
    if not base.is_dir():
        raise ToolError(f"{path!r} is a file, not a directory")
    entries: list[str] = []
    for dirpath, dirnames, filenames in os.walk(base):
        dirnames.sort()  # os.walk descends in this order: keeps a truncated listing stable
        rel = Path(dirpath).relative_to(root)
        entries.extend(f"{(rel / d).as_posix()}/" for d in dirnames)
        entries.extend(
            (rel / f).as_posix()
            for f in sorted(filenames)
            if not (f.startswith(_TMP_PREFIX) and f.endswith(_TMP_SUFFIX))
        )
        if len(entries) > MAX_LIST_ENTRIES:
            break
    entries.sort()
    truncated = len(entries) > MAX_LIST_ENTRIES
    return {
        "success": True,
        "path": workspace.relative(base),
        "files": entries[:MAX_LIST_ENTRIES],
        "truncated": truncated,
    }
