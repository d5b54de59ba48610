"""Confinement of tool paths to a session tree's workspace directory.

Every path a model sends is untrusted. It is checked twice: lexically (absolute paths and
`..` that climbs above the root are refused before touching the disk) and then on the
filesystem (the real path, after following every symlink on the way, must stay inside the
root). The path handed back is the lexically normalised one under the real root, so the
tools act on exactly the path that was checked.
"""

from __future__ import annotations

from pathlib import Path, PurePosixPath


class WorkspaceError(Exception):
    """A path was refused; the message names the path as the model gave it."""


class Workspace:
    def __init__(self, root: Path) -> None:
        self._root = Path(root)
        self._real_root: Path | None = None

    @property
    def root(self) -> Path:
        return self._root

    def real_root(self) -> Path:
        """The root, created on first use (a new session tree has no files yet). Resolved
        once: where it is depends only on directories outside the workspace, which no tool
        can change, and each call of a file tool needs it several times."""
        if self._real_root is None or not self._real_root.is_dir():
            self._root.mkdir(parents=True, exist_ok=True)
            self._real_root = self._root.resolve()
        return self._real_root

    def resolve(self, path: str) -> Path:
        if not isinstance(path, str):
            raise WorkspaceError("path must be a string")
        if not path.strip():
            raise WorkspaceError("path must not be empty")
        if "\x00" in path:
            raise WorkspaceError(f"path {path!r} contains a NUL byte")
        if PurePosixPath(path).is_absolute() or path.split("/")[0] == "~":
            raise WorkspaceError(f"absolute paths are not allowed: {path!r}")
        parts: list[str] = []
        for part in PurePosixPath(path).parts:
            if part == "..":
                if not parts:
                    raise WorkspaceError(f"path {path!r} is outside the workspace")
                parts.pop()
            elif part != ".":
                parts.append(part)
        root = self.real_root()
        candidate = root.joinpath(*parts)
        try:
            real = candidate.resolve()
        except (OSError, RuntimeError):  # RuntimeError: a symlink loop (Python 3.11)
            raise WorkspaceError(f"path {path!r} cannot be resolved (symlink loop?)") from None
        if not real.is_relative_to(root):
            raise WorkspaceError(f"path {path!r} is outside the workspace (through a symbolic link)")
        return candidate

    def relative(self, path: Path) -> str:
        """`path` (from `resolve`) as the model should see it: relative, '/'-separated."""
        return path.relative_to(self.real_root()).as_posix()
