"""File changes as the API shows them, and a turn's summary: its changes merged by path.

Pure functions, no I/O. Merging takes the changes in the order they were recorded (event
position, across parent and children): lines added and deleted are summed, the earliest
`before` and the latest `after` snapshots are kept, the patches are concatenated in that
order (so they apply one after the other) and every source session is listed once. A path
CREATED at any point in the turn is CREATED; otherwise one whose last change is a deletion
is DELETED, and anything else MODIFIED.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any
from uuid import UUID


@dataclass(frozen=True)
class Change:
    change_id: UUID
    session_id: UUID  # the session whose tool call made it
    message_id: UUID  # that session's ASSISTANT message
    tool_call_id: str  # that session's tool call
    path: str
    change_type: str
    lines_added: int
    lines_deleted: int
    diff: str | None
    before_sha256: str | None
    after_sha256: str | None
    source_type: str  # MAIN | SUBAGENT
    agent_type: str
    position: int  # event-store position: the recording order
    note: str | None = None
    parent_tool_call_id: str | None = None  # the delegation it came through (children only)
    execution_id: UUID | None = None

    @property
    def shown_agent_type(self) -> str | None:
        """A main session's own changes have no agent type to show (DESIGN §4)."""
        return self.agent_type if self.source_type == "SUBAGENT" else None

    def source(self) -> dict[str, Any]:
        return {
            "sessionId": str(self.session_id),
            "type": self.source_type,
            "agentType": self.shown_agent_type,
        }

    def api(self) -> dict[str, Any]:
        """An entry of an ASSISTANT message's `fileChanges`."""
        return {
            "changeId": str(self.change_id),
            "path": self.path,
            "changeType": self.change_type,
            "linesAdded": self.lines_added,
            "linesDeleted": self.lines_deleted,
            "diff": self.diff,
            "sourceSessionId": str(self.session_id),
            "sourceType": self.source_type,
            "sourceAgentType": self.shown_agent_type,
            "toolCallId": self.tool_call_id,
            "messageId": str(self.message_id),
            "parentToolCallId": self.parent_tool_call_id,
            "executionId": None if self.execution_id is None else str(self.execution_id),
            "note": self.note,
        }


@dataclass
class Merged:
    path: str
    change_type: str
    lines_added: int
    lines_deleted: int
    before_sha256: str | None
    after_sha256: str | None
    patches: list[str]
    sources: list[dict[str, Any]]
    created: bool = field(repr=False, default=False)

    @property
    def patch(self) -> str | None:
        return "".join(self.patches) if self.patches else None

    def api(self, *, before: str | None, after: str | None) -> dict[str, Any]:
        return {
            "path": self.path,
            "changeType": self.change_type,
            "linesAdded": self.lines_added,
            "linesDeleted": self.lines_deleted,
            "before": before,
            "after": after,
            "patch": self.patch,
            "sources": self.sources,
        }


def combined_type(created: bool, last: str) -> str:
    if created:
        return "CREATED"
    return "DELETED" if last == "DELETED" else "MODIFIED"


def merge(changes: Iterable[Change]) -> list[Merged]:
    """`changes` merged by path, paths in the order of their first change."""
    merged: dict[str, Merged] = {}
    for change in sorted(changes, key=lambda c: c.position):
        found = merged.get(change.path)
        if found is None:
            merged[change.path] = Merged(
                path=change.path,
                change_type=change.change_type,
                lines_added=change.lines_added,
                lines_deleted=change.lines_deleted,
                before_sha256=change.before_sha256,
                after_sha256=change.after_sha256,
                patches=[change.diff] if change.diff else [],
                sources=[change.source()],
                created=change.change_type == "CREATED",
            )
            continue
        found.created = found.created or change.change_type == "CREATED"
        found.change_type = combined_type(found.created, change.change_type)
        found.lines_added += change.lines_added
        found.lines_deleted += change.lines_deleted
        found.after_sha256 = change.after_sha256
        if change.diff:
            found.patches.append(change.diff)
        if change.source() not in found.sources:
            found.sources.append(change.source())
    return list(merged.values())
