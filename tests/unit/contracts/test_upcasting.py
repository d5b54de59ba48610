from __future__ import annotations

from typing import Any, Literal
from uuid import UUID

import pytest
from muster_contracts import upcasting
from muster_contracts.events import (
    DomainEvent,
    MessageRecorded,
    SessionCreated,
    SessionPhaseChanged,
)
from muster_contracts.registry import EVENT_TYPES


def test_current_version_loads_as_is() -> None:
    event = upcasting.load_event("SessionPhaseChanged", 1, {"phase": "RUNNING", "error": None})
    assert event == SessionPhaseChanged(phase="RUNNING")


class _StatusChanged(DomainEvent):
    """Stands for an event at version 3 whose v1 called its field `state`."""

    type: Literal["StatusChanged"] = "StatusChanged"
    schema_version: int = 3
    phase: str
    error: str | None


def test_older_versions_are_upcast_step_by_step(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(EVENT_TYPES, "StatusChanged", _StatusChanged)

    def v1_to_v2(payload: dict[str, Any]) -> dict[str, Any]:
        return {"phase": payload["state"], "error": None}

    def v2_to_v3(payload: dict[str, Any]) -> dict[str, Any]:
        return {**payload, "error": payload["error"] or "none recorded"}

    monkeypatch.setitem(upcasting.UPCASTERS, ("StatusChanged", 1), v1_to_v2)
    monkeypatch.setitem(upcasting.UPCASTERS, ("StatusChanged", 2), v2_to_v3)
    event = upcasting.load_event("StatusChanged", 1, {"state": "FAILED"})
    assert isinstance(event, _StatusChanged)
    assert (event.phase, event.error, event.schema_version) == ("FAILED", "none recorded", 3)


def test_unknown_type_is_refused() -> None:
    with pytest.raises(upcasting.UnknownEventType):
        upcasting.load_event("NoSuchEvent", 1, {"id": str(UUID(int=1))})


def test_session_created_v1_gets_the_v2_defaults() -> None:
    sid = str(UUID(int=10))
    event = upcasting.load_event(
        "SessionCreated", 1, {"session_id": sid, "user_id": "alice", "root_session_id": sid, "title": "t"}
    )
    assert isinstance(event, SessionCreated) and event.schema_version == 2
    assert (event.permission_level, event.execution_mode, event.context_mode, event.background) == (
        "auto", "CLOUD", None, None
    )


def test_a_v1_message_reads_without_a_source_session() -> None:
    payload = {"message_id": str(UUID(int=7)), "seq": 3, "role": "TOOL", "content": "{}", "tool_call_id": "c"}
    event = upcasting.load_event("MessageRecorded", 1, payload)
    assert isinstance(event, MessageRecorded)
    assert (event.schema_version, event.source_session_id, event.tool_call_id) == (3, None, "c")


def test_message_recorded_v2_arguments_become_the_text_readers_showed() -> None:
    # v2 stored the parsed object (JSONB had reordered its keys); its text is json.dumps of
    # it as stored, exactly what frames and model requests carried before v3.
    stored = {"path": "a.txt", "new_string": "b", "old_string": "é"}
    event = upcasting.load_event(
        "MessageRecorded",
        2,
        {
            "message_id": str(UUID(int=1)), "seq": 2, "role": "ASSISTANT", "content": "",
            "tool_calls": [{"id": "c1", "name": "edit_file", "arguments": stored}],
            "tool_call_id": None, "usage": None, "source_session_id": None,
        },
    )
    assert isinstance(event, MessageRecorded) and event.schema_version == 3
    assert event.tool_calls is not None
    assert event.tool_calls[0].arguments == '{"path": "a.txt", "new_string": "b", "old_string": "\\u00e9"}'


def test_message_recorded_v3_keeps_the_models_text_byte_for_byte() -> None:
    text = '{ "path":"a.txt" ,\n "content" : "naïve ✓"}'
    payload = {
        "message_id": str(UUID(int=1)), "seq": 2, "role": "ASSISTANT", "content": "",
        "tool_calls": [{"id": "c1", "name": "write_file", "arguments": text}],
        "tool_call_id": None, "usage": None, "source_session_id": None,
    }
    event = upcasting.load_event("MessageRecorded", 3, payload)
    assert event.payload()["tool_calls"][0]["arguments"] == text


@pytest.mark.parametrize("type_", ["ApprovalRequested", "ToolRequested"])
def test_wait_events_v1_arguments_become_text(type_: str) -> None:
    ids = {"ApprovalRequested": {"approval_id": str(UUID(int=3)), "tool": "write_file"},
           "ToolRequested": {"request_id": str(UUID(int=3)), "name": "write_file"}}[type_]
    event = upcasting.load_event(
        type_, 1, {**ids, "tool_call_id": "c1", "arguments": {"path": "a", "content": "x"}}
    )
    assert event.schema_version == 2
    assert event.payload()["arguments"] == '{"path": "a", "content": "x"}'
