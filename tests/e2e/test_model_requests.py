"""At an OpenAI-compatible server: each step's request repeats the previous step's request
message for message, byte for byte, then adds the new messages — the tool calls' arguments
exactly as the model wrote them (a provider's prompt cache needs the prefix unchanged)."""

from __future__ import annotations

import itertools
import json
from typing import Any

import pytest

from .conftest import free_port
from .openai_server import ChatServer, completion, tool_call
from .wsclient import Client

pytestmark = pytest.mark.e2e

WRITE = '{"content":"x ✓",  "path":"a.txt"}'
READ = '{ "path" : "a.txt" }'
# The answers with text come at a model's pace (0.1 s a chunk), so their pieces reach the
# socket before the durable message that ends them, as they do with a real model: a piece
# later than its message is dropped by design (ADR 0039).
REPLIES = [
    completion(None, [tool_call("call_w", "write_file", WRITE), tool_call("call_l", "list_files", "{}")]),
    {**completion("reading", [tool_call("call_r", "read_file", READ)]), "delay_s": 0.1},
    {**completion("done ✓"), "delay_s": 0.1},
]


def _texts(messages: list[dict[str, Any]]) -> list[str]:
    # json.loads keeps key order and strings exactly, so equal texts mean equal bytes sent.
    return [json.dumps(m, ensure_ascii=False) for m in messages]


async def test_each_request_repeats_the_last_one_then_adds_the_new_messages(launch: Any) -> None:
    with ChatServer(REPLIES, free_port()).running() as server:
        cluster = launch(MUSTER_MODEL="openai", MUSTER_OPENAI_BASE_URL=server.base_url,
                         MUSTER_OPENAI_MODEL="test-model", MUSTER_OPENAI_API_KEY="sk-test-not-a-key")
        client = await Client.connect(cluster.ws_url, cluster.tokens["alice"])
        try:
            session_id = await client.run_turn("write a.txt, then read it")
            assert client.phases(session_id)[-1] == "COMPLETED"
            # The server streamed each answer (ADR 0039): its text reached the socket in
            # pieces, ahead of the durable message that holds it whole.
            answers = [e["data"] for e in client.events[session_id]
                       if e["type"] == "message" and e["data"]["role"] == "ASSISTANT" and e["data"]["content"]]
            pieces = client.conn.log.deltas[session_id]
            assert [a["content"] for a in answers] == ["reading", "done ✓"]
            for answer in answers:
                mine = [p["data"] for p in pieces if p["data"]["messageId"] == answer["messageId"]]
                assert len(mine) == 2 and "".join(p["text"] for p in mine) == answer["content"]
        finally:
            await client.close()
        requests = server.requests()

    assert len(requests) == 3
    for before, after in itertools.pairwise(requests):
        old, new = _texts(before["messages"]), _texts(after["messages"])
        assert new[: len(old)] == old
        assert len(new) > len(old)
    second, third = requests[1]["messages"], requests[2]["messages"]
    assert [c["function"]["arguments"] for c in second[-3]["tool_calls"]] == [WRITE, "{}"]
    assert [c["function"]["arguments"] for c in third[-2]["tool_calls"]] == [READ]
    assert [m["role"] for m in third[-5:]] == ["assistant", "tool", "tool", "assistant", "tool"]
