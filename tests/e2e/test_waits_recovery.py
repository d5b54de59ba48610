"""Waits through crashes (issue 11): an approval answered after SIGKILL of harness, worker
and recovery runs the tool exactly once; a pending question survives restarts; a gateway
restart mid-request re-sends the LOCAL request and the client runs it once; a LOCAL child
whose client never connects fails at its absolute deadline, which a recovery restart does
not extend, and its parent goes on."""

from __future__ import annotations

import asyncio
import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import asyncpg
import pytest

from .local_client import LocalClient
from .recovery_support import restart_recovery
from .wsclient import Client, Rest, call, script

pytestmark = pytest.mark.e2e

WRITE = {"tool_calls": [call("write_file", path="once.md", content="exactly once")]}


def frames(client: Client, session_id: str, kind: str) -> list[dict[str, Any]]:
    return [e["data"] for e in client.events[session_id] if e["type"] == kind]


async def wait_frame(client: Client, session_id: str, kind: str, count: int = 1) -> dict[str, Any]:
    await client.wait_for(lambda: len(frames(client, session_id, kind)) >= count, 60)
    return frames(client, session_id, kind)[count - 1]


async def db_rows(cluster: Any, query: str, *args: Any) -> list[Any]:
    conn = await asyncpg.connect(cluster.database_url)
    try:
        return list(await conn.fetch(query, *args))
    finally:
        await conn.close()


def kill_and_wait(cluster: Any, *names: str) -> None:
    for name in names:
        old = cluster.kill(name)
        cluster.wait_restarted(name, old)


async def test_approve_after_killing_every_runner_runs_the_tool_exactly_once(
    rcluster, rclient: Client, rrest: Rest
) -> None:
    ask = script(WRITE, {"content": "approved and written"})
    sid = str((await rclient.ack("create_session", data={"content": ask, "permissionLevel": "ask"}))["sessionId"])
    requested = await wait_frame(rclient, sid, "approval_requested")
    restart_recovery(rcluster)
    kill_and_wait(rcluster, "harness", "subagent-worker")
    await rclient.ack("answer_approval", sid, {"approvalId": requested["approvalId"], "decision": "approve"})
    assert await rclient.wait_phase(sid, timeout=90) == "COMPLETED"
    starts = await db_rows(rcluster, "SELECT 1 FROM events WHERE stream_id = $1 AND type = 'ToolCallStarted'", sid)
    assert len(starts) == 1
    assert (Path(rcluster.data_dir) / "workspaces" / sid / "once.md").read_text() == "exactly once"
    twice = await rclient.request("answer_approval", sid, {"approvalId": requested["approvalId"], "decision": "approve"})
    assert twice["data"]["code"] == "conflict"
    bobs = await Client.connect(rcluster.ws_url, rcluster.tokens["bob"])
    try:
        foreign = await bobs.request("answer_approval", sid, {"approvalId": requested["approvalId"], "decision": "deny"})
        assert foreign["data"]["code"] == "not_found"
    finally:
        await bobs.close()


async def test_a_childs_pending_approval_survives_every_runner_dying(rcluster, rclient: Client, rrest: Rest) -> None:
    task = script(WRITE, {"content": "child wrote"})
    steps = script({"tool_calls": [call("delegate", agent_type="coder", task=task)]}, {"content": "parent done"})
    sid = str((await rclient.ack("create_session", data={"content": steps, "permissionLevel": "ask"}))["sessionId"])
    first = await wait_frame(rclient, sid, "approval_requested")
    await rclient.ack("answer_approval", sid, {"approvalId": first["approvalId"], "decision": "approve"})
    child = (await wait_frame(rclient, sid, "subagent_session_created"))["childSessionId"]
    await rclient.ack("subscribe", child, {"afterPosition": 0})
    request = await wait_frame(rclient, child, "approval_requested")
    restart_recovery(rcluster)
    kill_and_wait(rcluster, "harness", "subagent-worker")
    # The restarts outlast the worker's lease (3 s) many times over, and recovery scans every
    # 0.5 s: had it treated the waiting child as orphaned, it would have taken it over.
    await rclient.ack("answer_approval", child, {"approvalId": request["approvalId"], "decision": "approve"})
    assert await rclient.wait_phase(sid, timeout=90) == "COMPLETED"
    # Never taken over while it waited: a takeover, if any, came after the answer (a worker
    # still joining its consumer group when the answer's RunExecution left may need one).
    (execution,) = await db_rows(rcluster, "SELECT execution_id FROM executions WHERE parent_session_id = $1", sid)
    takeovers = await db_rows(
        rcluster, "SELECT position FROM events WHERE stream_id = $1 AND type = 'ExecutionRecovering'",
        str(execution["execution_id"]))
    (answered,) = await db_rows(
        rcluster, "SELECT position FROM events WHERE stream_id = $1 AND type = 'ApprovalResolved'", child)
    assert all(t["position"] > answered["position"] for t in takeovers)
    starts = await db_rows(rcluster, "SELECT 1 FROM events WHERE stream_id = $1 AND type = 'ToolCallStarted'", child)
    assert len(starts) == 1


