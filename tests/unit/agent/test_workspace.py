"""Workspace confinement: every way out of the root is refused with a precise message."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from muster_agent.tools import Workspace, WorkspaceError


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    secret = tmp_path / "outside"
    secret.mkdir()
    (secret / "secret.txt").write_text("top secret")
    return secret


@pytest.fixture
def ws(tmp_path: Path) -> Workspace:
    return Workspace(tmp_path / "workspaces" / "root-1")


def test_root_is_created_on_demand(ws: Workspace) -> None:
    assert not ws.root.exists()
    assert ws.resolve("a/b.txt") == ws.root.resolve() / "a" / "b.txt"
    assert ws.root.is_dir()


@pytest.mark.parametrize(
    ("path", "message"),
    [
        ("../../etc/passwd", "path '../../etc/passwd' is outside the workspace"),
        ("..", "path '..' is outside the workspace"),
        ("a/../../x", "path 'a/../../x' is outside the workspace"),
        ("./a/b/../../../x", "path './a/b/../../../x' is outside the workspace"),
        ("/etc/passwd", "absolute paths are not allowed: '/etc/passwd'"),
        ("//etc/passwd", "absolute paths are not allowed: '//etc/passwd'"),
        ("~/x", "absolute paths are not allowed: '~/x'"),
        ("", "path must not be empty"),
        ("   ", "path must not be empty"),
        ("a\x00b", "path 'a\\x00b' contains a NUL byte"),
    ],
)
def test_refused_paths(ws: Workspace, path: str, message: str) -> None:
    with pytest.raises(WorkspaceError) as info:
        ws.resolve(path)
    assert str(info.value) == message


def test_non_string_path_is_refused(ws: Workspace) -> None:
    with pytest.raises(WorkspaceError, match="must be a string"):
        ws.resolve(42)  # type: ignore[arg-type]


def test_dot_dot_that_stays_inside_is_allowed(ws: Workspace) -> None:
    root = ws.real_root()
    assert ws.resolve("a/../b.txt") == root / "b.txt"
    assert ws.resolve("./x/./y") == root / "x" / "y"
    assert ws.resolve(".") == root
    assert ws.relative(ws.resolve("a/../b.txt")) == "b.txt"
    assert ws.relative(ws.resolve(".")) == "."


def test_symlink_inside_pointing_outside_is_refused(ws: Workspace, outside: Path) -> None:
    root = ws.real_root()
    (root / "link").symlink_to(outside)
    (root / "file-link").symlink_to(outside / "secret.txt")
    for path in ("link", "link/secret.txt", "link/new.txt", "file-link"):
        with pytest.raises(WorkspaceError) as info:
            ws.resolve(path)
        assert str(info.value) == (
            f"path '{path}' is outside the workspace (through a symbolic link)"
        )
    # `..` is applied to the text before the disk is consulted, so this names root/x (not
    # the link target's sibling), and root/x is what the tools then act on.
    assert ws.resolve("link/../x") == root / "x"


def test_symlink_deep_in_the_path_is_checked(ws: Workspace, outside: Path) -> None:
    root = ws.real_root()
    (root / "a" / "b").mkdir(parents=True)
    (root / "a" / "b" / "up").symlink_to("../../..")  # climbs above the root
    with pytest.raises(WorkspaceError, match="outside the workspace"):
        ws.resolve("a/b/up/outside/secret.txt")


def test_symlink_pointing_inside_is_allowed(ws: Workspace) -> None:
    root = ws.real_root()
    (root / "real").mkdir()
    (root / "alias").symlink_to("real")
    assert ws.resolve("alias/f.txt") == root / "alias" / "f.txt"


def test_symlink_loop_is_refused(ws: Workspace) -> None:
    root = ws.real_root()
    os.symlink("loop2", root / "loop1")
    os.symlink("loop1", root / "loop2")
    with pytest.raises(WorkspaceError, match="loop1"):
        ws.resolve("loop1/x")


def test_root_behind_a_symlink_still_works(tmp_path: Path) -> None:
    (tmp_path / "real-root").mkdir()
    (tmp_path / "root-link").symlink_to(tmp_path / "real-root")
    ws = Workspace(tmp_path / "root-link")
    assert ws.resolve("a.txt") == tmp_path / "real-root" / "a.txt"
