"""File changes under a parent's turns: its own, and those of the subagents it delegated to.

Subagents share the workspace with their parent, so what a child writes is part of the
parent's result. Attribution is exact, never guessed from times: an execution's changes are
the child session's changes whose ASSISTANT message lies in the execution's message range
`(start_message_id, end_message_id]` (by seq; while running, or when an older run left no
end, up to the child's next run), and the execution is found through the parent's
`delegate` / `delegate_followup` tool call id. Only the executions of the tool calls of the
messages asked about are read. A child's own page shows only the child's own changes.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Sequence
from typing import Any
from uuid import UUID

from muster_runtime.process.db import Connection

from muster_gateway.file_change_merge import Change, Merged, merge

DELEGATION_TOOLS = frozenset({"delegate", "delegate_followup"})

_OWN = """
SELECT fc.*, b.content AS diff FROM file_changes fc
LEFT JOIN blobs b ON b.sha256 = fc.diff_sha256
WHERE fc.session_id = $1 AND fc.message_id = ANY($2::uuid[])
ORDER BY fc.position
"""

# An execution's range: after its start (the child's USER task message) up to and including
# its end message; with no end yet, up to the start of the child's next run (a follow-up).
_DELEGATED = """
SELECT e.execution_id, e.parent_tool_call_id, fc.*, b.content AS diff
FROM executions e
JOIN messages sm ON sm.message_id = e.start_message_id AND sm.session_id = e.child_session_id
LEFT JOIN messages em ON em.message_id = e.end_message_id AND em.session_id = e.child_session_id
LEFT JOIN LATERAL (
    SELECT m.seq FROM executions n
    JOIN messages m ON m.message_id = n.start_message_id AND m.session_id = n.child_session_id
    WHERE n.child_session_id = e.child_session_id AND n.round > e.round
    ORDER BY n.round LIMIT 1
) nx ON true
JOIN file_changes fc ON fc.session_id = e.child_session_id
    AND fc.message_seq > sm.seq
    AND fc.message_seq < coalesce(em.seq + 1, nx.seq, 2147483647)
LEFT JOIN blobs b ON b.sha256 = fc.diff_sha256
WHERE e.parent_session_id = $1 AND e.parent_tool_call_id = ANY($2::text[])
ORDER BY fc.position
"""


def delegation_calls(messages: Iterable[Any]) -> list[tuple[UUID, str]]:
    """(message id, tool call id) of every delegate / delegate_followup call of the
    ASSISTANT messages, in message then tool-call order."""
    return [
        (message["message_id"], call["id"])
        for message in messages
        if message["role"] == "ASSISTANT"
        for call in message["tool_calls"] or []
        if call.get("name") in DELEGATION_TOOLS
    ]


def change_from_row(row: Any, parent_tool_call_id: str | None = None) -> Change:
    return Change(
        change_id=row["change_id"],
        session_id=row["session_id"],
        message_id=row["message_id"],
        tool_call_id=row["tool_call_id"],
        path=row["path"],
        change_type=row["change_type"],
        lines_added=row["lines_added"],
        lines_deleted=row["lines_deleted"],
        diff=row["diff"],
        before_sha256=row["before_sha256"],
        after_sha256=row["after_sha256"],
        source_type="SUBAGENT" if row["session_type"] == "SUBAGENT" else "MAIN",
        agent_type=row["agent_type"],
        position=row["position"],
        note=row["note"],
        parent_tool_call_id=parent_tool_call_id,
        execution_id=row["execution_id"] if parent_tool_call_id is not None else None,
    )


async def changes_by_message(
    conn: Connection, session_id: UUID, messages: Sequence[Any]
) -> dict[UUID, list[Change]]:
    """For each ASSISTANT message of `messages`: the session's own changes, then for each
    of its delegation calls in order, that execution's changes in recording order."""
    assistants = [m for m in messages if m["role"] == "ASSISTANT"]
    found: dict[UUID, list[Change]] = {m["message_id"]: [] for m in assistants}
    if not assistants:
        return found
    for row in await conn.fetch(_OWN, session_id, list(found)):
        found[row["message_id"]].append(change_from_row(row))
    calls = delegation_calls(assistants)
    if calls:
        by_call: dict[str, list[Change]] = defaultdict(list)
        for row in await conn.fetch(_DELEGATED, session_id, [call_id for _, call_id in calls]):
            by_call[row["parent_tool_call_id"]].append(change_from_row(row, row["parent_tool_call_id"]))
        for message_id, call_id in calls:
            found[message_id].extend(by_call.get(call_id, ()))
    return found


async def turn_summary(conn: Connection, session_id: UUID, message_id: UUID) -> list[dict[str, Any]] | None:
    """The changes of the turn holding `message_id` (a USER message and everything up to
    the next one), merged by path; None when the message is not one of this session's."""
    seq = await conn.fetchval(
        "SELECT seq FROM messages WHERE session_id = $1 AND message_id = $2", session_id, message_id
    )
    if seq is None:
        return None
    start = await conn.fetchval(
        """SELECT coalesce(max(seq), 0) FROM messages
           WHERE session_id = $1 AND role = 'USER' AND seq <= $2""",
        session_id,
        seq,
    )
    rows = await conn.fetch(
        """SELECT message_id, role, tool_calls FROM messages
           WHERE session_id = $1 AND role = 'ASSISTANT' AND seq > $2
             AND seq < coalesce((SELECT min(seq) FROM messages
                                 WHERE session_id = $1 AND role = 'USER' AND seq > $2), 2147483647)
           ORDER BY seq""",
        session_id,
        start,
    )
    found = await changes_by_message(conn, session_id, rows)
    merged = merge(change for row in rows for change in found[row["message_id"]])
    return await _with_contents(conn, merged)


async def _with_contents(conn: Connection, merged: list[Merged]) -> list[dict[str, Any]]:
    digests = {d for m in merged for d in (m.before_sha256, m.after_sha256) if d is not None}
    contents: dict[str, str] = {}
    if digests:
        rows = await conn.fetch(
            "SELECT sha256, content FROM blobs WHERE sha256 = ANY($1::text[])", list(digests)
        )
        contents = {row["sha256"]: row["content"] for row in rows}
    return [
        m.api(
            before=contents.get(m.before_sha256) if m.before_sha256 else None,
            after=contents.get(m.after_sha256) if m.after_sha256 else None,
        )
        for m in merged
    ]
