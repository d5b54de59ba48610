"""Turn a stored `(type, schema_version, payload)` into the current event model.

Published events are never rewritten; older versions are upgraded on read, one step at a
time, by the functions registered here.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from muster_contracts.events import EVENT_TYPES, DomainEvent

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


UPCASTERS: dict[tuple[str, int], Upcaster] = {
    # v2: a delivered TOOL result names its child session; nothing recorded before did.
    ("MessageRecorded", 1): lambda payload: {**payload, "source_session_id": None},
    ("SessionCreated", 1): _session_created_v1,
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
