"""Stored events → server → client frames (`{"type", "sessionId", "position", "time", "data"}`).

Pure functions, shared by live delivery and replay so both render an event identically.
Event types the gateway does not know (added by a newer service) are skipped, not errors.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from muster_contracts import events as ev
from muster_contracts.tool_arguments import arguments_text
from muster_contracts.upcasting import UnknownEventType, load_event
from pydantic import ValidationError

from muster_gateway import tree_frames, wait_frames

log = logging.getLogger("muster.gateway.frames")


def iso(moment: datetime) -> str:
    """ISO 8601 in UTC with a `Z` suffix (asyncpg returns aware datetimes)."""
    return moment.astimezone(UTC).isoformat().replace("+00:00", "Z")


def client_phase(phase: str | None) -> str | None:
    # RESUMING is internal crash recovery, WAITING_CLIENT a file tool running on the user's
    # LOCAL client: clients see the turn as still running.
    return "RUNNING" if phase in ("RESUMING", "WAITING_CLIENT") else phase


def client_status(status: str) -> str:
    # RECOVERING likewise: a run that recovery takes over is still running for clients.
    return "RUNNING" if status == "RECOVERING" else status


def openai_tool_calls(calls: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Stored `{id, name, arguments}` → OpenAI's form, `arguments` the model's own text (an
    object stored before MessageRecorded v3 shows as the text readers showed then)."""
    return [
        {
            "id": call["id"],
            "type": "function",
            "function": {"name": call["name"], "arguments": arguments_text(call["arguments"])},
        }
        for call in calls
    ]


def message_data(
    message_id: Any,
    seq: int,
    role: str,
    content: str,
    tool_calls: Sequence[Mapping[str, Any]] | None,
    tool_call_id: str | None,
    source_session_id: Any = None,
) -> dict[str, Any]:
    data: dict[str, Any] = {
        "messageId": str(message_id),
        "seq": seq,
        "role": role,
        "content": content,
    }
    if tool_calls:
        data["toolCalls"] = openai_tool_calls(tool_calls)
    if tool_call_id is not None:
        data["toolCallId"] = tool_call_id
    if source_session_id is not None:  # a delivered TOOL result: the child it came from
        data["sourceSessionId"] = str(source_session_id)
    return data


def _uuid(value: Any) -> str | None:
    return None if value is None else str(value)


def render(session_id: str, event: ev.DomainEvent) -> tuple[str, dict[str, Any]] | None:
    """(frame type, data) for an event of `session_id`'s stream, or None when clients are
    not shown it."""
    match event:
        case ev.MessageRecorded():
            calls = [c.model_dump(mode="json") for c in event.tool_calls or []]
            return "message", message_data(
                event.message_id,
                event.seq,
                event.role,
                event.content,
                calls,
                event.tool_call_id,
                event.source_session_id,
            )
        case ev.SessionPhaseChanged():
            status: dict[str, Any] = {"phase": client_phase(event.phase)}
            if event.error is not None:
                status["error"] = event.error
            return "session_status", status
        case ev.SessionCreated():
            return "session_created", {
                "sessionType": event.session_type,
                "parentSessionId": _uuid(event.parent_session_id),
                "rootSessionId": str(event.root_session_id),
                "title": event.title,
                "agentType": event.agent_type,
            }
        case ev.UserMessageQueued():
            return "message_queued", {
                "messageId": str(event.message_id),
                "clientMessageId": event.client_message_id,
                "content": event.content,
            }
        case ev.ToolCallStarted():
            return "tool_call_started", {
                "messageId": str(event.message_id),
                "toolCallId": event.tool_call_id,
                "name": event.name,
            }
        case ev.MessagesDiscarded():
            return "messages_discarded", {"messageIds": [str(m) for m in event.message_ids]}
        case ev.SubagentSessionCreated():
            return "subagent_session_created", {
                "parentSessionId": session_id,
                "childSessionId": str(event.child_session_id),
                "toolCallId": event.tool_call_id,
                "agentType": event.agent_type,
                "executionId": str(event.execution_id),
            }
        case ev.ExecutionStatusChanged():
            return "execution_status", {
                "executionId": str(event.execution_id),
                "status": client_status(event.status),
                "deliveryStatus": event.delivery_status,
            }
        case ev.FileChanged():
            return "file_change", {
                "changeId": str(event.change_id),
                "messageId": str(event.message_id),
                "toolCallId": event.tool_call_id,
                "path": event.path,
                "changeType": event.change_type,
                "linesAdded": event.lines_added,
                "linesDeleted": event.lines_deleted,
                "sourceSessionId": session_id,
                "sourceType": "SUBAGENT" if event.session_type == "SUBAGENT" else "MAIN",
                # A main session's own changes have no agent type to show (DESIGN §4).
                "sourceAgentType": event.agent_type if event.session_type == "SUBAGENT" else None,
            }
        case ev.CompactionRecorded():
            return "compaction_recorded", {
                "boundaryMessageId": str(event.boundary_message_id),
                "boundarySeq": event.boundary_seq,
                "summary": event.summary,
                "messagesCompacted": event.messages_compacted,
                "tokensBefore": event.tokens_before,
                "tokensAfter": event.tokens_after,
            }
        case ev.QueuedMessagesDropped():
            # Not in the brief's list, but a client that showed `message_queued` needs to
            # learn that those messages will never run.
            return "queued_messages_dropped", {
                "messageIds": [str(m) for m in event.message_ids],
                "reason": event.reason,
            }
    return tree_frames.render(session_id, event) or wait_frames.render(event)


def event_frame(
    session_id: str,
    position: int,
    recorded_at: datetime,
    type_: str,
    schema_version: int,
    payload: dict[str, Any],
) -> dict[str, Any] | None:
    try:
        event = load_event(type_, schema_version, payload)
    except UnknownEventType:
        return None
    except (ValidationError, KeyError) as exc:
        # A stored event this code cannot read must not stop the stream for everyone else.
        log.warning("event_unreadable position=%s type=%s error=%s", position, type_, type(exc).__name__)
        return None
    rendered = render(session_id, event)
    if rendered is None:
        return None
    kind, data = rendered
    return {
        "type": kind,
        "sessionId": session_id,
        "position": position,
        "time": iso(recorded_at),
        "data": data,
    }
