"""A root's tree signals on PostgreSQL: the ones recorded on its row and what
`muster_tree_status` (the set-based function `GET /v1/sessions` calls too) adds up now."""

from __future__ import annotations

from typing import Any
from uuid import UUID

from muster_runtime.process.db import Connection
from muster_runtime.uow.recovery_views import TreeSignals, TreeStatus

TREE_STATUS = """
SELECT s.session_id, s.version, s.tree_running, s.tree_unread, s.pending_approvals,
    s.pending_questions, t.tree_running AS now_running, t.tree_unread AS now_unread,
    t.pending_approvals AS now_approvals, t.pending_questions AS now_questions
FROM sessions s, muster_tree_status(ARRAY[s.session_id]) t
WHERE s.session_id = $1 AND s.root_session_id = s.session_id AND NOT s.deleted
"""


async def tree_status(conn: Connection, root_session_id: UUID) -> TreeStatus | None:
    row: Any = await conn.fetchrow(TREE_STATUS, root_session_id)
    if row is None:
        return None
    recorded = TreeSignals(
        row["tree_running"], row["tree_unread"], row["pending_approvals"], row["pending_questions"]
    )
    current = TreeSignals(row["now_running"], row["now_unread"], row["now_approvals"], row["now_questions"])
    return TreeStatus(row["session_id"], row["version"], recorded, current)
