"""Capturing file changes: snapshots, the unified diff and its counts, and the event."""

from __future__ import annotations

import json
import threading
from pathlib import Path
from uuid import uuid4

from muster_agent.file_changes import INLINE_BYTES, ChangeRecorder, Pending
from muster_agent.file_snapshots import sha256, take_snapshot, unified_diff
from muster_agent.session_store import SessionState
from muster_agent.tools.registry import local_tool_call
from muster_agent.tools.workspace import Workspace


def state(session_type: str = "SUBAGENT", agent_type: str = "coder") -> SessionState:
    sid = uuid4()
    return SessionState(
        session_id=sid, user_id="alice", session_type=session_type, root_session_id=sid,
        parent_session_id=None, agent_type=agent_type, model_id=None, phase="RUNNING", version=1,
        message_count=2, messages=[], started_tool_calls=frozenset(),
    )


def recorder(tmp_path: Path) -> ChangeRecorder:
    return ChangeRecorder(Workspace(tmp_path), state(), uuid4(), 2)


async def run(rec: ChangeRecorder, name: str, **arguments: object) -> object:
    call = {"id": f"call_{name}", "name": name, "arguments": json.dumps(arguments)}
    _, change = await rec.run(call, local_tool_call(rec.workspace, name, arguments))
    return change


def test_diff_counts_lines_and_marks_a_missing_final_newline() -> None:
    diff, added, deleted = unified_diff("a.txt", "one\ntwo\n", "one\n2\nthree")
    assert (added, deleted) == (2, 1)
    assert diff == (
        "--- a/a.txt\n+++ b/a.txt\n@@ -1,2 +1,3 @@\n one\n-two\n+2\n+three\n"
        "\\ No newline at end of file\n"
    )
    created, added, deleted = unified_diff("n.txt", None, "x\n")
    assert created.startswith("--- /dev/null\n+++ b/n.txt\n") and (added, deleted) == (1, 0)
    removed, added, deleted = unified_diff("n.txt", "x\ny\n", None)
    assert removed.startswith("--- a/n.txt\n+++ /dev/null\n") and (added, deleted) == (0, 2)


def test_content_lines_that_look_like_headers_are_counted() -> None:
    _, added, deleted = unified_diff("h", "--- a\n", "+++ b\n")
    assert (added, deleted) == (1, 1)


def test_only_lf_splits_lines() -> None:
    _, added, deleted = unified_diff("r", "a\rb\n", "a\rc\n")
    assert (added, deleted) == (1, 1)


def test_snapshots(tmp_path: Path) -> None:
    assert take_snapshot(tmp_path / "missing").exists is False
    assert take_snapshot(tmp_path / "missing" / "below").exists is False
    (tmp_path / "t.txt").write_text("héllo\n")
    snap = take_snapshot(tmp_path / "t.txt")
    assert (snap.content, snap.size, snap.note) == ("héllo\n", 7, None)
    (tmp_path / "b.bin").write_bytes(b"\xff\xfe\x00")
    assert take_snapshot(tmp_path / "b.bin").note == "content not captured: not UTF-8 text"
    (tmp_path / "nul.txt").write_bytes(b"a\x00b")
    assert take_snapshot(tmp_path / "nul.txt").note == "content not captured: binary (NUL bytes)"
    (tmp_path / "d").mkdir()
    assert take_snapshot(tmp_path / "d").note == "content not captured: not a regular file"


async def test_create_modify_delete(tmp_path: Path) -> None:
    rec = recorder(tmp_path)
    created = await run(rec, "write_file", path="./x/../f.txt", content="a\nb\n")
    assert created is not None and created.change_type == "CREATED" and created.path == "f.txt"
    assert (created.lines_added, created.lines_deleted, created.before_sha256) == (2, 0, None)
    assert created.after_sha256 == sha256("a\nb\n") and created.after_size == 4
    assert (created.session_type, created.agent_type, created.message_seq) == ("SUBAGENT", "coder", 2)
    edited = await run(rec, "edit_file", path="f.txt", old_string="b", new_string="c")
    assert edited is not None and edited.change_type == "MODIFIED"
    assert (edited.lines_added, edited.lines_deleted) == (1, 1)
    assert edited.before_sha256 == created.after_sha256
    deleted = await run(rec, "delete_file", path="f.txt")
    assert deleted is not None and deleted.change_type == "DELETED"
    assert (deleted.lines_added, deleted.lines_deleted, deleted.after_sha256) == (0, 2, None)
    assert {created.diff_sha256, edited.diff_sha256, deleted.diff_sha256} <= set(rec.blobs)
    assert rec.blobs[sha256("a\nc\n")] == "a\nc\n"


async def test_no_change_and_failed_or_other_tools_record_nothing(tmp_path: Path) -> None:
    rec = recorder(tmp_path)
    assert await run(rec, "write_file", path="same.txt", content="s\n") is not None
    assert await run(rec, "write_file", path="same.txt", content="s\n") is None  # nothing changed
    assert await run(rec, "edit_file", path="same.txt", old_string="zzz", new_string="y") is None
    assert await run(rec, "write_file", path="../escape.txt", content="x") is None
    assert await run(rec, "read_file", path="same.txt") is None
    assert await run(rec, "delete_file", path="nope.txt") is None


async def test_a_binary_file_is_recorded_without_content_and_says_so(tmp_path: Path) -> None:
    rec = recorder(tmp_path)
    (tmp_path / "img.bin").write_bytes(b"\x89PNG\xff")
    change = await run(rec, "write_file", path="img.bin", content="text now\n")
    assert change is not None and change.change_type == "MODIFIED"
    assert (change.diff_sha256, change.before_sha256, change.before_size) == (None, None, 5)
    assert change.after_sha256 == sha256("text now\n")
    assert change.note == "content not captured: not UTF-8 text"


async def test_a_megabyte_file_keeps_the_event_small(tmp_path: Path) -> None:
    rec = recorder(tmp_path)
    big = "".join(f"line {i:06d} {'x' * 88}\n" for i in range(10_000))
    (tmp_path / "big.txt").write_text(big)
    change = await run(rec, "edit_file", path="big.txt", old_string="line 004242 ", new_string="LINE 004242 ")
    assert change is not None and (change.lines_added, change.lines_deleted) == (1, 1)
    assert len(json.dumps(change.payload())) < 1024
    assert change.diff_sha256 is not None and len(rec.blobs[change.diff_sha256]) < 1500
    assert isinstance(rec.before({"id": "c", "name": "write_file", "arguments": '{"path": "big.txt"}'}), Pending)


async def test_a_small_file_call_runs_on_the_loop_a_large_one_in_a_worker_thread(tmp_path: Path) -> None:
    rec = recorder(tmp_path)
    on_loop: list[bool] = []

    def tool() -> dict[str, object]:
        on_loop.append(threading.current_thread() is threading.main_thread())
        return {"success": True, "path": "unused"}

    (tmp_path / "big.txt").write_text("y" * (INLINE_BYTES + 1))
    for name, arguments in (
        ("write_file", {"path": "small.txt", "content": "x"}),
        ("read_file", {"path": "small.txt"}),
        ("write_file", {"path": "big.txt", "content": "x"}),  # the file is large
        ("write_file", {"path": "new.txt", "content": "x" * (INLINE_BYTES + 1)}),  # the content is
        ("edit_file", {"path": "big.txt", "old_string": "y", "new_string": "z"}),
        ("list_files", {"path": "."}),  # a listing may be long
    ):
        await rec.run({"id": "c", "name": name, "arguments": json.dumps(arguments)}, tool)
    assert on_loop == [True, True, False, False, False, False]
