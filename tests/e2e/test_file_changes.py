"""File changes of a task: every subagent's edits attributed to the parent turn that asked.

Each test drives a scripted parent (and scripted children) through the real services and
reads what a client reads: the messages page (`fileChanges` on ASSISTANT messages), the
turn summary (`/rounds/{messageId}/file-changes`) and the live `file_change` frames.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import asyncpg
import pytest

from .wsclient import Client, Rest, call, script

pytestmark = pytest.mark.e2e


@pytest.fixture
async def db(cluster):  # type: ignore[no-untyped-def]
    conn = await asyncpg.connect(cluster.database_url)
    yield conn
    await conn.close()


def writes(*files: tuple[str, str], answer: str = "done", then: dict[str, Any] | None = None) -> str:
    """A child script writing each file in its own tool round, then `then` or an answer."""
    steps = [{"tool_calls": [call("write_file", path=path, content=content)]} for path, content in files]
    return script(*steps, then or {"content": answer})


def assistants(history: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [m for m in history if m["role"] == "ASSISTANT"]


def entries(message: dict[str, Any]) -> list[tuple[str, str, str]]:
    return [(c["path"], c["sourceType"], c["changeType"]) for c in message["fileChanges"]]


async def summary(rest: Rest, session_id: str, message_id: str) -> list[dict[str, Any]]:
    return list((await rest.json(f"/v1/sessions/{session_id}/rounds/{message_id}/file-changes"))["items"])


def delegations(message: dict[str, Any]) -> list[str]:
    return [c["id"] for c in message["toolCalls"] if c["function"]["name"].startswith("delegate")]


async def test_turn_shows_parent_and_child_changes_and_merges_them_by_path(
    alice: Client, alice_rest: Rest
) -> None:
    # Parent writes A and delegates a coder that writes B then C (two tool rounds), then
    # the parent edits B again.
    child = writes(("b.txt", "one\ntwo\n"), ("c.txt", "sea\n"))
    session_id = await alice.run_turn(script(
        {"tool_calls": [call("write_file", path="a.txt", content="alpha\n"),
                        call("delegate", agent_type="coder", task=child)]},
        {"tool_calls": [call("edit_file", path="b.txt", old_string="two", new_string="2\nthree")]},
        {"content": "all done"},
    ))
    assert alice.phases(session_id)[-1] == "COMPLETED"
    history = await alice_rest.messages(session_id)
    first, second, last = assistants(history)
    assert entries(first) == [("a.txt", "MAIN", "CREATED"), ("b.txt", "SUBAGENT", "CREATED"),
                              ("c.txt", "SUBAGENT", "CREATED")]
    assert entries(second) == [("b.txt", "MAIN", "MODIFIED")]
    assert last["fileChanges"] == []
    assert all("fileChanges" not in m for m in history if m["role"] != "ASSISTANT")

    own, child_b, child_c = first["fileChanges"]
    delegate_id = delegations(first)[0]
    child_id = json.loads(next(m for m in history if m.get("toolCallId") == delegate_id)["content"])[
        "child_session_id"]
    # A main session's own change names no agent type (DESIGN §4).
    assert (own["sourceSessionId"], own["sourceAgentType"], own["parentToolCallId"]) == (session_id, None, None)
    assert own["toolCallId"] == first["toolCalls"][0]["id"] and own["messageId"] == first["messageId"]
    assert own["diff"] == "--- /dev/null\n+++ b/a.txt\n@@ -0,0 +1 @@\n+alpha\n"
    for entry in (child_b, child_c):
        assert (entry["sourceSessionId"], entry["sourceAgentType"]) == (child_id, "coder")
        assert entry["parentToolCallId"] == delegate_id and entry["executionId"]
    # the child's two tool rounds are two child messages, both under the one delegation
    assert child_b["messageId"] != child_c["messageId"]
    assert (child_b["linesAdded"], child_b["linesDeleted"]) == (2, 0)
    assert (second["fileChanges"][0]["linesAdded"], second["fileChanges"][0]["linesDeleted"]) == (2, 1)

    # The summary: A, B, C; B once, counts summed, both authors, the earliest before (none:
    # the child created it) and the latest after; any message of the turn names it.
    for any_message in (history[0], second, history[-1]):
        items = await summary(alice_rest, session_id, any_message["messageId"])
        assert [i["path"] for i in items] == ["a.txt", "b.txt", "c.txt"]
    b = items[1]
    assert (b["changeType"], b["linesAdded"], b["linesDeleted"]) == ("CREATED", 4, 1)
    assert (b["before"], b["after"]) == (None, "one\n2\nthree\n")
    assert b["patch"] == child_b["diff"] + second["fileChanges"][0]["diff"]
    assert b["sources"] == [{"sessionId": child_id, "type": "SUBAGENT", "agentType": "coder"},
                            {"sessionId": session_id, "type": "MAIN", "agentType": None}]
    assert items[0]["sources"] == [{"sessionId": session_id, "type": "MAIN", "agentType": None}]

    # Live: each change streams on the session that made it.
    live = [e["data"] for e in alice.events[session_id] if e["type"] == "file_change"]
    assert [(c["path"], c["sourceType"], c["changeType"]) for c in live] == [
        ("a.txt", "MAIN", "CREATED"), ("b.txt", "MAIN", "MODIFIED")]
    assert live[0]["changeId"] == own["changeId"] and live[0]["sourceSessionId"] == session_id
    assert live[0]["sourceAgentType"] is None
    await alice.ack("subscribe", child_id, {"afterPosition": 0})
    await alice.wait_for(lambda: sum(e["type"] == "file_change" for e in alice.events[child_id]) == 2)
    replayed = [e["data"] for e in alice.events[child_id] if e["type"] == "file_change"]
    assert [(c["path"], c["sourceType"], c["sourceAgentType"], c["sourceSessionId"]) for c in replayed] == [
        ("b.txt", "SUBAGENT", "coder", child_id), ("c.txt", "SUBAGENT", "coder", child_id)]
    assert set(replayed[0]) == {"changeId", "messageId", "toolCallId", "path", "changeType", "linesAdded",
                                "linesDeleted", "sourceSessionId", "sourceType", "sourceAgentType"}

    # The child's own page shows only its own changes, on its own messages.
    child_history = await alice_rest.messages(child_id)
    assert [entries(m) for m in assistants(child_history)] == [
        [("b.txt", "SUBAGENT", "CREATED")], [("c.txt", "SUBAGENT", "CREATED")], []]


async def test_parent_and_child_editing_one_path_give_two_entries_and_one_summary_item(
    alice: Client, alice_rest: Rest
) -> None:
    child = script({"tool_calls": [call("edit_file", path="same.txt", old_string="parent", new_string="child")]},
                   {"content": "edited"})
    session_id = await alice.run_turn(script(
        {"tool_calls": [call("write_file", path="same.txt", content="written by parent\n"),
                        call("delegate", agent_type="coder", task=child)]},
        {"content": "ok"},
    ))
    first = assistants(await alice_rest.messages(session_id))[0]
    assert entries(first) == [("same.txt", "MAIN", "CREATED"), ("same.txt", "SUBAGENT", "MODIFIED")]
    items = await summary(alice_rest, session_id, first["messageId"])
    assert len(items) == 1
    assert (items[0]["changeType"], items[0]["linesAdded"], items[0]["linesDeleted"]) == ("CREATED", 2, 1)
    assert (items[0]["before"], items[0]["after"]) == (None, "written by child\n")
    assert [s["type"] for s in items[0]["sources"]] == ["MAIN", "SUBAGENT"]


async def test_parallel_delegations_each_get_their_own_changes(alice: Client, alice_rest: Rest) -> None:
    session_id = await alice.run_turn(script(
        {"tool_calls": [
            call("delegate", agent_type="coder", task=writes(("p1.txt", "1\n"), then={"delay_ms": 300})),
            call("delegate", agent_type="researcher", task=writes(("p2.txt", "2\n"), ("p2b.txt", "2b\n"))),
        ]},
        {"content": "both back"},
    ))
    history = await alice_rest.messages(session_id)
    first = assistants(history)[0]
    first_call, second_call = delegations(first)
    results = {m["toolCallId"]: json.loads(m["content"]) for m in history if m["role"] == "TOOL"}
    got = [(c["path"], c["parentToolCallId"], c["sourceSessionId"], c["sourceAgentType"]) for c in first["fileChanges"]]
    assert got == [
        ("p1.txt", first_call, results[first_call]["child_session_id"], "coder"),
        ("p2.txt", second_call, results[second_call]["child_session_id"], "researcher"),
        ("p2b.txt", second_call, results[second_call]["child_session_id"], "researcher"),
    ]


async def test_followups_report_only_their_own_changes(alice: Client, alice_rest: Rest) -> None:
    session_id = await alice.run_turn(script(
        {"tool_calls": [call("delegate", agent_type="coder", task=writes(("f1.txt", "one\n")))]},
        {"content": "first"},
    ))
    child_id = json.loads(next(m for m in await alice_rest.messages(session_id) if m["role"] == "TOOL")["content"])[
        "child_session_id"]
    for run, name in ((2, "f2.txt"), (3, "f3.txt")):
        await alice.ack("send_message", session_id, {"content": script(
            {"tool_calls": [call("delegate_followup", child_session_id=child_id, task=writes((name, f"{run}\n")))]},
            {"content": f"follow-up {run}"},
        )})
        await alice.wait_phase(session_id, ("COMPLETED",), count=run)
    history = await alice_rest.messages(session_id)
    delegating = [m for m in assistants(history) if m.get("toolCalls")]
    assert [entries(m) for m in delegating] == [
        [("f1.txt", "SUBAGENT", "CREATED")], [("f2.txt", "SUBAGENT", "CREATED")], [("f3.txt", "SUBAGENT", "CREATED")]]
    assert len({m["fileChanges"][0]["executionId"] for m in delegating}) == 3
    # each turn's summary holds its own follow-up's change only
    assert [[i["path"] for i in await summary(alice_rest, session_id, m["messageId"])] for m in delegating] == [
        ["f1.txt"], ["f2.txt"], ["f3.txt"]]
    # the child's page: each change on the child's own message, nothing from the parent
    child = [entries(m) for m in assistants(await alice_rest.messages(child_id)) if m["fileChanges"]]
    assert child == [[("f1.txt", "SUBAGENT", "CREATED")], [("f2.txt", "SUBAGENT", "CREATED")],
                     [("f3.txt", "SUBAGENT", "CREATED")]]


async def test_a_failed_child_keeps_its_edits(alice: Client, alice_rest: Rest) -> None:
    session_id = await alice.run_turn(script(
        {"tool_calls": [call("delegate", agent_type="coder", task=writes(("broke.txt", "x\n"), then={"fail": "boom"}))]},
        {"content": "noted"},
    ))
    history = await alice_rest.messages(session_id)
    result = json.loads(next(m for m in history if m["role"] == "TOOL")["content"])
    assert result["success"] is False and "boom" in result["error"]
    assert entries(assistants(history)[0]) == [("broke.txt", "SUBAGENT", "CREATED")]


async def test_a_cancelled_child_keeps_its_edits(alice: Client, alice_rest: Rest) -> None:
    created = await alice.ack("create_session", data={"content": script(
        {"tool_calls": [call("delegate", agent_type="coder",
                             task=writes(("slow.txt", "before the cancel\n"), then={"delay_ms": 60000}))]},
        {"content": "never said"},
    )})
    session_id = created["sessionId"]
    await alice.wait_for(lambda: any(e["type"] == "subagent_session_created" for e in alice.events[session_id]))
    child_id = next(e["data"]["childSessionId"] for e in alice.events[session_id]
                    if e["type"] == "subagent_session_created")
    await alice.ack("subscribe", child_id, {"afterPosition": 0})
    await alice.wait_for(lambda: any(e["type"] == "file_change" for e in alice.events[child_id]))
    assert (await alice.request("cancel", session_id))["type"] == "ack"
    assert await alice.wait_phase(child_id, ("CANCELLED",), timeout=30) == "CANCELLED"
    await alice.wait_for(lambda: any(e["type"] == "execution_status" and e["data"]["status"] == "CANCELLED"
                                     for e in alice.events[session_id]), timeout=30)
    first = assistants(await alice_rest.messages(session_id))[0]
    assert entries(first) == [("slow.txt", "SUBAGENT", "CREATED")]
    assert [i["path"] for i in await summary(alice_rest, session_id, first["messageId"])] == ["slow.txt"]


async def test_refused_delegations_add_nothing(alice: Client, alice_rest: Rest) -> None:
    session_id = await alice.run_turn(script(
        {"tool_calls": [call("write_file", path="mine.txt", content="m\n"),
                        call("delegate", agent_type="no-such-agent", task="x"),
                        call("delegate_followup", child_session_id="not-a-session", task="y")]},
        {"content": "ok"},
    ))
    first = assistants(await alice_rest.messages(session_id))[0]
    assert entries(first) == [("mine.txt", "MAIN", "CREATED")]
    assert [i["path"] for i in await summary(alice_rest, session_id, first["messageId"])] == ["mine.txt"]


async def test_pages_of_older_rounds_carry_their_own_changes(alice: Client, alice_rest: Rest) -> None:
    session_id = await alice.run_turn(script(
        {"tool_calls": [call("delegate", agent_type="coder", task=writes(("old.txt", "old\n")))]}, {"content": "1"}))
    await alice.ack("send_message", session_id, {"content": script(
        {"tool_calls": [call("write_file", path="new.txt", content="new\n"),
                        call("delegate", agent_type="coder", task=writes(("newer.txt", "newer\n")))]},
        {"content": "2"})})
    await alice.wait_phase(session_id, ("COMPLETED",), count=2)
    newest = await alice_rest.json(f"/v1/sessions/{session_id}/messages", rounds=1)
    assert [entries(m) for m in assistants(newest["items"])] == [
        [("new.txt", "MAIN", "CREATED"), ("newer.txt", "SUBAGENT", "CREATED")], []]
    older = await alice_rest.json(f"/v1/sessions/{session_id}/messages", rounds=1, beforeSeq=newest["nextBeforeSeq"])
    assert older["nextBeforeSeq"] is None
    assert [entries(m) for m in assistants(older["items"])] == [[("old.txt", "SUBAGENT", "CREATED")], []]


async def test_two_snapshots_merge_to_the_earliest_before_and_the_latest_after(
    alice: Client, alice_rest: Rest
) -> None:
    session_id = await alice.run_turn(script(
        {"tool_calls": [call("write_file", path="doc.md", content="v0\n")]}, {"content": "created"}))
    await alice.ack("send_message", session_id, {"content": script(
        {"tool_calls": [call("edit_file", path="doc.md", old_string="v0", new_string="v1"),
                        call("delegate", agent_type="coder", task=script(
                            {"tool_calls": [call("edit_file", path="doc.md", old_string="v1", new_string="v2")]},
                            {"content": "edited"}))]},
        {"content": "edited twice"})})
    await alice.wait_phase(session_id, ("COMPLETED",), count=2)
    second_turn = assistants(await alice_rest.messages(session_id))[2]
    [item] = await summary(alice_rest, session_id, second_turn["messageId"])
    assert (item["path"], item["changeType"], item["before"], item["after"]) == ("doc.md", "MODIFIED", "v0\n", "v2\n")
    assert (item["linesAdded"], item["linesDeleted"]) == (2, 2)
    assert item["patch"].count("@@") == 4  # two hunks, concatenated in order
    assert item["patch"].index("+v1") < item["patch"].index("+v2")


async def test_deleting_a_file_is_a_change(alice: Client, alice_rest: Rest) -> None:
    session_id = await alice.run_turn(script(
        {"tool_calls": [call("write_file", path="gone.txt", content="a\nb\n")]}, {"content": "written"}))
    await alice.ack("send_message", session_id, {"content": script(
        {"tool_calls": [call("delete_file", path="gone.txt")]}, {"content": "deleted"})})
    await alice.wait_phase(session_id, ("COMPLETED",), count=2)
    deleting = assistants(await alice_rest.messages(session_id))[2]
    deleted = deleting["fileChanges"][0]
    assert (deleted["changeType"], deleted["linesAdded"], deleted["linesDeleted"]) == ("DELETED", 0, 2)
    assert deleted["diff"].startswith("--- a/gone.txt\n+++ /dev/null\n")
    [item] = await summary(alice_rest, session_id, deleting["messageId"])
    assert (item["changeType"], item["before"], item["after"]) == ("DELETED", "a\nb\n", None)


async def test_a_one_megabyte_file_keeps_the_event_small_and_the_diff_served(
    cluster, alice: Client, alice_rest: Rest, db: asyncpg.Connection
) -> None:
    session_id = (await alice.ack("create_session", data={}))["sessionId"]
    workspace = Path(cluster.data_dir) / "workspaces" / session_id
    workspace.mkdir(parents=True, exist_ok=True)
    big = "".join(f"line {i:06d} " + "x" * 88 + "\n" for i in range(10_000))
    assert len(big) >= 1_000_000
    (workspace / "big.txt").write_text(big)
    await alice.ack("send_message", session_id, {"content": script(
        {"tool_calls": [call("edit_file", path="big.txt", old_string="line 005000 ", new_string="LINE 005000 ")]},
        {"content": "edited one line"})})
    assert await alice.wait_phase(session_id) == "COMPLETED"
    payloads = await db.fetch(
        "SELECT octet_length(payload::text) AS size FROM events WHERE stream_id = $1 AND type = 'FileChanged'",
        session_id)
    assert len(payloads) == 1 and payloads[0]["size"] < 2048
    change = assistants(await alice_rest.messages(session_id))[0]["fileChanges"][0]
    assert (change["changeType"], change["linesAdded"], change["linesDeleted"]) == ("MODIFIED", 1, 1)
    assert "-line 005000 " in change["diff"] and "+LINE 005000 " in change["diff"] and len(change["diff"]) < 2000
    [item] = await summary(alice_rest, session_id, change["messageId"])
    assert item["before"] == big and item["after"] == big.replace("line 005000 ", "LINE 005000 ")
    stored = await db.fetchval("SELECT count(*) FROM blobs WHERE size >= 1000000")
    assert stored >= 2


async def test_a_path_created_at_any_point_of_the_turn_is_created_in_its_summary(
    alice: Client, alice_rest: Rest
) -> None:
    """The turn deletes a file an earlier turn made, then writes it again: CREATED, as it
    was created in this turn (DESIGN §4), not MODIFIED; one only deleted stays DELETED."""
    session_id = await alice.run_turn(script(
        {"tool_calls": [call("write_file", path="again.txt", content="one\n"),
                        call("write_file", path="gone.txt", content="bye\n")]},
        {"content": "made"},
    ))
    await alice.ack("send_message", session_id, {"content": script(
        {"tool_calls": [call("delete_file", path="again.txt"), call("delete_file", path="gone.txt")]},
        {"tool_calls": [call("write_file", path="again.txt", content="two\n")]},
        {"content": "remade"},
    )})
    await alice.wait_phase(session_id, ("COMPLETED",), count=2)
    history = await alice_rest.messages(session_id)
    second_turn = [m for m in history if m["role"] == "USER"][1]
    items = {i["path"]: i for i in await summary(alice_rest, session_id, second_turn["messageId"])}
    assert (items["again.txt"]["changeType"], items["again.txt"]["before"], items["again.txt"]["after"]) == (
        "CREATED", "one\n", "two\n")
    assert items["gone.txt"]["changeType"] == "DELETED"
    assert all(s["agentType"] is None for i in items.values() for s in i["sources"])