async def test_a_pending_question_survives_a_restart_of_every_service(rcluster, rrest: Rest) -> None:
    client = await Client.connect(rcluster.ws_url, rcluster.tokens["alice"])
    ask = script({"tool_calls": [call("ask_user", question="Proceed?")]}, {"content": "proceeding"})
    sid = str((await client.ack("create_session", data={"content": ask}))["sessionId"])
    asked = await wait_frame(client, sid, "question_asked")
    await client.close()
    restart_recovery(rcluster)
    kill_and_wait(rcluster, "harness", "gateway")
    client = await Client.connect(rcluster.ws_url, rcluster.tokens["alice"])
    try:
        await client.ack("subscribe", sid, {"afterPosition": 0})
        pending = await rrest.json(f"/v1/sessions/{sid}/questions", status="pending")
        assert [q["questionId"] for q in pending["items"]] == [asked["questionId"]]
        await client.ack("answer_question", sid, {"questionId": asked["questionId"], "answer": "yes"})
        assert await client.wait_phase(sid, timeout=90) == "COMPLETED"
    finally:
        await client.close()
    tool = [m for m in await rrest.messages(sid) if m["role"] == "TOOL"]
    assert json.loads(tool[0]["content"]) == {"success": True, "answer": "yes"}


async def test_a_gateway_restart_mid_request_resends_it_and_the_client_runs_it_once(
    rcluster, rclient: Client, rrest: Rest, tmp_path: Path
) -> None:
    steps = script({"tool_calls": [call("write_file", path="dev.md", content="one run")]}, {"content": "done"})
    device = await Client.connect(rcluster.ws_url, rcluster.tokens["alice"])
    local = LocalClient(device, tmp_path)
    await local.hello()
    owner = await Client.connect(rcluster.ws_url, rcluster.tokens["alice"])
    sid = str((await owner.ack("create_session", data={"content": steps, "executionMode": "LOCAL"}))["sessionId"])
    await owner.close()
    frame = await local.receive()  # it ran on the client; the gateway dies before the result
    assert local.ran == [frame["data"]["requestId"]]
    kill_and_wait(rcluster, "gateway")
    await device.close()
    device = await Client.connect(rcluster.ws_url, rcluster.tokens["alice"])
    local.client = device
    try:
        await local.hello()
        again = await local.receive()
        assert again["data"]["requestId"] == frame["data"]["requestId"]
        await local.answer(again)
        await device.ack("subscribe", sid, {"afterPosition": 0})
        assert await device.wait_phase(sid, timeout=90) == "COMPLETED"
    finally:
        await device.close()
    assert local.received == [frame["data"]["requestId"]] * 2 and len(local.ran) == 1
    assert (tmp_path / "dev.md").read_text() == "one run"


async def test_a_local_child_without_a_client_fails_at_its_deadline_and_the_parent_goes_on(launch) -> None:
    cluster = launch(MUSTER_EXECUTION_TIMEOUT_S="12", MUSTER_RECONCILE_INTERVAL_S="0.5", MUSTER_LEASE_TTL_S="3")
    client = await Client.connect(cluster.ws_url, cluster.tokens["alice"])
    rest = Rest(cluster.gateway_url, cluster.tokens["alice"])
    try:
        task = script({"tool_calls": [call("write_file", path="never.md", content="x")]})
        steps = script({"tool_calls": [call("delegate", agent_type="coder", task=task)]}, {"content": "went on"})
        sid = str((await client.ack("create_session", data={"content": steps, "executionMode": "LOCAL"}))["sessionId"])
        child = (await wait_frame(client, sid, "subagent_session_created"))["childSessionId"]
        await client.ack("subscribe", child, {"afterPosition": 0})
        await wait_frame(client, child, "tool_request_sent")
        (execution,) = (await rest.json(f"/v1/sessions/{sid}/executions"))["items"]
        deadline = datetime.fromisoformat(execution["deadlineAt"].replace("Z", "+00:00"))
        # The scenario: recovery dies 3 s before the deadline and comes back; it stays.
        await asyncio.sleep(max(0.0, (deadline - datetime.now(UTC)).total_seconds() - 3))
        restart_recovery(cluster)
        assert await client.wait_phase(sid, timeout=90) == "COMPLETED"
        (after,) = (await rest.json(f"/v1/sessions/{sid}/executions"))["items"]
        assert after["deadlineAt"] == execution["deadlineAt"] and after["status"] == "FAILED"
        rows = await db_rows(
            cluster, "SELECT ended_at - deadline_at AS late, error FROM executions WHERE parent_session_id = $1", sid
        )
        assert rows[0]["error"] == "the LOCAL client did not connect in time"
        assert rows[0]["late"].total_seconds() < 10
        tool = [m for m in await rest.messages(sid) if m["role"] == "TOOL"]
        result = json.loads(tool[0]["content"])
        assert result["success"] is False and result["error"] == "the LOCAL client did not connect in time"
    finally:
        await client.close()
        await rest.close()
        cluster.stop()
