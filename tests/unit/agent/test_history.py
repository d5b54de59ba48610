from __future__ import annotations

from typing import Any
from uuid import uuid4

from muster_agent.history import StoredMessage, last_tool_round, pending_tool_calls, to_chat, turn_finished


def msg(seq: int, role: str, content: str = "", calls: list[dict[str, Any]] | None = None,
        call_id: str | None = None) -> StoredMessage:
    return StoredMessage(uuid4(), seq, role, content, calls, call_id)


CALLS = [
    {"id": "c1", "name": "write_file", "arguments": '{ "path":"a", "content" : "x"}'},
    {"id": "c2", "name": "delegate", "arguments": '{"agent_type": "coder", "task": "t"}'},
]


def test_to_chat_uses_openai_tool_call_form() -> None:
    chat = to_chat([msg(1, "USER", "hi"), msg(2, "ASSISTANT", "", CALLS), msg(3, "TOOL", "{}", call_id="c1")])
    assert chat[0] == {"role": "user", "content": "hi"}
    assert chat[1]["tool_calls"][0] == {
        "id": "c1", "type": "function",
        "function": {"name": "write_file", "arguments": '{ "path":"a", "content" : "x"}'},  # verbatim
    }
    assert chat[2] == {"role": "tool", "tool_call_id": "c1", "content": "{}"}


def test_pending_calls_are_the_unanswered_ones_in_call_order() -> None:
    history = [msg(1, "USER"), msg(2, "ASSISTANT", "", CALLS), msg(3, "TOOL", call_id="c2")]
    assert [c["id"] for c in pending_tool_calls(history)] == ["c1"]
    history.append(msg(4, "TOOL", call_id="c1"))
    assert pending_tool_calls(history) == []


def test_an_answer_without_tool_calls_finishes_the_turn() -> None:
    assert not turn_finished([msg(1, "USER")])
    assert not turn_finished([msg(1, "USER"), msg(2, "ASSISTANT", "", CALLS)])
    assert turn_finished([msg(1, "USER"), msg(2, "ASSISTANT", "done")])


def test_a_new_user_message_closes_the_previous_round() -> None:
    history = [msg(1, "USER"), msg(2, "ASSISTANT", "", CALLS), msg(3, "USER")]
    assert last_tool_round(history) is None
    assert pending_tool_calls(history) == []
