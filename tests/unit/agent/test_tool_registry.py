"""Argument validation and dispatch of `run_local_tool`."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest
from muster_agent.tools import Workspace, is_local_tool, registry, run_local_tool
from muster_agent.tools.arguments import ReadFile


@pytest.fixture
def ws(tmp_path: Path) -> Workspace:
    return Workspace(tmp_path / "ws")


@pytest.mark.parametrize(
    ("name", "arguments", "message"),
    [
        ("read_file", {}, "missing required argument 'path'"),
        ("read_file", {"path": None}, "missing required argument 'path'"),
        ("read_file", {"path": 3}, "argument 'path' must be a string"),
        ("write_file", {"path": "a"}, "missing required argument 'content'"),
        ("write_file", {"path": "a", "content": ["x"]}, "argument 'content' must be a string"),
        ("edit_file", {"path": "a", "old_string": "x"}, "missing required argument 'new_string'"),
        ("edit_file", {"path": "a", "old_string": "x", "new_string": "y", "replace_all": "yes"},
         "argument 'replace_all' must be a boolean"),
        ("list_files", {"path": 7}, "argument 'path' must be a string"),
        ("read_file", "{bad", "arguments are not valid JSON; send a JSON object"),
        ("read_file", ["a"], "arguments must be a JSON object"),
        ("rm_rf", {}, "unknown tool 'rm_rf'"),
        ("delegate", {"agent_type": "x", "task": "y"},
         "'delegate' is a delegation tool, not a local tool"),
    ],
)
async def test_bad_calls_get_precise_errors(
    ws: Workspace, name: str, arguments: Any, message: str
) -> None:
    assert await run_local_tool(ws, name, arguments) == {"success": False, "error": message}


async def test_unknown_extra_arguments_are_ignored(ws: Workspace) -> None:
    result = await run_local_tool(ws, "write_file", {"path": "a", "content": "x", "mode": 7})
    assert result == {"success": True, "path": "a", "bytes": 1}


async def test_tools_run_off_the_event_loop_thread(
    ws: Workspace, monkeypatch: pytest.MonkeyPatch
) -> None:
    threads: list[threading.Thread] = []

    def spy(workspace: Workspace, *, path: str) -> dict[str, Any]:
        threads.append(threading.current_thread())
        return {"success": True}

    monkeypatch.setitem(registry._TOOLS, "read_file", registry._Spec(spy, ReadFile))
    assert await run_local_tool(ws, "read_file", {"path": "a"}) == {"success": True}
    assert threads and threads[0] is not threading.current_thread()


def test_is_local_tool() -> None:
    assert is_local_tool("edit_file") and not is_local_tool("delegate")
