"""Snapshots of a workspace file and the unified diff between two of them.

A snapshot holds the content only of a regular UTF-8 text file of at most 4 MiB (and with no
NUL byte, which PostgreSQL text cannot hold); otherwise `note` says why it was not captured.
Lines are split on '\\n' only, as git does, and a missing final newline is marked as git does.
"""

from __future__ import annotations

import difflib
import hashlib
import stat
from dataclasses import dataclass
from pathlib import Path

from muster_agent.tools.files import MAX_FILE_BYTES

NO_NEWLINE = "\\ No newline at end of file\n"


@dataclass(frozen=True)
class Snapshot:
    exists: bool
    content: str | None = None  # None: absent, or not captured (`note` says why)
    size: int | None = None
    note: str | None = None


def sha256(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def take_snapshot(target: Path) -> Snapshot:
    try:
        info = target.stat()
    except (FileNotFoundError, NotADirectoryError):
        return Snapshot(exists=False)
    except OSError:
        return Snapshot(exists=True, note="content not captured: the file could not be read")
    if not stat.S_ISREG(info.st_mode):
        return Snapshot(exists=True, note="content not captured: not a regular file")
    if info.st_size > MAX_FILE_BYTES:
        return Snapshot(exists=True, size=info.st_size, note="content not captured: larger than 4 MiB")
    try:
        with target.open("rb") as f:
            data = f.read(MAX_FILE_BYTES + 1)
    except OSError:
        return Snapshot(exists=True, note="content not captured: the file could not be read")
    if len(data) > MAX_FILE_BYTES:
        return Snapshot(exists=True, size=len(data), note="content not captured: larger than 4 MiB")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return Snapshot(exists=True, size=len(data), note="content not captured: not UTF-8 text")
    if "\x00" in text:
        return Snapshot(exists=True, size=len(data), note="content not captured: binary (NUL bytes)")
    return Snapshot(exists=True, content=text, size=len(data))


def _lines(text: str) -> list[str]:
    """Lines split on '\\n' only (as git does), each keeping its newline."""
    parts = text.split("\n")
    lines = [part + "\n" for part in parts[:-1]]
    if parts[-1]:
        lines.append(parts[-1])
    return lines


def unified_diff(path: str, before: str | None, after: str | None) -> tuple[str, int, int]:
    """(git-style unified diff, lines added, lines deleted); None content is an absent file."""
    out: list[str] = []
    added = deleted = 0
    diff = difflib.unified_diff(
        _lines(before or ""),
        _lines(after or ""),
        "/dev/null" if before is None else f"a/{path}",
        "/dev/null" if after is None else f"b/{path}",
    )
    for index, line in enumerate(diff):
        if index >= 2:  # the first two lines are the ---/+++ headers
            added += line.startswith("+")
            deleted += line.startswith("-")
        out.append(line if line.endswith("\n") else line + "\n" + NO_NEWLINE)
    return "".join(out), added, deleted
