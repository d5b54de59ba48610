"""Streamed answers end to end with the scripted model (issue 37 item 1, ADR 0039): the
pieces reach every subscribed socket in order and before the durable message; a reconnect
gets the message, not old pieces; cancel stops the stream; a harness killed mid-stream
leaves no partial message and the answer is produced once."""

from __future__ import annotations

import signal
from typing import Any

import asyncpg
import pytest

from .wsclient import Client, Frame, Rest, script

pytestmark = pytest.mark.e2e

ANSWER = "The quick brown fox jumps over the lazy dog, twice: the quick brown fox."


def streamed(content: str, chunk: int, delay_ms: int) -> str:
    return script({"content": content, "stream": {"chunk": chunk, "delay_ms": delay_ms}})


def deltas(client: Client, session_id: str) -> list[dict[str, Any]]:
    return [dict(frame["data"]) for frame in client.conn.log.deltas[session_id]]


def assistant_messages(client: Client, session_id: str) -> list[Frame]:
    return [
        e for e in client.events[session_id] if e["type"] == "message" and e["data"]["role"] == "ASSISTANT"
    ]


def assert_before_the_message(client: Client, session_id: str) -> dict[str, Any]:
    """Every piece of the answer precedes its durable message on this socket; the
    message, seen once, is returned."""
    *_, message = assistant_messages(client, session_id)
    same = [m for m in assistant_messages(client, session_id) if m["data"]["messageId"] == message["data"]["messageId"]]
    assert same == [message]
    timeline = client.conn.log.timeline[session_id]
    at = timeline.index(message)
    after = [f for f in timeline[at:] if f["type"] == "assistant_delta"]
    assert after == [], after
    return dict(message["data"])


async def new_session(client: Client) -> str:
    created = await client.ack("create_session", data={})
    return str(created["sessionId"])


