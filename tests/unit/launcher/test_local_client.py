"""The LOCAL client (`muster local-client`, `muster chat --local`) against an in-process
fake gateway: tool requests run in its directory, once per requestId, and it reconnects."""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path

import pytest
from muster_client import ServerError
from muster_launcher.chat import chat
from muster_launcher.local_client import LocalClient
from muster_launcher.local_journal import INTERRUPTED, RequestJournal

from tests.unit.client.fake_gateway import FakeGateway, running


def results(gw: FakeGateway, request_id: str) -> list[dict[str, object]]:
    return [f["data"]["result"] for f in gw.tool_results if f["data"]["requestId"] == request_id]


async def wait_results(client: LocalClient, gw: FakeGateway, request_id: str, count: int = 1) -> None:
    await client.conn.wait_for(lambda: len(results(gw, request_id)) >= count, 10)


async def test_a_tool_request_writes_the_file_and_answers(tmp_path: Path) -> None:
    work, lines = tmp_path / "work", []
    work.mkdir()
    async with running() as gw, LocalClient(gw.url, "t", work, state_dir=tmp_path / "state", emit=lines.append) as client:
        assert gw.of_type("hello")[0]["data"] == {"localTools": True}
        await gw.tool_request("r1", "write_file", {"path": "notes/a.txt", "content": "hello"})
        await wait_results(client, gw, "r1")
        assert (work / "notes" / "a.txt").read_text() == "hello"
        frame = gw.tool_results[0]
        assert frame["sessionId"] == "s1" and isinstance(frame["id"], str)
        assert frame["data"]["result"] == {"success": True, "path": "notes/a.txt", "bytes": 5}
        await gw.tool_request("r2", "read_file", {"path": "notes/a.txt"})
        await wait_results(client, gw, "r2")
        assert results(gw, "r2")[0]["success"] is True and "hello" in json.dumps(results(gw, "r2"))
    assert "tool_request_served request=r1 tool=write_file success=true" in lines
    assert not any("hello" in line for line in lines if line.startswith("tool_request")), "no contents logged"


async def test_a_repeated_request_runs_once_and_gets_the_same_result(tmp_path: Path) -> None:
    async with running() as gw, LocalClient(gw.url, "t", tmp_path, state_dir=tmp_path / ".s", emit=lambda _: None) as client:
        await gw.tool_request("r1", "write_file", {"path": "a.txt", "content": "first"})
        await wait_results(client, gw, "r1")
        (tmp_path / "a.txt").write_text("changed by the user")
        await gw.tool_request("r1", "write_file", {"path": "a.txt", "content": "first"})
        await wait_results(client, gw, "r1", 2)
        assert (tmp_path / "a.txt").read_text() == "changed by the user"
        first, second = results(gw, "r1")
        assert first == second and client.tools.runs == 1


async def test_a_path_escaping_the_directory_gets_an_error_result(tmp_path: Path) -> None:
    work = tmp_path / "work"
    work.mkdir()
    (work / "out").symlink_to(tmp_path)
    async with running() as gw, LocalClient(gw.url, "t", work, persist=False, emit=lambda _: None) as client:
        for n, path in enumerate(("../escaped.txt", "/tmp/abs.txt", "out/escaped.txt")):
            await gw.tool_request(f"r{n}", "write_file", {"path": path, "content": "x"})
            await wait_results(client, gw, f"r{n}")
            result = results(gw, f"r{n}")[0]
            assert result["success"] is False and "error" in result, result
        await gw.tool_request("r9", "delegate", {"agent_type": "coder", "task": "x"})
        await wait_results(client, gw, "r9")
        assert results(gw, "r9")[0]["success"] is False
    assert not (tmp_path / "escaped.txt").exists()


async def test_reconnect_sends_hello_again_and_serves_the_resent_request(tmp_path: Path) -> None:
    lines: list[str] = []
    async with running() as gw, LocalClient(gw.url, "t", tmp_path, persist=False, emit=lines.append,
                                            max_delay=0.2) as client:
        await gw.drop()
        await client.conn.wait_for(lambda: gw.hellos == 2 and client.conn.connects == 2, 10)
        # The request was outstanding while the client was away: the hello brings it.
        gw.outstanding["r1"] = {"type": "tool_request", "sessionId": "s1", "data": {
            "requestId": "r1", "toolCallId": "c1", "name": "write_file",
            "arguments": {"path": "b.txt", "content": "b"}}}
        await gw.drop()
        await wait_results(client, gw, "r1")
        assert gw.hellos == 3 and (tmp_path / "b.txt").read_text() == "b"
    assert "local_client_hello connects=3" in lines


async def test_the_journal_survives_a_client_restart(tmp_path: Path) -> None:
    work, state = tmp_path / "work", tmp_path / "state"
    work.mkdir()
    async with running() as gw:
        async with LocalClient(gw.url, "t", work, state_dir=state, emit=lambda _: None) as first:
            await gw.tool_request("r1", "write_file", {"path": "c.txt", "content": "once"})
            await wait_results(first, gw, "r1")
        (work / "c.txt").unlink()
        gw.outstanding["r1"] = gw.outstanding.get("r1") or {"type": "tool_request", "sessionId": "s1", "data": {
            "requestId": "r1", "toolCallId": "c1", "name": "write_file",
            "arguments": {"path": "c.txt", "content": "once"}}}
        async with LocalClient(gw.url, "t", work, state_dir=state, emit=lambda _: None) as second:
            await wait_results(second, gw, "r1", 2)
            assert second.tools.runs == 0 and not (work / "c.txt").exists()


