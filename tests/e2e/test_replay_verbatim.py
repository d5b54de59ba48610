"""Replay gives the live socket's payloads byte for byte, and a tool call's `arguments` is
the text the model produced everywhere: frames, REST, `/context` and `muster.events`
(DESIGN §7, issue 34)."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from aiokafka import AIOKafkaConsumer, TopicPartition

from .rawsocket import RawSocket
from .wsclient import Rest, script

pytestmark = pytest.mark.e2e

# Keys out of JSONB's order (it sorts by length, then bytes), odd spacing, non-ASCII text.
WRITE_TEXT = '{ "content" : "héllo ✓\\n",\n  "path":"notes/ü.txt" }'
EDIT_ARGS = {"path": "notes/ü.txt", "old_string": "héllo", "new_string": "hi"}
CHILD = script({"tool_calls": [{"name": "write_file", "arguments": '{"path":"c.txt","content":"c"}'}]},
               {"content": "child done"})
DELEGATE_ARGS = {"agent_type": "coder", "task": CHILD}
TURN = script(
    {"tool_calls": [{"name": "write_file", "arguments": WRITE_TEXT},
                    {"name": "edit_file", "arguments": EDIT_ARGS}]},
    {"tool_calls": [{"name": "delegate", "arguments": DELEGATE_ARGS}]},
    {"content": "all done ✓"},
)
SENT = [WRITE_TEXT, json.dumps(EDIT_ARGS), json.dumps(DELEGATE_ARGS)]  # as the model sent them

WAITS = script(
    {"tool_calls": [{"name": "write_file", "arguments": '{"content": "ok",   "path": "w.txt"}'}]},
    {"tool_calls": [{"name": "ask_user", "arguments": {"question": "Which? ✓", "options": ["b", "a"]}}]},
    {"content": "thanks"},
)

# Every frame type a session's stream carries in these turns; the test fails if one is
# missing, so the comparison keeps covering them all.
TURN_FRAMES = {"message", "session_status", "tool_call_started", "file_change", "subagent_session_created",
               "execution_status", "session_tree_status", "side_session_created", "session_updated"}
WAIT_FRAMES = {"message", "session_status", "approval_requested", "approval_resolved", "question_asked",
               "question_resolved"}


async def _replayed(cluster: Any, token: str, session_id: str, after: int, count: int) -> list[str]:
    replay = await RawSocket.connect(cluster.ws_url, token)
    try:
        await replay.ack("subscribe", session_id, {"afterPosition": after})
        await replay.wait_for(lambda: len(replay.events(session_id)) >= count)
        return replay.events(session_id)
    finally:
        await replay.close()


def _types(texts: list[str]) -> set[str]:
    return {json.loads(t)["type"] for t in texts}


async def _assert_replay_equals_live(cluster: Any, live: RawSocket, session_id: str, types: set[str]) -> None:
    sent = live.events(session_id)
    first = json.loads(sent[0])["position"]
    replayed = await _replayed(cluster, cluster.tokens["alice"], session_id, first - 1, len(sent))
    assert types <= _types(sent), types - _types(sent)
    for live_text, replay_text in zip(sent, replayed, strict=True):
        assert replay_text == live_text  # the frames as sent, not re-serialised


async def test_every_frame_replays_byte_for_byte_and_arguments_stay_the_models_text(
    cluster: Any, alice_rest: Rest
) -> None:
    live = await RawSocket.connect(cluster.ws_url, cluster.tokens["alice"])
    try:
        session_id = (await live.ack("create_session", data={"content": TURN}))["sessionId"]
        await live.wait_for(lambda: "COMPLETED" in live.phases(session_id))
        await live.ack("create_side_session", session_id, {"content": "a side look"})
        response = await alice_rest.http.patch(f"/v1/sessions/{session_id}", json={"title": "renamed ✓"})
        assert response.status_code == 200, response.text
        # Tree signals come from recovery, a little after the turn's own events.
        await live.wait_for(lambda: TURN_FRAMES <= _types(live.events(session_id)))
        await _assert_replay_equals_live(cluster, live, session_id, TURN_FRAMES)

        calls = [c for t in live.events(session_id) for c in json.loads(t)["data"].get("toolCalls") or []]
        assert [c["function"]["arguments"] for c in calls] == SENT

        history = await alice_rest.messages(session_id)
        assert [c["function"]["arguments"] for m in history for c in m.get("toolCalls") or []] == SENT
        context = await alice_rest.json(f"/v1/sessions/{session_id}/context")
        assert [c["function"]["arguments"] for m in context["messages"] for c in m.get("tool_calls") or []] == SENT
        assert await _published_arguments(cluster.kafka_bootstrap, session_id) == SENT
    finally:
        await live.close()


async def test_approval_and_question_frames_replay_byte_for_byte(cluster: Any) -> None:
    live = await RawSocket.connect(cluster.ws_url, cluster.tokens["alice"])
    try:
        created = await live.ack("create_session", data={"content": WAITS, "permissionLevel": "ask"})
        session_id = created["sessionId"]

        def frame(kind: str) -> dict[str, Any] | None:
            found = [json.loads(t) for t in live.events(session_id) if json.loads(t)["type"] == kind]
            return found[0] if found else None

        await live.wait_for(lambda: frame("approval_requested") is not None)
        approval = frame("approval_requested")
        assert approval is not None
        # The object keeps the key order the model wrote (content before path).
        assert list(approval["data"]["arguments"]) == ["content", "path"]
        await live.ack("answer_approval", session_id, {"approvalId": approval["data"]["approvalId"],
                                                      "decision": "approve"})
        await live.wait_for(lambda: frame("question_asked") is not None)
        question = frame("question_asked")
        assert question is not None
        await live.ack("answer_question", session_id, {"questionId": question["data"]["questionId"], "answer": "b"})
        await live.wait_for(lambda: "COMPLETED" in live.phases(session_id))
        await _assert_replay_equals_live(cluster, live, session_id, WAIT_FRAMES)
    finally:
        await live.close()


async def _published_arguments(bootstrap: str, session_id: str) -> list[str]:
    """The tool calls' `arguments` of the session's MessageRecorded records on `muster.events`."""
    consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False, fetch_max_wait_ms=20)
    await consumer.start()
    try:
        await consumer.topics()  # loads the topics' metadata
        partitions = [TopicPartition("muster.events", p) for p in consumer.partitions_for_topic("muster.events") or ()]
        consumer.assign(partitions)
        await consumer.seek_to_beginning(*partitions)
        found: dict[int, list[str]] = {}  # by position: a record may come twice
        final = False
        async with asyncio.timeout(30):
            while not final:
                batches = await consumer.getmany(timeout_ms=200)
                for record in (r for rs in batches.values() for r in rs):
                    event = json.loads(record.value or b"{}")
                    if event.get("stream_id") != session_id or event.get("type") != "MessageRecorded":
                        continue
                    payload = event["payload"]
                    found[event["position"]] = [c["arguments"] for c in payload.get("tool_calls") or []]
                    final = final or payload["content"] == "all done ✓"
        return [text for _, texts in sorted(found.items()) for text in texts]
    finally:
        await consumer.stop()
