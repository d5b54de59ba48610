"""A single agent session driven over a real WebSocket through all four services."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from .wsclient import Client, Rest, call, script

pytestmark = pytest.mark.e2e

WRITE_EDIT_READ = script(
    {"tool_calls": [call("write_file", path="notes/a.txt", content="hello\nworld\n")]},
    {"tool_calls": [call("edit_file", path="notes/a.txt", old_string="world", new_string="muster")]},
    {"tool_calls": [call("read_file", path="notes/a.txt")]},
    {"content": "the file says hello muster"},
)


async def test_scripted_turn_writes_edits_reads_and_completes(cluster, alice: Client, alice_rest: Rest) -> None:
    created = await alice.request("create_session", data={"content": WRITE_EDIT_READ, "title": "first"})
    assert created["type"] == "ack"
    session_id = created["data"]["sessionId"]
    assert await alice.wait_phase(session_id) == "COMPLETED"

    events = alice.events[session_id]
    positions = [e["position"] for e in events]
    assert positions == sorted(positions) and len(set(positions)) == len(positions)
    visible = [(e["type"], e["data"].get("role") or e["data"].get("phase")) for e in events
               if e["type"] in ("message", "session_status")]
    assert visible == [
        ("message", "USER"), ("session_status", "RUNNING"),
        ("message", "ASSISTANT"), ("message", "TOOL"),
        ("message", "ASSISTANT"), ("message", "TOOL"),
        ("message", "ASSISTANT"), ("message", "TOOL"),
        ("message", "ASSISTANT"), ("session_status", "COMPLETED"),
    ]
    first_call = next(e for e in events if e["type"] == "message" and e["data"].get("toolCalls"))
    tool_call = first_call["data"]["toolCalls"][0]
    assert tool_call["type"] == "function" and tool_call["function"]["name"] == "write_file"
    assert json.loads(tool_call["function"]["arguments"]) == {"path": "notes/a.txt", "content": "hello\nworld\n"}

    history = await alice_rest.messages(session_id)
    streamed = [e["data"] for e in events if e["type"] == "message"]
    assert [(m["messageId"], m["seq"], m["role"], m["content"]) for m in history] == [
        (m["messageId"], m["seq"], m["role"], m["content"]) for m in streamed
    ]
    read_result = json.loads(history[6]["content"])
    assert read_result == {"success": True, "path": "notes/a.txt", "content": "hello\nmuster\n"}
    assert history[-1]["content"] == "the file says hello muster"
    assert (Path(cluster.data_dir) / "workspaces" / session_id / "notes" / "a.txt").read_text() == "hello\nmuster\n"

    session = await alice_rest.json(f"/v1/sessions/{session_id}")
    assert (session["phase"], session["sessionType"], session["title"]) == ("COMPLETED", "NORMAL", "first")
    assert session["rootSessionId"] == session_id and session["parentSessionId"] is None


async def test_subscribe_after_position_replays_missed_events_then_live(cluster, alice: Client) -> None:
    session_id = await alice.run_turn(script({"content": "turn one"}))
    # The title the harness makes is recorded once the turn's loop has stopped (ADR 0040):
    # it belongs to the first turn's events too.
    await alice.wait_for(lambda: any(e["type"] == "session_updated" for e in alice.events[session_id]))
    first_turn = alice.events[session_id]
    cut = first_turn[1]["position"]

    late = await Client.connect(cluster.ws_url, cluster.tokens["alice"])
    try:
        await late.ack("subscribe", session_id, {"afterPosition": cut})
        await late.ack("subscribe", session_id, {"afterPosition": cut})  # twice: no duplicates
        expected = [e["position"] for e in first_turn if e["position"] > cut]
        await late.wait_for(lambda: len(late.events[session_id]) >= len(expected))
        assert [e["position"] for e in late.events[session_id]] == expected

        await alice.ack("send_message", session_id, {"content": script({"content": "turn two"})})
        await late.wait_phase(session_id, ("COMPLETED",), count=2)
        replayed_and_live = [e["position"] for e in late.events[session_id]]
        assert replayed_and_live == sorted(set(replayed_and_live))
        assert replayed_and_live[: len(expected)] == expected
        live = late.events[session_id][len(expected):]
        assert [e["data"]["content"] for e in live if e["type"] == "message" and e["data"]["role"] == "ASSISTANT"] == ["turn two"]
        # The live part is exactly what the original socket saw of turn two.
        await alice.wait_phase(session_id, ("COMPLETED",), count=2)
        assert [e["position"] for e in alice.events[session_id] if e["position"] > expected[-1]] == [e["position"] for e in live]
    finally:
        await late.close()


async def test_repeated_client_message_id_posts_one_user_message(alice: Client, alice_rest: Rest) -> None:
    session_id = await alice.run_turn(script({"content": "ready"}))
    data = {"content": script({"content": "once"}), "clientMessageId": "retry-1"}
    first = await alice.ack("send_message", session_id, data)
    second = await alice.ack("send_message", session_id, data)
    assert first["messageId"] == second["messageId"]
    await alice.wait_phase(session_id, ("COMPLETED",), count=2)
    history = await alice_rest.messages(session_id)
    assert [m["content"] for m in history if m["role"] == "USER"].count(data["content"]) == 1
    assert [m["content"] for m in history if m["role"] == "ASSISTANT"] == ["ready", "once"]


async def test_edit_requires_unique_old_string_and_deleted_files_cannot_be_read(alice: Client, alice_rest: Rest) -> None:
    session_id = await alice.run_turn(script(
        {"tool_calls": [call("write_file", path="twice.txt", content="x x\n")]},
        {"tool_calls": [call("edit_file", path="twice.txt", old_string="x", new_string="y")]},
        {"tool_calls": [call("edit_file", path="twice.txt", old_string="x", new_string="y", replace_all=True)]},
        {"tool_calls": [call("delete_file", path="twice.txt")]},
        {"tool_calls": [call("read_file", path="twice.txt")]},
        {"content": "checked"},
    ))
    results = [json.loads(m["content"]) for m in await alice_rest.messages(session_id) if m["role"] == "TOOL"]
    write, edit_once, edit_all, delete, read = results
    assert write["success"] is True
    assert edit_once["success"] is False and "2" in edit_once["error"] and "replace_all" in edit_once["error"]
    assert set(edit_once) == {"success", "error"}
    assert edit_all == {"success": True, "path": "twice.txt", "replacements": 2}
    assert delete == {"success": True, "path": "twice.txt"}
    assert read["success"] is False and "twice.txt" in read["error"]


async def test_model_failure_fails_the_turn_and_the_session_takes_new_messages(alice: Client) -> None:
    created = await alice.ack("create_session", data={"content": script({"fail": "model exploded"})})
    session_id = created["sessionId"]
    assert await alice.wait_phase(session_id) == "FAILED"
    failed = next(e for e in alice.events[session_id] if e["type"] == "session_status" and e["data"]["phase"] == "FAILED")
    assert "model exploded" in failed["data"].get("error", "")
    await alice.ack("send_message", session_id, {"content": "hello again"})
    assert await alice.wait_phase(session_id, ("COMPLETED",)) == "COMPLETED"


async def test_messages_to_a_running_session_queue_and_run_in_order(alice: Client, alice_rest: Rest) -> None:
    created = await alice.ack("create_session", data={"content": script({"content": "first", "delay_ms": 1500})})
    session_id = created["sessionId"]
    await alice.wait_phase(session_id, ("RUNNING",))
    second = await alice.ack("send_message", session_id, {"content": script({"content": "second"})})
    third = await alice.ack("send_message", session_id, {"content": script({"content": "third"})})
    assert second["queued"] is True and third["queued"] is True
    await alice.wait_phase(session_id, ("COMPLETED",), count=3)
    history = await alice_rest.messages(session_id)
    assert [m["content"] for m in history if m["role"] == "ASSISTANT"] == ["first", "second", "third"]
    assert [m["messageId"] for m in history if m["role"] == "USER"][1:] == [second["messageId"], third["messageId"]]


async def test_cancel_drops_the_in_flight_answer_and_keeps_the_history_valid(alice: Client, alice_rest: Rest) -> None:
    created = await alice.ack("create_session", data={"content": script(
        {"tool_calls": [call("write_file", path="c.txt", content="x")]},
        {"content": "never recorded", "delay_ms": 30000},
    )})
    session_id = created["sessionId"]
    await alice.wait_for(lambda: any(e["type"] == "message" and e["data"]["role"] == "TOOL"
                                     for e in alice.events[session_id]))
    assert (await alice.request("cancel", session_id))["type"] == "ack"
    assert await alice.wait_phase(session_id, ("CANCELLED",)) == "CANCELLED"
    await alice.ack("send_message", session_id, {"content": script({"content": "after cancel"})})
    assert await alice.wait_phase(session_id, ("COMPLETED",)) == "COMPLETED"
    history = await alice_rest.messages(session_id)
    assert [m["content"] for m in history if m["role"] == "ASSISTANT" and not m.get("toolCalls")] == ["after cancel"]
    # Every tool call has exactly one result, so the next model call saw a valid history.
    calls = [c["id"] for m in history if m.get("toolCalls") for c in m["toolCalls"]]
    assert sorted(m["toolCallId"] for m in history if m["role"] == "TOOL") == sorted(calls)
