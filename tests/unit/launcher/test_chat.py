"""`muster chat` helpers: WebSocket URL, event rendering, end-of-turn detection."""

from __future__ import annotations

from typing import Any

from muster_launcher.chat import Streamed, _Turn, render, ws_url


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


def test_a_streamed_answer_is_printed_as_it_comes_and_not_again() -> None:
    out: list[str] = []
    streamed = Streamed(out.append)

    def delta(mid: str, index: int, text: str) -> dict[str, Any]:
        return {"type": "assistant_delta", "sessionId": "s", "data": {"messageId": mid, "index": index, "text": text}}

    def message(mid: str, content: str, calls: list[dict[str, Any]] | None = None) -> dict[str, Any]:
        data = {"messageId": mid, "role": "ASSISTANT", "content": content, "toolCalls": calls}
        return {"type": "message", "sessionId": "s", "position": 1, "data": data}

    streamed.delta(delta("m1", 0, "Hel"))
    streamed.delta(delta("m1", 1, "lo"))
    assert "".join(out) == "assistant: Hello"
    call = {"id": "c", "type": "function", "function": {"name": "read_file", "arguments": "{}"}}
    assert streamed.lines(message("m1", "Hello", [call])) == ["  -> read_file({})"]
    assert "".join(out) == "assistant: Hello\n"
    # Pieces missed (a preview only): the whole message is shown.
    streamed.delta(delta("m2", 0, "Par"))
    assert streamed.lines(message("m2", "Partial answer")) == ["assistant: Partial answer"]
    # An answer never streamed prints as before.
    assert streamed.lines(message("m3", "Plain")) == ["assistant: Plain"]


def test_an_event_during_a_streamed_answer_waits_until_its_line_is_finished() -> None:
    out: list[str] = []
    streamed = Streamed(out.append)
    data = {"messageId": "m1", "index": 0, "text": "Hel"}
    streamed.delta({"type": "assistant_delta", "sessionId": "s", "data": data})
    titled = {"type": "session_updated", "sessionId": "s", "position": 2, "data": {"title": "Greeting"}}
    assert streamed.lines(titled) == []  # held: it would cut the answer in two
    streamed.delta({"type": "assistant_delta", "sessionId": "s", "data": {**data, "index": 1, "text": "lo"}})
    assert "".join(out) == "assistant: Hello"
    message = {"type": "message", "sessionId": "s", "position": 3,
               "data": {"messageId": "m1", "role": "ASSISTANT", "content": "Hello"}}
    assert streamed.lines(message) == render(titled)
    assert "".join(out) == "assistant: Hello\n"


def test_an_answer_cut_by_a_status_line_starts_again_whole() -> None:
    out: list[str] = []
    streamed = Streamed(out.append)
    data = {"messageId": "m1", "index": 0, "text": "Hel"}
    streamed.delta({"type": "assistant_delta", "sessionId": "s", "data": data})
    status = {"type": "session_status", "sessionId": "s", "position": 2, "data": {"phase": "RUNNING"}}
    assert streamed.lines(status) == ["-- RUNNING"]
    streamed.delta({"type": "assistant_delta", "sessionId": "s", "data": {**data, "index": 1, "text": "lo"}})
    # Never a line that starts mid-answer ("lo"): the answer so far is repeated on a new line.
    assert "".join(out) == "assistant: Hel\nassistant: Hello"
