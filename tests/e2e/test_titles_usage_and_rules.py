"""Issue 37 through a running cluster on the scripted model: automatic titles (and a title
the user set kept), usage and treeUsage after a delegated turn, `/executions`' delivery
fields, the delegation hints in `/context`, promote refused while a LOCAL tool runs, and a
follow-up naming another user's child answered "not found"."""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

import pytest

from .wsclient import Client, Rest, call, script

pytestmark = pytest.mark.e2e


def frames(client: Client, session_id: str, kind: str) -> list[dict[str, Any]]:
    return [e["data"] for e in client.events[session_id] if e["type"] == kind]


def ts(value: str) -> datetime:
    return datetime.fromisoformat(value.replace("Z", "+00:00"))


async def create(client: Client, content: str, **data: Any) -> str:
    return str((await client.ack("create_session", data={"content": content, **data}))["sessionId"])


async def test_an_untitled_session_is_titled_from_its_first_line_and_a_user_title_is_kept(
    alice: Client, alice_rest: Rest
) -> None:
    sid = await create(alice, "Quarterly zebrafish migration report\nwith every detail you can find")
    await alice.wait_for(lambda: bool(frames(alice, sid, "session_updated")), 60)
    assert frames(alice, sid, "session_updated") == [{"title": "Quarterly zebrafish migration report"}]
    assert await alice.wait_phase(sid) == "COMPLETED"
    listed = {s["sessionId"]: s["title"] for s in (await alice_rest.json("/v1/sessions"))["items"]}
    assert listed[sid] == "Quarterly zebrafish migration report"
    hits = (await alice_rest.json("/v1/search", q="zebrafish"))["items"]
    assert {h["title"] for h in hits if h["sessionId"] == sid} == {"Quarterly zebrafish migration report"}

    kept = await create(alice, "Another zebrafish question", title="my own title")
    assert await alice.wait_phase(kept) == "COMPLETED"
    assert (await alice_rest.json(f"/v1/sessions/{kept}"))["title"] == "my own title"
    # The turn is over and the title, had one been made, would precede its end.
    assert frames(alice, kept, "session_updated") == []


CHILD = script({"tool_calls": [call("write_file", path="child.txt", content="from the child\n")]},
               {"content": "child done"})


async def test_usage_tree_usage_and_execution_delivery_after_a_delegated_turn(
    alice: Client, alice_rest: Rest
) -> None:
    sid = await create(alice, script(
        {"tool_calls": [call("delegate", agent_type="coder", task=CHILD)]}, {"content": "all done"}),
        title="delegating")
    assert await alice.wait_phase(sid) == "COMPLETED"
    (execution,) = (await alice_rest.json(f"/v1/sessions/{sid}/executions"))["items"]
    child = execution["childSessionId"]
    parent, kid = await alice_rest.json(f"/v1/sessions/{sid}"), await alice_rest.json(f"/v1/sessions/{child}")
    own, tree, child_usage = parent["usage"], parent["treeUsage"], kid["usage"]
    assert own["totalTokens"] > 0 and child_usage["totalTokens"] > 0
    assert child_usage == execution["usage"] == kid["treeUsage"]
    for key in ("promptTokens", "completionTokens", "totalTokens"):
        assert tree[key] == own[key] + child_usage[key]
    assert own["totalTokens"] == own["promptTokens"] + own["completionTokens"]

    history = await alice_rest.messages(sid)
    asking = next(m for m in history if m["role"] == "ASSISTANT" and m.get("toolCalls"))
    answer = next(m for m in history if m["role"] == "TOOL")
    assert execution["parentMessageId"] == asking["messageId"]
    assert execution["toolMessageId"] == answer["messageId"]
    assert execution["deliveryStatus"] == "DELIVERED"
    assert ts(execution["endedAt"]) <= ts(execution["deliveredAt"])


async def test_context_carries_the_delegation_hints_of_the_agent_registry(alice: Client, alice_rest: Rest) -> None:
    sid = await create(alice, "hello", title="hints")
    assert await alice.wait_phase(sid) == "COMPLETED"
    system = (await alice_rest.json(f"/v1/sessions/{sid}/context"))["system"]
    for agent_type in ("coder", "general", "researcher", "reviewer"):
        assert f"\n- {agent_type}: " in system
    assert "`child_session_id`" in system and "check only what changed" in system
    coder = await create(alice, "hello", title="no hints", agentType="coder")
    assert await alice.wait_phase(coder) == "COMPLETED"
    assert "child_session_id" not in (await alice_rest.json(f"/v1/sessions/{coder}/context"))["system"]


async def test_promote_is_refused_while_the_side_tasks_local_tool_runs(alice: Client, alice_rest: Rest) -> None:
    main = await create(alice, "hello", title="local main", executionMode="LOCAL")
    assert await alice.wait_phase(main) == "COMPLETED"
    ack = await alice.ack("create_side_session", main, {
        "content": script({"tool_calls": [call("write_file", path="l.md", content="x")]}, {"content": "ok"})})
    side = str(ack["sessionId"])
    try:
        # Nobody serves the LOCAL request: the side task waits for its client.
        await alice.wait_for(lambda: bool(frames(alice, side, "tool_request_sent")), 60)
        refused = await alice_rest.http.post(f"/v1/sessions/{side}/promote")
        assert refused.status_code == 409, refused.text
        assert refused.json()["error"]["code"] == "conflict"
        assert (await alice_rest.json(f"/v1/sessions/{side}"))["sessionType"] == "SIDE_TASK"
    finally:
        await alice.ack("cancel", side)
    assert await alice.wait_phase(side, ("CANCELLED",)) == "CANCELLED"


async def test_a_follow_up_naming_another_users_running_child_is_not_found(
    alice: Client, bob: Client, bob_rest: Rest
) -> None:
    slow_child = script({"content": "slow", "delay_ms": 30_000})
    parent = await create(alice, script({"tool_calls": [call("delegate", agent_type="coder", task=slow_child)]},
                                        {"content": "done"}), title="alice's")
    await alice.wait_for(lambda: bool(frames(alice, parent, "subagent_session_created")), 60)
    child = frames(alice, parent, "subagent_session_created")[0]["childSessionId"]
    try:
        poke = await create(bob, script(
            {"tool_calls": [call("delegate_followup", child_session_id=child, task="tell me")]},
            {"content": "ok"}), title="bob's")
        assert await bob.wait_phase(poke) == "COMPLETED"
        (result,) = [json.loads(m["content"]) for m in await bob_rest.messages(poke) if m["role"] == "TOOL"]
        assert result["success"] is False and result["error"] == f"session {child} not found"
    finally:
        await alice.ack("cancel", parent)
