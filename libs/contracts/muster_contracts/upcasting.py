"""Turn a stored `(type, schema_version, payload)` into the current event model.

Published events are never rewritten; older versions are upgraded on read, one step at a
time, by the functions registered here.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from muster_contracts.events import DomainEvent
from muster_contracts.registry import EVENT_TYPES
from muster_contracts.tool_arguments import arguments_text, with_text_arguments

Upcaster = Callable[[dict[str, Any]], dict[str, Any]]

# (type, from_version) -> function producing the payload of from_version + 1


def _session_created_v1(payload: dict[str, Any]) -> dict[str, Any]:
    # v2 added per-session settings; sessions created before had the defaults.
    return {
        **payload,
        "permission_level": "auto",
        "execution_mode": "CLOUD",
        "context_mode": None,
        "background": None,
        "workspace_id": None,
    }


def _message_recorded_v2(payload: dict[str, Any]) -> dict[str, Any]:
    # v3 keeps the model's text; before it the parsed object was stored, and its text is
    # the one every reader showed (tool_arguments.arguments_text).
    return {**payload, "tool_calls": with_text_arguments(payload.get("tool_calls"))}


def _arguments_as_text(payload: dict[str, Any]) -> dict[str, Any]:
    return {**payload, "arguments": arguments_text(payload["arguments"])}


UPCASTERS: dict[tuple[str, int], Upcaster] = {
    # v2: a delivered TOOL result names its child session; nothing recorded before did.
    ("MessageRecorded", 1): lambda payload: {**payload, "source_session_id": None},
    ("MessageRecorded", 2): _message_recorded_v2,
    ("SessionCreated", 1): _session_created_v1,
    ("ApprovalRequested", 1): _arguments_as_text,
    ("ToolRequested", 1): _arguments_as_text,
}


class UnknownEventType(ValueError):
    pass


def load_event(type_: str, schema_version: int, payload: dict[str, Any]) -> DomainEvent:
    cls = EVENT_TYPES.get(type_)
    if cls is None:
        raise UnknownEventType(f"unknown event type {type_!r}")
    current = cls.model_fields["schema_version"].default
    while schema_version < current:
        payload = UPCASTERS[(type_, schema_version)](payload)
        schema_version += 1
    return cls.model_validate({**payload, "type": type_, "schema_version": schema_version})
