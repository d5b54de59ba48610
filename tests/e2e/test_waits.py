"""Waits against the real processes (issue 11): approvals of an `ask` session, `read_only`
refusals, a child's approval counted at its root, `ask_user`, and a LOCAL session whose file
tools run on a connected client, all over a real WebSocket."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from .local_client import LocalClient
from .wsclient import Client, Rest, call, script

pytestmark = pytest.mark.e2e

WRITE = {"tool_calls": [call("write_file", path="notes.md", content="hello")]}


def workspace(cluster: Any, session_id: str) -> Path:
    return Path(cluster.data_dir) / "workspaces" / session_id


def frames(client: Client, session_id: str, kind: str) -> list[dict[str, Any]]:
    return [e["data"] for e in client.events[session_id] if e["type"] == kind]


async def wait_frame(client: Client, session_id: str, kind: str, count: int = 1) -> dict[str, Any]:
    await client.wait_for(lambda: len(frames(client, session_id, kind)) >= count, 60)
    return frames(client, session_id, kind)[count - 1]


async def create(client: Client, content: str, **data: Any) -> str:
    return str((await client.ack("create_session", data={"content": content, **data}))["sessionId"])


async def test_ask_write_waits_then_approve_writes_once_and_completes(
    cluster, alice: Client, bob: Client, alice_rest: Rest
) -> None:
    sid = await create(alice, script(WRITE, {"content": "written"}), permissionLevel="ask")
    requested = await wait_frame(alice, sid, "approval_requested")
    assert (requested["tool"], requested["arguments"]) == ("write_file", {"path": "notes.md", "content": "hello"})
    assert await alice.wait_phase(sid, ("WAITING_APPROVAL",)) == "WAITING_APPROVAL"
    assert not (workspace(cluster, sid) / "notes.md").exists()
    pending = await alice_rest.json(f"/v1/sessions/{sid}/approvals", status="pending")
    assert [a["approvalId"] for a in pending["items"]] == [requested["approvalId"]]
    assert (await alice_rest.json(f"/v1/sessions/{sid}"))["phase"] == "WAITING_APPROVAL"
    answer = {"approvalId": requested["approvalId"], "decision": "approve"}
    foreign = await bob.request("answer_approval", sid, answer)
    assert (foreign["type"], foreign["data"]["code"]) == ("error", "not_found")
    assert await alice.ack("answer_approval", sid, answer) == {"approvalId": requested["approvalId"], "decision": "approve"}
    again = await alice.request("answer_approval", sid, {**answer, "decision": "deny"})
    assert (again["type"], again["data"]["code"]) == ("error", "conflict")
    assert await alice.wait_phase(sid) == "COMPLETED"
    assert (workspace(cluster, sid) / "notes.md").read_text() == "hello"
    assert (await wait_frame(alice, sid, "approval_resolved"))["decision"] == "approve"
    history = await alice_rest.messages(sid)
    assert [m["role"] for m in history] == ["USER", "ASSISTANT", "TOOL", "ASSISTANT"]
    assert json.loads(history[2]["content"])["success"] is True
    assert (await alice_rest.json(f"/v1/sessions/{sid}/approvals", status="pending"))["items"] == []


async def test_deny_records_the_reason_and_the_turn_completes_without_the_file(
    cluster, alice: Client, alice_rest: Rest
) -> None:
    sid = await create(alice, script(WRITE, {"content": "understood"}), permissionLevel="ask")
    requested = await wait_frame(alice, sid, "approval_requested")
    await alice.ack("answer_approval", sid, {"approvalId": requested["approvalId"], "decision": "deny",
                                             "reason": "not in this repo"})
    assert await alice.wait_phase(sid) == "COMPLETED"
    tool = [m for m in await alice_rest.messages(sid) if m["role"] == "TOOL"]
    assert json.loads(tool[0]["content"]) == {"success": False, "error": "denied by the user: not in this repo"}
    assert not (workspace(cluster, sid) / "notes.md").exists()
    denied = await alice_rest.json(f"/v1/sessions/{sid}/approvals")
    assert [(a["status"], a["reason"]) for a in denied["items"]] == [("denied", "not in this repo")]


async def test_read_only_refuses_at_once(cluster, alice: Client, alice_rest: Rest) -> None:
    sid = await create(alice, script(WRITE, {"content": "could not"}), permissionLevel="read_only")
    assert await alice.wait_phase(sid) == "COMPLETED"
    assert "WAITING_APPROVAL" not in alice.phases(sid) and frames(alice, sid, "approval_requested") == []
    tool = [m for m in await alice_rest.messages(sid) if m["role"] == "TOOL"]
    assert "read_only" in json.loads(tool[0]["content"])["error"]
    assert not (workspace(cluster, sid) / "notes.md").exists()


async def test_a_childs_approval_shows_on_its_stream_and_at_the_root_then_the_parent_resumes(
    cluster, alice: Client, alice_rest: Rest
) -> None:
    task = script(WRITE, {"content": "child wrote"})
    delegate = {"tool_calls": [call("delegate", agent_type="coder", task=task)]}
    sid = await create(alice, script(delegate, {"content": "parent done"}), permissionLevel="ask")
    first = await wait_frame(alice, sid, "approval_requested")
    assert first["tool"] == "delegate"
    await alice.ack("answer_approval", sid, {"approvalId": first["approvalId"], "decision": "approve"})
    child = (await wait_frame(alice, sid, "subagent_session_created"))["childSessionId"]
    await alice.ack("subscribe", child, {"afterPosition": 0})
    child_request = await wait_frame(alice, child, "approval_requested")
    assert child_request["tool"] == "write_file"
    status = await wait_frame(alice, sid, "session_tree_status")
    assert status["pendingApprovals"] == 1
    listed = {s["sessionId"]: s for s in (await alice_rest.json("/v1/sessions"))["items"]}
    assert listed[sid]["pendingApprovals"] == 1
    assert "COMPLETED" not in alice.phases(sid)  # the parent waits at its barrier
    await alice.ack("answer_approval", child, {"approvalId": child_request["approvalId"], "decision": "approve"})
    assert await alice.wait_phase(child) == "COMPLETED"
    assert await alice.wait_phase(sid) == "COMPLETED"
    assert (workspace(cluster, sid) / "notes.md").read_text() == "hello"
    cleared = await wait_frame(alice, sid, "session_tree_status", count=2)
    assert cleared["pendingApprovals"] == 0


async def test_ask_user_answer_becomes_the_tool_result(cluster, alice: Client, alice_rest: Rest) -> None:
    ask = {"tool_calls": [call("ask_user", question="Which colour?", options=["red", "blue"])]}
    sid = await create(alice, script(ask, {"content": "noted"}))
    asked = await wait_frame(alice, sid, "question_asked")
    assert (asked["question"], asked["options"]) == ("Which colour?", ["red", "blue"])
    assert await alice.wait_phase(sid, ("WAITING_INPUT",)) == "WAITING_INPUT"
    assert [q["questionId"] for q in (await alice_rest.json(f"/v1/sessions/{sid}/questions", status="pending"))["items"]] == [asked["questionId"]]
    await alice.ack("answer_question", sid, {"questionId": asked["questionId"], "answer": "blue"})
    twice = await alice.request("answer_question", sid, {"questionId": asked["questionId"], "answer": "red"})
    assert twice["data"]["code"] == "conflict"
    assert await alice.wait_phase(sid) == "COMPLETED"
    tool = [m for m in await alice_rest.messages(sid) if m["role"] == "TOOL"]
    assert json.loads(tool[0]["content"]) == {"success": True, "answer": "blue"}


async def test_cancel_drops_a_pending_approval(cluster, alice: Client, alice_rest: Rest) -> None:
    sid = await create(alice, script(WRITE), permissionLevel="ask")
    requested = await wait_frame(alice, sid, "approval_requested")
    await alice.ack("cancel", sid)
    assert await alice.wait_phase(sid) == "CANCELLED"
    assert (await wait_frame(alice, sid, "approval_resolved"))["decision"] == "dropped"
    assert (await alice_rest.json(f"/v1/sessions/{sid}/approvals", status="pending"))["items"] == []
    late = await alice.request("answer_approval", sid, {"approvalId": requested["approvalId"], "decision": "approve"})
    assert late["data"]["code"] == "conflict"
    assert not (workspace(cluster, sid) / "notes.md").exists()


async def test_bad_answers_get_precise_errors(cluster, alice: Client) -> None:
    sid = await create(alice, script({"content": "idle"}))
    await alice.wait_phase(sid)
    for frame, data, code in (
        ("answer_approval", {"approvalId": "nope", "decision": "approve"}, "not_found"),
        ("answer_approval", {"approvalId": "00000000-0000-0000-0000-000000000001", "decision": "maybe"}, "bad_request"),
        ("answer_question", {"questionId": "00000000-0000-0000-0000-000000000001", "answer": "x"}, "not_found"),
        ("tool_result", {"requestId": "00000000-0000-0000-0000-000000000001", "result": {"success": True}}, "not_found"),
        ("hello", {"localTools": "yes"}, "bad_request"),
    ):
        reply = await alice.request(frame, sid, data)
        assert (reply["type"], reply["data"]["code"]) == ("error", code), (frame, reply)
    assert (await alice.request("ping"))["type"] == "pong"  # the socket stays open


async def test_local_writes_land_in_the_clients_directory_even_when_it_connects_late(
    cluster, alice: Client, alice_rest: Rest, tmp_path: Path
) -> None:
    import asyncio

    steps = script({"tool_calls": [call("write_file", path="local.md", content="on the client")]},
                   {"tool_calls": [call("read_file", path="local.md")]}, {"content": "local done"})
    sid = await create(alice, steps, executionMode="LOCAL")
    sent = await wait_frame(alice, sid, "tool_request_sent")
    assert sent["name"] == "write_file"
    assert alice.phases(sid)[-1] == "RUNNING"  # waiting for the client is shown as running
    await asyncio.sleep(10)  # the scenario: nobody serves the request for 10 s
    assert "COMPLETED" not in alice.phases(sid)
    device = await Client.connect(cluster.ws_url, cluster.tokens["alice"])
    try:
        local = LocalClient(device, tmp_path)
        await local.hello()
        await local.serve(count=2)
        assert await alice.wait_phase(sid) == "COMPLETED"
    finally:
        await device.close()
    assert (tmp_path / "local.md").read_text() == "on the client"
    assert not (workspace(cluster, sid) / "local.md").exists()
    tools = [json.loads(m["content"]) for m in await alice_rest.messages(sid) if m["role"] == "TOOL"]
    assert tools[1]["content"] == "on the client" and len(local.ran) == 2
