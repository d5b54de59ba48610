"""Crash recovery of a command (issue 40, the crash rule): the worker is SIGKILLed while a
child's `run_command` appends a line to a file every 100 ms. The command dies with the
worker, is never started again, and the model gets an "interrupted" result holding what the
command printed until the crash; the log it was read from is removed once it is recorded."""

from __future__ import annotations

import asyncio
import json
import uuid
from pathlib import Path
from typing import Any

import pytest

from .conftest import Launcher
from .recovery_support import kill_worker, tool_results
from .test_commands import leftovers, processes_with
from .wsclient import Client, Rest, call, script

pytestmark = [pytest.mark.e2e, pytest.mark.slow]


async def running(counted: Path, cluster: Any, at_least: int = 5) -> None:
    """Until the command has written `at_least` lines (it runs in a sandboxed process of
    its own: its file is what can be watched)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + 60
    while lines(counted) < at_least:
        assert loop.time() < deadline, cluster.tail()
        await asyncio.sleep(0.05)


def lines(path: Path) -> int:
    try:
        return len(path.read_text().splitlines())
    except FileNotFoundError:
        return 0


async def test_a_command_cut_off_by_a_worker_crash_is_never_run_again(
    rcluster: Launcher, rclient: Client, rrest: Rest
) -> None:
    marker = f"{uuid.uuid4().int % 10**6}.125"
    command = (
        f"for i in $(seq 1 100); do echo tick $i; echo line >> count.txt; sleep 0.1; done; sleep {marker}"
    )
    child = script({"tool_calls": [call("run_command", command=command)]}, {"content": "child went on"})
    created = await rclient.ack(
        "create_session",
        data={
            "content": script(
                {"tool_calls": [call("delegate", agent_type="coder", task=child)]},
                {"content": "parent done"},
            )
        },
    )
    sid = created["sessionId"]
    counted = Path(rcluster.data_dir) / "workspaces" / sid / "count.txt"
    await running(counted, rcluster)  # the command runs: its lines arrive
    kill_worker(rcluster)
    at_kill = lines(counted)
    assert await rclient.wait_phase(sid, timeout=90) == "COMPLETED"
    after = lines(counted)
    # The loop took 10 s to write its 100 lines; a re-run would have added lines since the kill.
    assert after <= at_kill + 1 < 100, (at_kill, after)
    assert processes_with(marker) == []
    (delegated,) = [json.loads(m["content"]) for m in await tool_results(rrest, sid)]
    assert delegated["success"] is True and delegated["result"] == "child went on"
    (result,) = [json.loads(m["content"]) for m in await tool_results(rrest, delegated["child_session_id"])]
    assert result["success"] is False and result["interrupted"] is True
    assert result["error"].startswith("interrupted")
    assert "tick 1\n" in result["output"] and "tick 100" not in result["output"]
    # The round was kept, not discarded and asked again: exactly one command call.
    child_history = await rrest.messages(delegated["child_session_id"], includeDiscarded=1)
    calls = [c for m in child_history if m["role"] == "ASSISTANT" for c in m.get("toolCalls") or []]
    assert [c["function"]["name"] for c in calls] == ["run_command"]
    # What it wrote before the crash is attributed to the child's command all the same.
    (command_round,) = [m for m in child_history if m["role"] == "ASSISTANT" and m.get("toolCalls")]
    assert [
        (c["path"], c["changeType"], c["sourceType"], c["sourceAgentType"])
        for c in command_round["fileChanges"]
    ] == [("count.txt", "CREATED", "SUBAGENT", "coder")]
    # The log the interrupted result was read from is gone with its recording.
    assert [p for p in leftovers(rcluster) if p.startswith(delegated["child_session_id"])] == []


async def test_a_main_sessions_command_cut_off_by_a_harness_crash_is_never_run_again(
    rcluster: Launcher, rclient: Client, rrest: Rest
) -> None:
    marker = f"{uuid.uuid4().int % 10**6}.375"
    command = (
        f"for i in $(seq 1 100); do echo tick $i; echo line >> main.txt; sleep 0.1; done; sleep {marker}"
    )
    created = await rclient.ack(
        "create_session",
        data={
            "content": script(
                {"tool_calls": [call("run_command", command=command)]},
                {"content": "main went on"},
            )
        },
    )
    sid = created["sessionId"]
    counted = Path(rcluster.data_dir) / "workspaces" / sid / "main.txt"
    await running(counted, rcluster)  # the command runs: its lines arrive
    old = rcluster.kill("harness")
    rcluster.wait_restarted("harness", old)
    at_kill = lines(counted)
    assert await rclient.wait_phase(sid, timeout=90) == "COMPLETED"
    assert lines(counted) <= at_kill + 1 < 100
    assert processes_with(marker) == []
    history = await rrest.messages(sid)
    assert [m["role"] for m in history] == ["USER", "ASSISTANT", "TOOL", "ASSISTANT"]
    result = json.loads(history[2]["content"])
    assert result["interrupted"] is True and "tick 1\n" in result["output"]
    assert history[3]["content"] == "main went on"
    assert [(c["path"], c["changeType"], c["sourceType"]) for c in history[1]["fileChanges"]] == [
        ("main.txt", "CREATED", "MAIN")
    ]
    assert [p for p in leftovers(rcluster) if p.startswith(sid)] == []


async def test_a_command_cut_off_by_a_crash_in_a_turn_cancelled_meanwhile_is_answered(
    rcluster: Launcher, rclient: Client, rrest: Rest
) -> None:
    """The harness dies mid-command and the turn is cancelled before it is back: no run
    resumes the session, so the restarted harness answers the call when the cancel reaches it."""
    marker = f"{uuid.uuid4().int % 10**6}.625"
    command = (
        f"for i in $(seq 1 100); do echo tick $i; echo line >> gone.txt; sleep 0.1; done; sleep {marker}"
    )
    created = await rclient.ack(
        "create_session",
        data={"content": script({"tool_calls": [call("run_command", command=command)]}, {"content": "never"})},
    )
    sid = created["sessionId"]
    counted = Path(rcluster.data_dir) / "workspaces" / sid / "gone.txt"
    await running(counted, rcluster)  # the command runs: its lines arrive
    old = rcluster.kill("harness")
    await rclient.ack("cancel", sid)
    at_kill = lines(counted)
    rcluster.wait_restarted("harness", old)

    def answered() -> bool:
        return any(e["type"] == "message" and e["data"]["role"] == "TOOL" for e in rclient.events[sid])

    await rclient.wait_for(answered, 60)
    assert lines(counted) <= at_kill + 1 < 100
    assert processes_with(marker) == []
    history = await rrest.messages(sid)
    assert [m["role"] for m in history] == ["USER", "ASSISTANT", "TOOL"]
    result = json.loads(history[2]["content"])
    assert result["interrupted"] is True and "tick 1\n" in result["output"]
    assert "tick 100" not in result["output"]
    assert [(c["path"], c["changeType"]) for c in history[1]["fileChanges"]] == [("gone.txt", "CREATED")]
    assert (await rrest.json(f"/v1/sessions/{sid}"))["phase"] == "CANCELLED"
    assert [p for p in leftovers(rcluster) if p.startswith(sid)] == []
