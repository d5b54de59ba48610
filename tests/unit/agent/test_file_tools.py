"""The local file tools through `run_local_tool`: result shapes and failure messages."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from muster_agent.tools import Workspace, run_local_tool
from muster_agent.tools.files import MAX_FILE_BYTES, MAX_LIST_ENTRIES


@pytest.fixture
def ws(tmp_path: Path) -> Workspace:
    return Workspace(tmp_path / "ws")


async def call(ws: Workspace, name: str, **arguments: Any) -> dict[str, Any]:
    result = await run_local_tool(ws, name, arguments)
    json.dumps(result)  # every result must be storable as the TOOL message's JSON string
    return result


def failed(result: dict[str, Any]) -> str:
    assert set(result) == {"success", "error"} and result["success"] is False
    return str(result["error"])


async def test_write_then_read(ws: Workspace) -> None:
    result = await call(ws, "write_file", path="src/pkg/a.txt", content="héllo\n")
    assert result == {"success": True, "path": "src/pkg/a.txt", "bytes": 7}
    assert (ws.root / "src/pkg/a.txt").read_bytes() == "héllo\n".encode()
    result = await call(ws, "read_file", path="./src/pkg/../pkg/a.txt")
    assert result == {"success": True, "path": "src/pkg/a.txt", "content": "héllo\n"}


async def test_write_overwrites_atomically_and_leaves_no_temp_file(ws: Workspace) -> None:
    await call(ws, "write_file", path="a.txt", content="one")
    await call(ws, "write_file", path="a.txt", content="two")
    assert [p.name for p in ws.root.iterdir()] == ["a.txt"]
    assert (await call(ws, "read_file", path="a.txt"))["content"] == "two"


async def test_write_errors(ws: Workspace) -> None:
    await call(ws, "write_file", path="f", content="x")
    assert failed(await call(ws, "write_file", path="f/g.txt", content="x")) == (
        "cannot write 'f/g.txt': 'f' is a file"
    )
    (ws.root / "d").mkdir()
    assert failed(await call(ws, "write_file", path="d", content="x")) == (
        "'d' is a directory, not a file"
    )
    too_big = "x" * (MAX_FILE_BYTES + 1)
    assert "larger than 4 MiB" in failed(await call(ws, "write_file", path="b", content=too_big))


async def test_write_through_an_inside_symlink_keeps_the_link(ws: Workspace) -> None:
    await call(ws, "write_file", path="real.txt", content="old")
    (ws.root / "alias.txt").symlink_to("real.txt")
    await call(ws, "write_file", path="alias.txt", content="new")
    assert (ws.root / "alias.txt").is_symlink()
    assert (ws.root / "real.txt").read_text() == "new"


async def test_read_errors(ws: Workspace) -> None:
    assert failed(await call(ws, "read_file", path="nope.txt")) == "file not found: 'nope.txt'"
    (ws.root / "dir").mkdir()
    assert failed(await call(ws, "read_file", path="dir")) == "'dir' is a directory, not a file"
    (ws.root / "bin").write_bytes(b"\xff\xfe\x00")
    assert failed(await call(ws, "read_file", path="bin")) == "file 'bin' is not UTF-8 text"


async def test_read_refuses_files_over_4_mib(ws: Workspace) -> None:
    ws.real_root()
    (ws.root / "ok").write_bytes(b"a" * MAX_FILE_BYTES)
    assert len((await call(ws, "read_file", path="ok"))["content"]) == MAX_FILE_BYTES
    (ws.root / "big").write_bytes(b"a" * (MAX_FILE_BYTES + 1))
    assert failed(await call(ws, "read_file", path="big")) == (
        "file 'big' is larger than 4 MiB (the limit is 4194304 bytes)"
    )


async def test_edit_file_replaces_a_unique_occurrence(ws: Workspace) -> None:
    await call(ws, "write_file", path="a.py", content="x = 1\ny = 2\n")
    result = await call(ws, "edit_file", path="a.py", old_string="y = 2", new_string="y = 3")
    assert result == {"success": True, "path": "a.py", "replacements": 1}
    assert (ws.root / "a.py").read_text() == "x = 1\ny = 3\n"


async def test_edit_file_twice_occurring_old_string_needs_replace_all(ws: Workspace) -> None:
    await call(ws, "write_file", path="a.txt", content="foo bar foo")
    result = await call(ws, "edit_file", path="a.txt", old_string="foo", new_string="baz")
    assert failed(result) == "old_string occurs 2 times; pass replace_all or make it unique"
    assert (ws.root / "a.txt").read_text() == "foo bar foo"  # untouched
    result = await call(
        ws, "edit_file", path="a.txt", old_string="foo", new_string="baz", replace_all=True
    )
    assert result == {"success": True, "path": "a.txt", "replacements": 2}
    assert (ws.root / "a.txt").read_text() == "baz bar baz"


async def test_edit_file_errors(ws: Workspace) -> None:
    await call(ws, "write_file", path="a.txt", content="abc")
    edit = {"path": "a.txt", "new_string": "z"}
    assert failed(await call(ws, "edit_file", old_string="q", **edit)) == (
        "old_string not found in 'a.txt'"
    )
    assert failed(await call(ws, "edit_file", old_string="", **edit)) == (
        "old_string must not be empty"
    )
    assert failed(
        await call(ws, "edit_file", path="b.txt", old_string="a", new_string="b")
    ) == "file not found: 'b.txt'"


async def test_delete_then_read_fails(ws: Workspace) -> None:
    await call(ws, "write_file", path="a/b.txt", content="x")
    assert await call(ws, "delete_file", path="a/b.txt") == {"success": True, "path": "a/b.txt"}
    assert failed(await call(ws, "read_file", path="a/b.txt")) == "file not found: 'a/b.txt'"
    assert failed(await call(ws, "delete_file", path="a/b.txt")) == "file not found: 'a/b.txt'"
    assert failed(await call(ws, "delete_file", path="a")) == (
        "'a' is a directory; delete_file deletes files only"
    )
    assert (ws.root / "a").is_dir()


async def test_delete_removes_a_symlink_not_its_target(ws: Workspace) -> None:
    await call(ws, "write_file", path="real.txt", content="x")
    (ws.root / "alias.txt").symlink_to("real.txt")
    assert (await call(ws, "delete_file", path="alias.txt"))["success"] is True
    assert (ws.root / "real.txt").exists() and not (ws.root / "alias.txt").exists()


async def test_list_files_is_sorted_recursive_and_marks_directories(ws: Workspace) -> None:
    for path in ("b.txt", "a/z.txt", "a/sub/y.txt", "c/x.txt"):
        await call(ws, "write_file", path=path, content="")
    (ws.root / "empty").mkdir()
    result = await call(ws, "list_files")
    assert result == {
        "success": True, "path": ".", "truncated": False,
        "files": ["a/", "a/sub/", "a/sub/y.txt", "a/z.txt", "b.txt", "c/", "c/x.txt", "empty/"],
    }
    assert (await call(ws, "list_files", path=""))["files"] == result["files"]
    sub = await call(ws, "list_files", path="a")
    assert (sub["path"], sub["files"]) == ("a", ["a/sub/", "a/sub/y.txt", "a/z.txt"])


async def test_list_files_on_a_new_workspace_is_empty(ws: Workspace) -> None:
    assert (await call(ws, "list_files"))["files"] == []


async def test_list_files_errors(ws: Workspace) -> None:
    await call(ws, "write_file", path="f.txt", content="")
    assert failed(await call(ws, "list_files", path="nope")) == "directory not found: 'nope'"
    assert failed(await call(ws, "list_files", path="f.txt")) == (
        "'f.txt' is a file, not a directory"
    )
    assert "outside the workspace" in failed(await call(ws, "list_files", path=".."))


async def test_list_files_is_bounded(ws: Workspace) -> None:
    root = ws.real_root()
    for i in range(MAX_LIST_ENTRIES + 5):
        (root / f"f{i:05d}").touch()
    result = await call(ws, "list_files")
    assert result["truncated"] is True
    assert result["files"] == [f"f{i:05d}" for i in range(MAX_LIST_ENTRIES)]


async def test_list_files_does_not_enter_symlinked_directories(
    ws: Workspace, tmp_path: Path
) -> None:
    (tmp_path / "outside").mkdir()
    (tmp_path / "outside" / "secret.txt").write_text("s")
    (ws.real_root() / "link").symlink_to(tmp_path / "outside")
    assert (await call(ws, "list_files"))["files"] == ["link/"]


ESCAPE_ARGUMENTS: dict[str, dict[str, Any]] = {
    "read_file": {},
    "write_file": {"content": "pwned"},
    "edit_file": {"old_string": "keep", "new_string": "lose"},
    "delete_file": {},
}


@pytest.mark.parametrize("tool", sorted(ESCAPE_ARGUMENTS))
async def test_every_tool_refuses_escapes(ws: Workspace, tmp_path: Path, tool: str) -> None:
    (tmp_path / "outside").mkdir()
    victim = tmp_path / "outside" / "victim.txt"
    victim.write_text("keep me")
    (ws.real_root() / "link").symlink_to(tmp_path / "outside")
    for path, message in [
        ("../outside/victim.txt", "path '../outside/victim.txt' is outside the workspace"),
        (str(victim), f"absolute paths are not allowed: '{victim}'"),
        ("link/victim.txt", "is outside the workspace (through a symbolic link)"),
    ]:
        arguments = {"path": path, **ESCAPE_ARGUMENTS[tool]}
        assert message in failed(await run_local_tool(ws, tool, arguments))
    assert victim.read_text() == "keep me"
