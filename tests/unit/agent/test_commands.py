"""`run_command`'s own function and the workspace comparison, without a cluster (ADR 0037)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from uuid import uuid4

import psutil
import pytest
from muster_agent import command_calls, command_changes
from muster_agent.file_changes import ChangeRecorder
from muster_agent.history import StoredMessage, incomplete_tail
from muster_agent.session_store import SessionState
from muster_agent.tools import commands
from muster_agent.tools.arguments import RunCommand, parse
from muster_agent.tools.commands import CommandPolicy, interrupted_result, run_command
from muster_agent.tools.schemas import COMMAND_TOOL_NAMES, DELEGATION_TOOL_NAMES

POLICY = CommandPolicy(max_timeout_s=30)


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    root = tmp_path / "ws"
    root.mkdir()
    return root


async def run(workspace: Path, command: str, timeout_s: float | None = None, **kw: object) -> dict[str, object]:
    policy = kw.pop("policy", POLICY)
    assert isinstance(policy, CommandPolicy)
    return await run_command(workspace, command, timeout_s, policy=policy, log_path=workspace.parent / "c.log")


def _marked(marker: str) -> list[int]:
    pids = []
    for proc in psutil.process_iter(["cmdline"]):
        try:
            if any(marker in part for part in proc.info["cmdline"] or ()):
                pids.append(proc.pid)
        except psutil.Error:
            continue
    return pids


needs_bwrap = pytest.mark.skipif(
    asyncio.run(commands.sandbox_problem(POLICY.readonly_paths)) is not None, reason="no bubblewrap here"
)


@needs_bwrap
async def test_exit_code_output_and_the_workspace(workspace: Path) -> None:
    result = await run(workspace, "echo out; echo err >&2; pwd; echo made > f.txt; exit 3")
    assert (result["success"], result["exit_code"], result["timed_out"], result["truncated"]) == (False, 3, False, False)
    assert result["output"] == "out\nerr\n/workspace\n"
    assert (workspace / "f.txt").read_text() == "made\n"
    assert (workspace.parent / "c.log").read_text() == "out\nerr\n/workspace\n"


@needs_bwrap
async def test_only_the_workspace_is_writable_and_there_is_no_network(workspace: Path, tmp_path: Path) -> None:
    outside = tmp_path / "outside.txt"
    result = await run(
        workspace,
        f"echo x > {outside}; echo x > /etc/muster-test; ls /etc/shadow /root/.ssh; ps -e | wc -l;"
        " cat /proc/net/dev | wc -l",
    )
    assert not outside.exists() and not Path("/etc/muster-test").exists()
    lines = str(result["output"]).splitlines()
    assert "No such file or directory" in lines[0] and "No such file or directory" in lines[1]  # no host secrets
    assert int(lines[-2]) <= 5  # its own processes only (a header, bash, ps, wc)
    assert lines[-1] == "3"  # only the loopback in its network namespace


@needs_bwrap
async def test_long_output_keeps_head_and_tail(workspace: Path) -> None:
    result = await run(workspace, "seq 1 200000")
    output = str(result["output"])
    assert result["truncated"] is True and result["success"] is True
    assert output.startswith("1\n2\n3\n") and output.endswith("199999\n200000\n")
    assert "bytes of output left out" in output and len(output) < commands.MAX_OUTPUT_BYTES + 200


@needs_bwrap
async def test_timeout_kills_every_process(workspace: Path) -> None:
    marker = f"{uuid4().int % 10**6}.75"
    result = await run(workspace, f"sleep {marker} & sleep {marker}", timeout_s=0.5)
    assert (result["timed_out"], result["success"]) == (True, False)
    assert _marked(marker) == []


@needs_bwrap
async def test_cancel_kills_every_process(workspace: Path) -> None:
    marker = f"{uuid4().int % 10**6}.625"
    task = asyncio.create_task(run(workspace, f"sleep {marker} & sleep {marker}"))
    for _ in range(400):
        if len(_marked(marker)) >= 2:
            break
        await asyncio.sleep(0.025)
    assert len(_marked(marker)) >= 2
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert _marked(marker) == []


async def test_no_sandbox_refuses_unless_unsafe(workspace: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(commands.shutil, "which", lambda name: None)
    refused = await run(workspace, "echo ran > ran.txt")
    assert refused["success"] is False and "bwrap is not installed" in str(refused["error"])
    assert "MUSTER_UNSAFE_COMMANDS" in str(refused["error"]) and not (workspace / "ran.txt").exists()
    unsafe = await run(workspace, "echo ran > ran.txt; pwd", policy=CommandPolicy(unsafe=True))
    assert unsafe["success"] is True and unsafe["sandboxed"] is False and "not sandboxed" in str(unsafe["note"])
    assert str(unsafe["output"]).strip() == str(workspace)


async def test_timeout_is_capped_and_arguments_are_checked(workspace: Path) -> None:
    assert parse(RunCommand, {"command": "ls", "timeout_s": 0}) == "argument 'timeout_s' must be positive"
    assert parse(RunCommand, {"command": 1}) == "argument 'command' must be a string"
    assert parse(RunCommand, {"command": "ls", "timeout_s": 5}) == RunCommand(command="ls", timeout_s=5.0)
    assert (await run(workspace, "  "))["error"] == "command must not be empty"


def test_interrupted_result_holds_the_output_so_far(tmp_path: Path) -> None:
    log = tmp_path / "c.log"
    log.write_text("tick 1\ntick 2\n")
    result = interrupted_result(log)
    assert result["success"] is False and result["interrupted"] is True and result["output"] == "tick 1\ntick 2\n"
    assert str(result["error"]).startswith("interrupted")
    assert interrupted_result(tmp_path / "missing.log")["output"] == ""


def test_a_stopped_commands_result_says_the_turn_ended(tmp_path: Path) -> None:
    log = tmp_path / "c.log"
    log.write_text("begun\n")
    result = interrupted_result(log, commands.STOPPED)
    assert (result["interrupted"], result["output"]) == (True, "begun\n")
    assert str(result["error"]).startswith("interrupted: the turn ended")


def test_forget_removes_a_recorded_commands_log_and_its_scan(tmp_path: Path) -> None:
    session = tmp_path / "commands" / "s1"
    session.mkdir(parents=True)
    first, second = session / "call_1.log", session / "call_2.log"
    for log in (first, second):
        log.write_text("out\n")
        command_changes.save_manifest(command_changes.manifest_path(log), {})
    command_calls.forget([first])
    assert sorted(p.name for p in session.iterdir()) == ["call_2.files.json", "call_2.log"]
    command_calls.forget([second, second])  # the session's last: its directory goes too
    assert not session.exists()


def test_a_round_with_a_started_command_is_not_a_crash_tail() -> None:
    def message(seq: int, role: str, calls: list[dict[str, str]] | None = None) -> StoredMessage:
        return StoredMessage(uuid4(), seq, role, "", calls, None)

    history = [message(1, "USER"), message(2, "ASSISTANT", [{"id": "c1", "name": "run_command", "arguments": "{}"}])]
    assert incomplete_tail(history, frozenset({"c1"}), DELEGATION_TOOL_NAMES) == [history[1]]
    assert incomplete_tail(history, frozenset({"c1"}), DELEGATION_TOOL_NAMES | COMMAND_TOOL_NAMES) == []


def test_the_workspace_comparison_finds_created_modified_and_deleted(workspace: Path) -> None:
    (workspace / "keep.txt").write_text("same\n")
    (workspace / "edit.txt").write_text("one\ntwo\n")
    (workspace / "gone.txt").write_text("bye\n")
    (workspace / "__pycache__").mkdir()
    before = command_changes.scan(workspace, keep=True)
    (workspace / "edit.txt").write_text("one\n2\n")
    (workspace / "gone.txt").unlink()
    (workspace / "sub").mkdir()
    (workspace / "sub" / "new.txt").write_text("new\n")
    (workspace / "__pycache__" / "x.pyc").write_bytes(b"\0")
    after = command_changes.scan(workspace, keep=False)
    state = SessionState(session_id=uuid4(), user_id="u", session_type="SUBAGENT", root_session_id=uuid4(),
                         parent_session_id=uuid4(), agent_type="coder", model_id=None, phase="RUNNING",
                         version=1, message_count=1, messages=[], started_tool_calls=frozenset())
    recorder = ChangeRecorder(None, state, uuid4(), 2)  # type: ignore[arg-type]
    found = command_changes.changes(recorder, "c1", workspace, before, after)
    assert [(c.path, c.change_type, c.lines_added, c.lines_deleted) for c in found] == [
        ("edit.txt", "MODIFIED", 1, 1), ("gone.txt", "DELETED", 0, 1), ("sub/new.txt", "CREATED", 1, 0)]
    assert all(c.tool_call_id == "c1" and c.agent_type == "coder" for c in found)
    assert json.dumps(sorted(recorder.blobs)) and found[0].diff_sha256 in recorder.blobs


def test_the_scan_before_a_command_survives_on_disk(workspace: Path, tmp_path: Path) -> None:
    (workspace / "a.txt").write_text("a\n")
    before = command_changes.scan(workspace, keep=True)
    manifest = command_changes.manifest_path(tmp_path / "logs" / "call_1.log")
    assert manifest.name == "call_1.files.json"
    command_changes.save_manifest(manifest, before)
    loaded = command_changes.load_manifest(manifest)
    assert loaded is not None and {p: (e.size, e.digest) for p, e in loaded.items()} == {
        p: (e.size, e.digest) for p, e in before.items()}
    manifest.write_text("{not json")
    assert command_changes.load_manifest(manifest) is None
    assert command_changes.load_manifest(tmp_path / "missing.json") is None


@needs_bwrap
async def test_the_operator_caps_the_timeout(workspace: Path) -> None:
    result = await run(workspace, "sleep 20", timeout_s=600, policy=CommandPolicy(max_timeout_s=0.5))
    assert result["timed_out"] is True and int(str(result["duration_ms"])) < 5000
    assert "timed out after 0.5 s" in str(result["error"])