async def test_deltas_reach_two_sockets_in_order_before_the_message(
    cluster, alice: Client, alice_rest: Rest
) -> None:
    other = await Client.connect(cluster.ws_url, cluster.tokens["alice"])
    try:
        sid = await new_session(alice)
        await other.ack("subscribe", sid, {"afterPosition": 0})
        await alice.ack("send_message", sid, {"content": streamed(ANSWER, 5, 20)})
        await alice.wait_phase(sid)
        await other.wait_phase(sid)
        for client in (alice, other):
            message = assert_before_the_message(client, sid)
            assert len(assistant_messages(client, sid)) == 1
            assert len(assistant_messages(client, sid)) == 1
            pieces = deltas(client, sid)
            assert [p["index"] for p in pieces] == list(range(len(pieces)))
            assert "".join(p["text"] for p in pieces) == ANSWER == message["content"]
            assert {p["messageId"] for p in pieces} == {message["messageId"]}
            assert all("position" not in f for f in client.conn.log.deltas[sid])
            # 20 ms apart, each piece goes alone; the publisher may join pieces that wait
            # together (ADR 0044), never split one, and the indexes count records.
            assert 2 <= len(pieces) <= -(-len(ANSWER) // 5)
        # History holds the durable message only.
        history = await alice_rest.messages(sid)
        assert [(m["role"], m.get("content")) for m in history][1:] == [("ASSISTANT", ANSWER)]
    finally:
        await other.close()


async def test_a_reconnect_mid_answer_gets_the_message_once_and_no_old_deltas(cluster, alice: Client) -> None:
    sid = await new_session(alice)
    await alice.ack("send_message", sid, {"content": streamed(ANSWER, 2, 40)})
    await alice.wait_for(lambda: len(deltas(alice, sid)) >= 3, timeout=30)
    last_position = max(e["position"] for e in alice.events[sid])
    await alice.close()
    seen_before = max(p["index"] for p in deltas(alice, sid))

    again = await Client.connect(cluster.ws_url, cluster.tokens["alice"])
    try:
        await again.ack("subscribe", sid, {"afterPosition": last_position})
        await again.wait_phase(sid)
        message = assert_before_the_message(again, sid)
        assert len(assistant_messages(again, sid)) == 1  # the final message, once
        assert message["content"] == ANSWER
        pieces = deltas(again, sid)
        # Only pieces streamed after the reconnect: none replayed.
        assert all(p["index"] > seen_before for p in pieces), (seen_before, pieces)
        assert [p["index"] for p in pieces] == sorted({p["index"] for p in pieces})
    finally:
        await again.close()

    # A client arriving after the answer gets the message and no delta at all.
    late = await Client.connect(cluster.ws_url, cluster.tokens["alice"])
    try:
        await late.ack("subscribe", sid, {"afterPosition": 0})
        await late.wait_phase(sid)
        assert [m["data"]["content"] for m in assistant_messages(late, sid)] == [ANSWER]
        assert deltas(late, sid) == []
    finally:
        await late.close()


async def test_cancel_mid_stream_stops_the_stream(cluster, alice: Client, alice_rest: Rest) -> None:
    long_answer = "x" * 300  # 300 pieces, 50 ms apart: 15 s if nothing stopped it
    sid = await new_session(alice)
    mark = cluster.mark()
    await alice.ack("send_message", sid, {"content": streamed(long_answer, 1, 50)})
    await alice.wait_for(lambda: len(deltas(alice, sid)) >= 3, timeout=30)
    await alice.ack("cancel", sid)
    assert await alice.wait_phase(sid) == "CANCELLED"
    # The loop's model call was interrupted (its task cancelled), not left to finish.
    cluster.wait_line(rf"session_loop_interrupted session={sid}", mark, timeout=15)
    # A next turn in the same session goes through the same harness and gateway: by its end
    # any piece still on its way has arrived.
    await alice.ack("send_message", sid, {"content": script({"content": "after"})})
    assert await alice.wait_phase(sid, count=2) == "COMPLETED"
    cancelled = {p["messageId"] for p in deltas(alice, sid)}
    assert len(cancelled) == 1
    assert len(deltas(alice, sid)) < 100  # far fewer than the 300 an unstopped stream sends
    history = await alice_rest.messages(sid)
    assert [(m["role"], m["content"]) for m in history if m["role"] == "ASSISTANT"] == [("ASSISTANT", "after")]


async def test_a_harness_killed_mid_stream_leaves_no_partial_message(
    cluster, alice: Client, alice_rest: Rest
) -> None:
    sid = await new_session(alice)
    await alice.ack("send_message", sid, {"content": streamed(ANSWER, 2, 60)})
    await alice.wait_for(lambda: len(deltas(alice, sid)) >= 3, timeout=30)
    old_pid = cluster.kill("harness", signal.SIGKILL)
    cluster.wait_restarted("harness", old_pid)
    assert await alice.wait_phase(sid, timeout=90) == "COMPLETED"
    message = assert_before_the_message(alice, sid)
    assert message["content"] == ANSWER
    assert len(assistant_messages(alice, sid)) == 1
    history = await alice_rest.messages(sid, includeDiscarded=1)
    assert [(m["role"], m["content"]) for m in history][1:] == [("ASSISTANT", ANSWER)]
    # The takeover called the model again: its pieces preview the message recorded; those
    # of the killed attempt name a message that was never recorded.
    ids = [p["messageId"] for p in deltas(alice, sid)]
    assert ids[0] != message["messageId"]
    assert message["messageId"] in ids
    conn = await asyncpg.connect(cluster.database_url)
    try:
        recorded = await conn.fetchval(
            "SELECT count(*) FROM events WHERE stream_id = $1 AND type = 'MessageRecorded' "
            "AND payload->>'role' = 'ASSISTANT'",
            sid,
        )
    finally:
        await conn.close()
    assert recorded == 1


async def test_a_subagent_streams_through_the_worker(cluster, alice: Client, alice_rest: Rest) -> None:
    child_answer = "The child streams its answer too."
    # The child's first step gives the test time to subscribe to the child's session.
    child_task = script(
        {"tool_calls": [{"name": "list_files", "arguments": {}}], "delay_ms": 1500},
        {"content": child_answer, "stream": {"chunk": 3, "delay_ms": 20}},
    )
    sid = await new_session(alice)
    await alice.ack("send_message", sid, {"content": script(
        {"tool_calls": [{"name": "delegate", "arguments": {"agent_type": "coder", "task": child_task}}]},
        {"content": "parent done"},
    )})
    await alice.wait_for(lambda: any(e["type"] == "subagent_session_created" for e in alice.events[sid]), 30)
    (child,) = [e["data"]["childSessionId"] for e in alice.events[sid] if e["type"] == "subagent_session_created"]
    await alice.ack("subscribe", child, {"afterPosition": 0})
    assert await alice.wait_phase(sid, timeout=60) == "COMPLETED"
    await alice.wait_phase(child)
    message = assert_before_the_message(alice, child)
    assert message["content"] == child_answer
    assert len(assistant_messages(alice, child)) == 2
    pieces = [p for p in deltas(alice, child) if p["messageId"] == message["messageId"]]
    assert "".join(p["text"] for p in pieces) == child_answer
