"""Server → client frames of side tasks and session management (§7), for `frames.render`."""

from __future__ import annotations

from typing import Any

from muster_contracts import events as ev
from muster_contracts import session_events as se


def render(session_id: str, event: ev.DomainEvent) -> tuple[str, dict[str, Any]] | None:
    match event:
        case se.SideSessionCreated():
            return "side_session_created", {
                "parentSessionId": session_id,
                "sessionId": str(event.session_id),
                "rootSessionId": str(event.root_session_id),
                "contextMode": event.context_mode,
            }
        case se.SessionTreeStatusChanged():
            return "session_tree_status", {
                "treeRunning": event.tree_running,
                "treeUnread": event.tree_unread,
                "pendingApprovals": event.pending_approvals,
                "pendingQuestions": event.pending_questions,
            }
        case se.SessionForked():
            # The copied messages are not sent one by one: read them with GET …/messages.
            return "session_forked", {
                "sourceSessionId": str(event.source_session_id),
                "upToSeq": event.up_to_seq,
            }
        case se.SessionSettingsChanged():
            changed = {
                "title": event.title,
                "modelId": event.model_id,
                "permissionLevel": event.permission_level,
            }
            return "session_updated", {k: v for k, v in changed.items() if v is not None}
        case se.SessionPromoted():
            return "session_promoted", {
                "previousParentSessionId": str(event.previous_parent_session_id),
                "previousRootSessionId": str(event.previous_root_session_id),
            }
        case se.SessionArchived():
            return "session_archived", {}
        case se.SessionUnarchived():
            return "session_unarchived", {}
        case se.SessionDeleted():
            return "session_deleted", {}
        case se.SessionRead():
            return "session_read", {}
    return None
