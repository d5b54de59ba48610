"""Side tasks through the real services: each context mode as the model sees it
(`GET …/context`), trees of side tasks listed, archived, deleted, searched and promoted,
and the tree signals on the root's stream agreeing with `GET /v1/sessions`."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from .wsclient import Client, Rest, call, script

pytestmark = pytest.mark.e2e

# Longer than the 300 characters a summary keeps of each message.
WRITE = script({"tool_calls": [call("write_file", path="plan.md", content="step one\n" * 40)]}, {"content": "written"})


async def side(client: Client, source: str, content: str = "a side question", **data: Any) -> str:
    """A side task of `source`, its first turn finished."""
    ack = await client.ack("create_side_session", source, {"content": content, **data})
    session_id = str(ack["sessionId"])
    assert await client.wait_phase(session_id) == "COMPLETED"
    return session_id


async def model_context(rest: Rest, session_id: str) -> dict[str, Any]:
    body: dict[str, Any] = await rest.json(f"/v1/sessions/{session_id}/context")
    return body


async def test_each_context_mode_as_the_model_sees_it(cluster, alice: Client, alice_rest: Rest) -> None:
    main = await alice.run_turn(WRITE)
    source = await model_context(alice_rest, main)
    assert [m["role"] for m in source["messages"]] == ["user", "assistant", "tool", "assistant"]

    none = await model_context(alice_rest, await side(alice, main, "fresh start"))
    assert [m["content"] for m in none["messages"]] == ["fresh start", none["messages"][1]["content"]]
    assert "plan.md" not in none["system"] and "write_file" not in str(none["messages"])

    summary = await model_context(alice_rest, await side(alice, main, "summarise", contextMode="summary"))
    assert "not reported back" in summary["system"]
    assert len(WRITE) > 300
    assert "USER: " + WRITE[:300] + "\n" in summary["system"] and WRITE[:301] not in summary["system"]
    assert summary["messages"][0] == {"role": "user", "content": "summarise"}

    fork_id = await side(alice, main, "carry on", contextMode="fork")
    fork = await model_context(alice_rest, fork_id)
    assert fork["messages"][:4] == source["messages"]
    assert fork["messages"][4] == {"role": "user", "content": "carry on"}
    # The copy's file changes name the copy's messages.
    original = [m for m in await alice_rest.messages(main) if m.get("fileChanges")]
    copied = [m for m in await alice_rest.messages(fork_id) if m.get("fileChanges")]
    assert [c["path"] for c in copied[0]["fileChanges"]] == ["plan.md"]
    assert copied[0]["messageId"] != original[0]["messageId"]
    assert copied[0]["fileChanges"][0]["messageId"] == copied[0]["messageId"]


async def test_a_fork_cut_and_a_foreign_message(cluster, alice: Client, bob: Client, alice_rest: Rest) -> None:
    main = await alice.run_turn(WRITE)
    history = await alice_rest.messages(main)
    round_ = history[1]  # the ASSISTANT message whose tool result follows
    cut = await model_context(alice_rest, await side(
        alice, main, "from the round", contextMode="fork", forkFromMessageId=round_["messageId"]))
    assert [m["role"] for m in cut["messages"]][:2] == ["user", "user"]  # moved before the open round
    upto = await model_context(alice_rest, await side(
        alice, main, "from the first", contextMode="fork", forkFromMessageId=history[0]["messageId"]))
    assert upto["messages"][0]["content"] == WRITE and upto["messages"][1]["content"] == "from the first"

    other = await bob.run_turn("bob's own")
    foreign = first_message_id(bob, other)
    for message_id in (foreign, "00000000-0000-0000-0000-000000000000", "nope"):
        reply = await alice.request("create_side_session", main, {
            "content": "x", "contextMode": "fork", "forkFromMessageId": message_id})
        assert (reply["type"], reply["data"]["code"]) == ("error", "bad_request")


def first_message_id(client: Client, session_id: str) -> str:
    first = next(e for e in client.events[session_id] if e["type"] == "message")
    return str(first["data"]["messageId"])


async def chain(alice: Client) -> tuple[str, str, str, str]:
    main = await alice.run_turn("the main line")
    a = await side(alice, main, "first branch", contextMode="fork")
    b = await side(alice, a, "second branch", contextMode="fork")
    c = await side(alice, b, "third branch about capybaras", contextMode="fork")
    return main, a, b, c


async def side_tasks(rest: Rest, session_id: str, **params: Any) -> list[str]:
    body = await rest.json(f"/v1/sessions/{session_id}/side-tasks", **params)
    return [item["sessionId"] for item in body["items"]]


async def test_a_chain_listed_archived_searched_and_deleted(
    cluster, alice: Client, alice_rest: Rest, bob_rest: Rest
) -> None:
    main, a, b, c = await chain(alice)
    contents = [m["content"] for m in (await model_context(alice_rest, c))["messages"] if m["role"] == "user"]
    assert contents == ["the main line", "first branch", "second branch", "third branch about capybaras"]

    items = (await alice_rest.json(f"/v1/sessions/{main}/side-tasks", recursive=1))["items"]
    assert [i["sessionId"] for i in items] == [
        i["sessionId"] for i in sorted(items, key=lambda i: (i["updatedAt"], i["sessionId"]), reverse=True)]
    assert {i["sessionId"] for i in items} == {a, b, c}
    assert {i["rootSessionId"] for i in items} == {main}
    assert await side_tasks(alice_rest, b) == [c]
    assert await side_tasks(alice_rest, main) == [a]

    archived = await alice_rest.http.post(f"/v1/sessions/{b}/archive")
    assert archived.status_code == 200 and archived.json()["archived"] is True
    assert await side_tasks(alice_rest, main, recursive=1) == [a]
    assert (await alice_rest.http.post(f"/v1/sessions/{b}/unarchive")).status_code == 200
    assert set(await side_tasks(alice_rest, main, recursive=1)) == {a, b, c}

    hits = (await alice_rest.json("/v1/search", q="capybaras"))["items"]
    assert [(h["sessionId"], h["rootSessionId"], h["sessionType"]) for h in hits] == [(c, main, "SIDE_TASK")]
    assert (await bob_rest.json("/v1/search", q="capybaras"))["items"] == []

    assert (await alice_rest.http.delete(f"/v1/sessions/{a}")).status_code == 204
    assert await side_tasks(alice_rest, main, recursive=1) == []
    assert (await alice_rest.json("/v1/search", q="capybaras"))["items"] == []
    gone = await alice_rest.get(f"/v1/sessions/{a}")
    assert gone.status_code == 404 and gone.json()["error"]["code"] == "not_found"


async def listed_signals(rest: Rest, root: str) -> tuple[bool, bool]:
    item = next(i for i in (await rest.json("/v1/sessions", limit=1000))["items"] if i["sessionId"] == root)
    return item["treeRunning"], item["treeUnread"]


async def test_tree_signals_follow_a_deep_side_task(cluster, alice: Client, alice_rest: Rest) -> None:
    main, _, b, _ = await chain(alice)
    # The chain's turns are over, but recovery may signal them late (a side task running,
    # then done): start from the settled signal, or the deep task's run could hide in one.
    await alice.wait_for(lambda: tree_signals_now(alice, main)[-1:] == [(False, True)])
    seen = len(tree_signals_now(alice, main))
    slow = script({"content": "thinking", "delay_ms": 6000})
    ack = await alice.ack("create_side_session", b, {"content": slow})
    deep = str(ack["sessionId"])
    # The list computes the signals when asked: it says running from the moment the deep
    # task's turn starts until it ends. Asked until then (the live frame comes through
    # recovery, which a loaded machine may delay past a short turn).
    while (await listed_signals(alice_rest, main))[0] is not True:
        assert "COMPLETED" not in alice.phases(deep), "the list never said the tree was running"
        await asyncio.sleep(0.05)  # pacing the reads
    await alice.wait_for(lambda: (True, True) in tree_signals_now(alice, main)[seen:]
                         or (True, False) in tree_signals_now(alice, main)[seen:])
    assert await alice.wait_phase(deep) == "COMPLETED"
    await alice.wait_for(lambda: tree_signals_now(alice, main)[-1] == (False, True))
    assert await listed_signals(alice_rest, main) == (False, True)
    # Reading every unread side task clears the root's treeUnread.
    for item in (await alice_rest.json(f"/v1/sessions/{main}/side-tasks", recursive=1))["items"]:
        if item["unread"]:
            assert (await alice_rest.http.post(f"/v1/sessions/{item['sessionId']}/read")).status_code == 200
    await alice.wait_for(lambda: tree_signals_now(alice, main)[-1] == (False, False))
    assert await listed_signals(alice_rest, main) == (False, False)


def tree_signals_now(client: Client, root: str) -> list[tuple[bool, bool]]:
    return [(e["data"]["treeRunning"], e["data"]["treeUnread"])
            for e in client.events[root] if e["type"] == "session_tree_status"]


async def test_promote_and_its_conflicts(cluster, alice: Client, alice_rest: Rest) -> None:
    main, a, b, c = await chain(alice)
    promoted = await alice_rest.http.post(f"/v1/sessions/{b}/promote")
    assert promoted.status_code == 200, promoted.text
    body = promoted.json()
    assert (body["sessionType"], body["parentSessionId"], body["rootSessionId"]) == ("NORMAL", None, b)
    assert (await alice_rest.json(f"/v1/sessions/{c}"))["rootSessionId"] == b
    assert await side_tasks(alice_rest, main, recursive=1) == [a]
    assert await side_tasks(alice_rest, b, recursive=1) == [c]

    running = (await alice.ack("create_side_session", a, {"content": script({"content": "x", "delay_ms": 3000})}))
    await alice.wait_phase(str(running["sessionId"]), ("RUNNING",))
    refused = await alice_rest.http.post(f"/v1/sessions/{running['sessionId']}/promote")
    assert refused.status_code == 409 and refused.json()["error"]["code"] == "conflict"

    delegating = await side(alice, a, script(
        {"tool_calls": [call("delegate", agent_type="general", task="sub work")]}, {"content": "ok"}))
    refused = await alice_rest.http.post(f"/v1/sessions/{delegating}/promote")
    assert refused.status_code == 409


async def test_a_side_task_writes_into_the_trees_workspace_alone(cluster, alice: Client, alice_rest: Rest) -> None:
    main = await alice.run_turn("hello")
    task = await side(alice, main, script(
        {"tool_calls": [call("write_file", path="side.txt", content="from the side\n")]}, {"content": "ok"}))
    assert (Path(cluster.data_dir) / "workspaces" / main / "side.txt").read_text() == "from the side\n"
    assert not (Path(cluster.data_dir) / "workspaces" / task).exists()
    main_changes = [m for m in await alice_rest.messages(main) if m.get("fileChanges")]
    assert main_changes == []
    side_changes = [c["path"] for m in await alice_rest.messages(task) for c in m.get("fileChanges", [])]
    assert side_changes == ["side.txt"]


async def test_foreign_ids_are_not_found_and_malformed_requests_bad(
    cluster, alice: Client, bob: Client, bob_rest: Rest, alice_rest: Rest
) -> None:
    main = await alice.run_turn("mine")
    task = await side(alice, main)
    reply = await bob.request("create_side_session", main, {"content": "x"})
    assert (reply["type"], reply["data"]["code"]) == ("error", "not_found")
    for data in ({"content": "x", "contextMode": "everything"}, {}, {"content": "x", "extra": 1},
                 {"content": "x", "permissionLevel": "root"}):
        reply = await alice.request("create_side_session", main, data)
        assert (reply["type"], reply["data"]["code"]) == ("error", "bad_request"), data
    assert (await alice.request("ping"))["type"] == "pong"  # the socket stays open

    for method, path in (
        ("GET", f"/v1/sessions/{main}/side-tasks"), ("GET", f"/v1/sessions/{task}/context"),
        ("PATCH", f"/v1/sessions/{task}"), ("DELETE", f"/v1/sessions/{task}"),
        ("POST", f"/v1/sessions/{task}/archive"), ("POST", f"/v1/sessions/{task}/unarchive"),
        ("POST", f"/v1/sessions/{task}/promote"), ("POST", f"/v1/sessions/{task}/read"),
    ):
        response = await bob_rest.http.request(method, path, json={} if method == "PATCH" else None)
        assert (response.status_code, response.json()["error"]["code"]) == (404, "not_found"), path
    for response in (
        await alice_rest.http.patch(f"/v1/sessions/{task}", json={"permissionLevel": "root"}),
        await alice_rest.http.patch(f"/v1/sessions/{task}", json={"titel": "typo"}),
        await alice_rest.get("/v1/search"),
        await alice_rest.get("/v1/search", q="x", limit=0),
        await alice_rest.get(f"/v1/sessions/{main}/side-tasks", recursive="maybe"),
    ):
        assert (response.status_code, response.json()["error"]["code"]) == (400, "bad_request"), response.url
    patched = await alice_rest.http.patch(f"/v1/sessions/{task}", json={"title": "renamed", "permissionLevel": "ask"})
    assert (patched.json()["title"], patched.json()["permissionLevel"]) == ("renamed", "ask")


async def test_deleting_a_running_side_task_cancels_it_first(cluster, alice: Client, alice_rest: Rest) -> None:
    main = await alice.run_turn("the main line")
    ack = await alice.ack("create_side_session", main, {"content": script({"content": "late", "delay_ms": 4000})})
    task = str(ack["sessionId"])
    await alice.wait_phase(task, ("RUNNING",))
    assert (await alice_rest.http.delete(f"/v1/sessions/{task}")).status_code == 204
    assert await alice.wait_phase(task, ("CANCELLED",)) == "CANCELLED"
    await alice.wait_for(lambda: any(e["type"] == "session_deleted" for e in alice.events[task]))
    assert (await alice_rest.get(f"/v1/sessions/{task}/messages")).status_code == 404
    reply = await alice.request("send_message", task, {"content": "anyone?"})
    assert (reply["type"], reply["data"]["code"]) == ("error", "not_found")
    assert await side_tasks(alice_rest, main) == []


async def test_a_promoted_side_task_keeps_the_workspace_and_children_inherit(
    cluster, alice: Client, alice_rest: Rest
) -> None:
    main = await alice.run_turn("the main line")
    task = await side(alice, main, "aside", permissionLevel="ask")
    assert (await alice_rest.http.post(f"/v1/sessions/{task}/promote")).status_code == 200
    child_writes = script({"tool_calls": [call("write_file", path="promoted.txt", content="kept\n")]},
                          {"content": "written"})
    await alice.ack("send_message", task, {"content": script(
        {"tool_calls": [call("delegate", agent_type="general", task=child_writes)]}, {"content": "ok"})})

    def approvals(sid: str) -> list[str]:
        return [e["data"]["approvalId"] for e in alice.events[sid] if e["type"] == "approval_requested"]

    await alice.wait_for(lambda: bool(approvals(task)))  # `ask`: the delegation waits for the user
    await alice.ack("answer_approval", task, {"approvalId": approvals(task)[0], "decision": "approve"})
    await alice.wait_for(lambda: any(e["type"] == "subagent_session_created" for e in alice.events[task]))
    child = next(e["data"]["childSessionId"] for e in alice.events[task] if e["type"] == "subagent_session_created")
    await alice.ack("subscribe", child, {"afterPosition": 0})
    await alice.wait_for(lambda: bool(approvals(child)))  # and so does its child's write: inherited
    await alice.ack("answer_approval", child, {"approvalId": approvals(child)[0], "decision": "approve"})
    assert await alice.wait_phase(task, count=2) == "COMPLETED"
    assert (Path(cluster.data_dir) / "workspaces" / main / "promoted.txt").read_text() == "kept\n"
    body = await alice_rest.json(f"/v1/sessions/{child}")
    assert (body["rootSessionId"], body["permissionLevel"]) == (task, "ask")