def test_journal_bounds_interruptions_and_compaction(tmp_path: Path) -> None:
    path = tmp_path / "requests.jsonl"
    journal = RequestJournal(path, limit=3)
    journal.start("cut")  # the client "dies" while this one runs
    for n in range(7):
        journal.start(f"r{n}")
        journal.finish(f"r{n}", {"success": True, "n": n})
    journal.close()
    assert len(path.read_text().splitlines()) <= 7  # compacted past 2 x limit
    reopened = RequestJournal(path, limit=3)
    assert len(reopened) == 3 and reopened.result("r6") == {"success": True, "n": 6}
    assert reopened.result("r0") is None  # evicted: only the newest `limit` are kept
    reopened.close()
    with path.open("a") as out:
        out.write(json.dumps({"requestId": "cut", "started": True}) + "\n" + '{"requestId": "trunc')
    again = RequestJournal(path)
    assert again.result("cut") == INTERRUPTED
    again.close()


async def test_two_requests_arriving_together_run_once(tmp_path: Path) -> None:
    async with running() as gw, LocalClient(gw.url, "t", tmp_path, persist=False, emit=lambda _: None) as client:
        frame = {"type": "tool_request", "sessionId": "s1", "data": {
            "requestId": "r1", "toolCallId": "c1", "name": "write_file", "arguments": {"path": "d.txt", "content": "d"}}}
        await asyncio.gather(gw.broadcast(frame), gw.broadcast(frame))
        await wait_results(client, gw, "r1")
        await client.tools.drain()
        assert client.tools.runs == 1


async def test_chat_local_creates_a_local_session_and_serves_its_tools(tmp_path: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    async with running() as gw:
        turn = asyncio.create_task(chat(gw.url, "t", "write it", None, local=tmp_path, state_dir=tmp_path / ".s"))
        while not gw.of_type("create_session"):
            await asyncio.sleep(0.01)
        assert gw.of_type("create_session")[0]["data"]["executionMode"] == "LOCAL"
        assert gw.of_type("hello")
        await gw.event("s-new", "session_status", {"phase": "RUNNING"})
        await gw.tool_request("r1", "write_file", {"path": "e.txt", "content": "e"}, session_id="s-new")
        while not gw.tool_results:
            await asyncio.sleep(0.01)
        await gw.event("s-new", "session_status", {"phase": "COMPLETED"})
        assert await asyncio.wait_for(turn, 10) == 0
    assert (tmp_path / "e.txt").read_text() == "e"
    out, err = capsys.readouterr()
    assert "session: s-new" in out and "-- COMPLETED" in out
    assert "tool_request_served request=r1 tool=write_file success=true" in err


async def test_a_refused_hello_fails_the_start(tmp_path: Path) -> None:
    lines: list[str] = []
    async with running() as gw:
        gw.refuse_hello = True
        client = LocalClient(gw.url, "t", tmp_path, persist=False, emit=lines.append)
        with pytest.raises(ServerError):
            await client.start(within=5)
        await client.close()
    assert lines == ["local_client_hello_refused code=unknown_type"]


async def test_the_local_client_command_serves_until_stopped(tmp_path: Path) -> None:
    async with running() as gw:
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "muster_launcher.cli", "local-client", str(tmp_path),
            "--url", gw.url, "--token", "t", "--state-dir", str(tmp_path / ".state"),
            stdout=asyncio.subprocess.PIPE,
        )
        try:
            assert proc.stdout is not None
            lines = [(await asyncio.wait_for(proc.stdout.readline(), 30)).decode() for _ in range(2)]
            assert lines[0].startswith("local_client_hello connects=1") and lines[1].startswith("local_client_ready")
            await gw.tool_request("r1", "write_file", {"path": "f.txt", "content": "secret"})
            line = (await asyncio.wait_for(proc.stdout.readline(), 30)).decode()
            assert line.strip() == "tool_request_served request=r1 tool=write_file success=true"
            assert (tmp_path / "f.txt").read_text() == "secret"
        finally:
            proc.terminate()
            await proc.wait()


async def test_run_command_runs_in_the_directory_and_says_when_it_cannot_sandbox(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from muster_agent.tools import commands

    work = tmp_path / "work"
    work.mkdir()
    async with running() as gw, LocalClient(gw.url, "t", work, state_dir=tmp_path / "state", emit=lambda _: None) as client:
        await gw.tool_request("c1", "run_command", {"command": "echo hi > made.txt; echo done"})
        await wait_results(client, gw, "c1")
        (sandboxed,) = results(gw, "c1")
        assert (work / "made.txt").read_text() == "hi\n"
        if await commands.sandbox_problem(client.tools.commands.readonly_paths) is None:
            assert sandboxed["success"] is True and sandboxed["output"] == "done\n" and "sandboxed" not in sandboxed
        monkeypatch.setattr(commands.shutil, "which", lambda name: None)  # a machine without bubblewrap
        await gw.tool_request("c2", "run_command", {"command": "pwd", "timeout_s": 5})
        await wait_results(client, gw, "c2")
        (unsandboxed,) = results(gw, "c2")
        assert unsandboxed["success"] is True and unsandboxed["output"] == f"{work.resolve()}\n"
        assert unsandboxed["sandboxed"] is False and "not sandboxed" in str(unsandboxed["note"])
        await gw.tool_request("c3", "run_command", {"timeout_s": 5})
        await wait_results(client, gw, "c3")
        assert results(gw, "c3")[0] == {"success": False, "error": "missing required argument 'command'"}
