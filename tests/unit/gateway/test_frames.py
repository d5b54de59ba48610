from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta, timezone
from typing import Any
from uuid import uuid4

from muster_contracts import events as ev
from muster_gateway.frames import event_frame, iso

AT = datetime(2025, 1, 2, 3, 4, 5, 678000, tzinfo=UTC)


def frame_of(event: ev.DomainEvent, position: int = 11) -> dict[str, Any] | None:
    return event_frame("sid", position, AT, event.type, event.schema_version, event.payload())


def test_envelope_fields() -> None:
    frame = frame_of(ev.SessionPhaseChanged(phase="RUNNING"))
    assert frame == {"type": "session_status", "sessionId": "sid", "position": 11,
                     "time": "2025-01-02T03:04:05.678000Z", "data": {"phase": "RUNNING"}}


def test_time_is_utc() -> None:
    local = AT.astimezone(timezone(timedelta(hours=5)))
    assert iso(local) == "2025-01-02T03:04:05.678000Z"


def test_assistant_message_has_openai_tool_calls() -> None:
    mid = uuid4()
    event = ev.MessageRecorded(
        message_id=mid, seq=3, role="ASSISTANT", content="",
        tool_calls=[ev.ToolCallSpec(id="c1", name="read_file", arguments=json.dumps({"path": "a.txt"}))],
    )
    frame = frame_of(event)
    assert frame is not None and frame["type"] == "message"
    assert frame["data"] == {
        "messageId": str(mid), "seq": 3, "role": "ASSISTANT", "content": "",
        "toolCalls": [{"id": "c1", "type": "function",
                       "function": {"name": "read_file", "arguments": '{"path": "a.txt"}'}}],
    }
    args = frame["data"]["toolCalls"][0]["function"]["arguments"]
    assert json.loads(args) == {"path": "a.txt"}


def test_tool_message_has_tool_call_id_and_no_tool_calls() -> None:
    event = ev.MessageRecorded(message_id=uuid4(), seq=4, role="TOOL", content="{}",
                               tool_call_id="c1")
    frame = frame_of(event)
    assert frame is not None
    assert frame["data"]["toolCallId"] == "c1" and "toolCalls" not in frame["data"]


def test_resuming_is_shown_as_running_and_errors_are_kept() -> None:
    frame = frame_of(ev.SessionPhaseChanged(phase="RESUMING"))
    assert frame is not None and frame["data"] == {"phase": "RUNNING"}
    frame = frame_of(ev.SessionPhaseChanged(phase="FAILED", error="model exploded"))
    assert frame is not None and frame["data"] == {"phase": "FAILED", "error": "model exploded"}


def test_session_created() -> None:
    sid, parent = uuid4(), uuid4()
    frame = frame_of(ev.SessionCreated(
        session_id=sid, user_id="alice", session_type="SUBAGENT", parent_session_id=parent,
        root_session_id=parent, title=None, agent_type="coder",
    ))
    assert frame is not None and frame["type"] == "session_created"
    assert frame["data"] == {"sessionType": "SUBAGENT", "parentSessionId": str(parent),
                             "rootSessionId": str(parent), "title": None, "agentType": "coder"}
    assert "alice" not in json.dumps(frame)  # the owner is not part of the stream


def test_queue_tool_and_discard_events() -> None:
    mid = uuid4()
    frame = frame_of(ev.UserMessageQueued(message_id=mid, client_message_id="c", content="hi"))
    assert frame is not None and frame["type"] == "message_queued"
    assert frame["data"] == {"messageId": str(mid), "clientMessageId": "c", "content": "hi"}
    frame = frame_of(ev.ToolCallStarted(message_id=mid, tool_call_id="t", name="write_file"))
    assert frame is not None and frame["type"] == "tool_call_started"
    assert frame["data"] == {"messageId": str(mid), "toolCallId": "t", "name": "write_file"}
    frame = frame_of(ev.MessagesDiscarded(message_ids=[mid], reason="crash"))
    assert frame is not None and frame["data"] == {"messageIds": [str(mid)]}
    frame = frame_of(ev.QueuedMessagesDropped(message_ids=[mid], reason="cancelled"))
    assert frame is not None and frame["type"] == "queued_messages_dropped"


def test_unknown_and_unreadable_events_are_skipped() -> None:
    assert event_frame("sid", 1, AT, "SomethingNew", 1, {"x": 1}) is None
    assert event_frame("sid", 1, AT, "SessionPhaseChanged", 1, {"phase": "BOGUS"}) is None


def test_delegation_events_on_the_parent_stream() -> None:
    child, execution = uuid4(), uuid4()
    frame = frame_of(ev.SubagentSessionCreated(
        child_session_id=child, tool_call_id="call_1", agent_type="coder", execution_id=execution,
    ))
    assert frame is not None and frame["type"] == "subagent_session_created"
    assert frame["data"] == {"parentSessionId": "sid", "childSessionId": str(child),
                             "toolCallId": "call_1", "agentType": "coder",
                             "executionId": str(execution)}
    frame = frame_of(ev.ExecutionStatusChanged(
        execution_id=execution, status="COMPLETED", delivery_status="DELIVERED",
    ))
    assert frame is not None and frame["type"] == "execution_status"
    assert frame["data"] == {"executionId": str(execution), "status": "COMPLETED",
                             "deliveryStatus": "DELIVERED"}


def test_file_change_on_the_stream_of_the_session_that_made_it() -> None:
    change, message = uuid4(), uuid4()
    frame = frame_of(ev.FileChanged(
        change_id=change, message_id=message, message_seq=2, tool_call_id="call_w", path="a/b.txt",
        change_type="CREATED", lines_added=3, diff_sha256="d" * 64, after_sha256="a" * 64,
        after_size=9, session_type="SUBAGENT", agent_type="coder",
    ))
    assert frame is not None and frame["type"] == "file_change"
    assert frame["data"] == {
        "changeId": str(change), "messageId": str(message), "toolCallId": "call_w", "path": "a/b.txt",
        "changeType": "CREATED", "linesAdded": 3, "linesDeleted": 0, "sourceSessionId": "sid",
        "sourceType": "SUBAGENT", "sourceAgentType": "coder",
    }
    for session_type in ("NORMAL", "SIDE_TASK"):
        main = frame_of(ev.FileChanged(
            change_id=change, message_id=message, message_seq=2, tool_call_id="c", path="p",
            change_type="MODIFIED", session_type=session_type,
        ))
        assert main is not None and main["data"]["sourceType"] == "MAIN"
