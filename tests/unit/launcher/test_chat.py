"""`muster chat` helpers: WebSocket URL, event rendering, end-of-turn detection."""

from __future__ import annotations

from muster_launcher.chat import _Turn, render, ws_url


def test_ws_url() -> None:
    assert ws_url("http://127.0.0.1:8765", "a b/c") == "ws://127.0.0.1:8765/v1/ws?token=a%20b%2Fc"
    assert ws_url("https://example.org/", "t") == "wss://example.org/v1/ws?token=t"


def test_render_message_with_tool_calls() -> None:
    event = {
        "type": "message",
        "data": {
            "role": "ASSISTANT",
            "content": "delegating",
            "toolCalls": [
                {
                    "id": "c1",
                    "type": "function",
                    "function": {"name": "delegate", "arguments": '{"task": "x"}'},
                }
            ],
        },
    }
    assert render(event) == ["assistant: delegating", '  -> delegate({"task": "x"})']
    tool = {"type": "message", "data": {"role": "TOOL", "toolCallId": "c1", "content": "ok"}}
    assert render(tool) == ["  <- [c1] ok"]
    assert render({"type": "session_status", "data": {"phase": "RUNNING"}}) == ["-- RUNNING"]


def _status(phase: str) -> dict[str, object]:
    return {"type": "session_status", "data": {"phase": phase}}


def test_turn_ends_only_after_it_started() -> None:
    turn = _Turn("hi")
    assert turn.observe(_status("COMPLETED")) is None  # an earlier turn's end
    assert turn.observe(_status("RUNNING")) is None
    assert turn.observe(_status("COMPLETED")) == 0


def test_queued_turn_waits_for_its_own_message() -> None:
    turn = _Turn("second", message_id="m2", queued=True)
    assert turn.observe(_status("RUNNING")) is None
    assert turn.observe(_status("COMPLETED")) is None  # the turn we were queued behind
    user = {"type": "message", "data": {"role": "USER", "messageId": "m2", "content": "second"}}
    assert turn.observe(user) is None
    assert turn.observe(_status("FAILED")) == 1


def test_render_local_tool_requests() -> None:
    sent = {"type": "tool_request_sent", "data": {"requestId": "r1", "toolCallId": "c1", "name": "write_file"}}
    assert render(sent) == ["-- LOCAL write_file requested (r1)"]
    resolved = {"type": "tool_request_resolved", "data": {"requestId": "r1", "outcome": "answered"}}
    assert render(resolved) == ["-- LOCAL request r1: answered"]
