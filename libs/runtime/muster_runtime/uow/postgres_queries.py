"""The PostgreSQL unit of work's longer queries, and how their rows become snapshots."""

from __future__ import annotations

from typing import Any
from uuid import UUID

from muster_runtime.uow.leases import TAKE_OVER
from muster_runtime.uow.unit_of_work import SessionSnapshot

# What a session `s` holds besides its row: its visible history, its started tool calls and
# its latest compaction.
STATE_READS = """
    (SELECT json_agg(json_build_object('message_id', m.message_id, 'seq', m.seq, 'role', m.role,
                'content', m.content, 'tool_calls', m.tool_calls, 'tool_call_id', m.tool_call_id,
                'usage', m.usage)
            ORDER BY m.seq)
     FROM messages m WHERE m.session_id = s.session_id AND NOT m.discarded) AS history,
    (SELECT array_agg(t.tool_call_id) FROM tool_runs t WHERE t.session_id = s.session_id) AS started,
    (SELECT row_to_json(c) FROM compactions c WHERE c.session_id = s.session_id) AS compaction"""

# One round trip: the session's row and the rest of its state.
LOAD_STATE = f"SELECT s.*, {STATE_READS}\nFROM sessions s WHERE s.session_id = $1"

# The session's row locked, then (each read after the lock, migration 0015) its oldest
# queued input, its open execution as a child and its open executions as a parent.
LOCK_SESSION = "SELECT * FROM muster_lock_session($1, $2::text[])"
# Several sessions in one round trip, locked one after another in the array's order (a
# child before its parent), each with its reads after its own lock.
LOCK_SESSIONS = """
SELECT l.* FROM unnest($1::uuid[]) WITH ORDINALITY AS s(id, n),
    LATERAL muster_lock_session(s.id, $2::text[]) AS l
ORDER BY s.n
"""

OPEN_EXECUTION_OF = """
SELECT * FROM executions WHERE child_session_id = $1 AND status = ANY($2::text[])
ORDER BY round DESC LIMIT 1
"""

UNDELIVERED = """
SELECT * FROM executions WHERE parent_session_id = $1 AND delivery_status = 'PENDING'
ORDER BY started_at
"""

# A worker's claims of `RunExecution`s in one statement (no BEGIN, no COMMIT), the items `n`
# (from 1) of the arrays $1-$5, each decided on its own: the message recorded as processed,
# and the execution's lease taken when the message is new and the execution open (a live
# lease of another owner is left alone); the execution row and its child's phase come back,
# and the child's whole state when the lease was taken (the claim writes nothing of the
# child's, so it is the state the run starts from; the subqueries run only then). One claim
# is the statement with one item; several made at the same moment share it (ADR 0027). One
# statement never takes a row twice: the caller sends distinct executions and messages.
CLAIM_EXECUTIONS = f"""
WITH item AS (
    SELECT * FROM unnest($1::text[], $2::text[], $3::uuid[], $4::text[], $5::float8[])
        WITH ORDINALITY AS i(consumer, message_id, execution_id, owner, ttl_s, n)),
first AS (
    INSERT INTO processed_messages (consumer, message_id)
    SELECT consumer, message_id FROM item ORDER BY n
    ON CONFLICT DO NOTHING RETURNING consumer, message_id),
lease AS (
    INSERT INTO leases (resource_id, owner, expires_at)
    SELECT i.execution_id::text, i.owner, now() + make_interval(secs => i.ttl_s) FROM item i
    WHERE EXISTS (SELECT 1 FROM first f WHERE (f.consumer, f.message_id) = (i.consumer, i.message_id))
      AND EXISTS (SELECT 1 FROM executions WHERE execution_id = i.execution_id AND status = ANY($6::text[]))
    ORDER BY i.execution_id
    {TAKE_OVER}
    RETURNING resource_id, owner),
claimed AS (
    SELECT i.n, i.execution_id,
        EXISTS (SELECT 1 FROM first f WHERE (f.consumer, f.message_id) = (i.consumer, i.message_id)) AS first,
        coalesce((SELECT l.owner FROM lease l WHERE l.resource_id = i.execution_id::text) = i.owner, false)
            AS leased
    FROM item i)
SELECT c.n AS claim_item, c.first AS claim_first, c.leased AS claim_leased,
    s.phase AS claim_child_phase, st.child AS claim_child, st.history AS claim_history,
    st.started AS claim_started, st.compaction AS claim_compaction, e.*
FROM claimed c
LEFT JOIN executions e ON e.execution_id = c.execution_id
LEFT JOIN sessions s ON s.session_id = e.child_session_id
LEFT JOIN LATERAL (SELECT s AS child, {STATE_READS}
                   WHERE c.leased AND s.session_id IS NOT NULL) st ON true
ORDER BY c.n
"""

# A harness's claim under the session's lock (migration 0018): the command recorded, the lock
# with its reads, the lease, and the session's state once the lease is held.
CLAIM_SESSION = "SELECT * FROM muster_claim_session($1, $2, $3, $4, $5, $6::text[])"

STORE_BLOBS = """
INSERT INTO blobs (sha256, content, size)
SELECT * FROM unnest($1::text[], $2::text[], $3::int[])
ON CONFLICT (sha256) DO NOTHING
"""


def claimed_state(row: dict[str, Any]) -> SessionSnapshot | None:
    """The child's state out of a `CLAIM_EXECUTIONS` row (its columns popped)."""
    child, history, started, compaction = (
        row.pop(f"claim_{name}") for name in ("child", "history", "started", "compaction")
    )
    if child is None:
        return None
    return snapshot({**dict(child), "history": history, "started": started, "compaction": compaction})


def snapshot(row: Any) -> SessionSnapshot | None:
    if row is None:
        return None
    fields = dict(row)
    history = fields.pop("history") or []
    started = fields.pop("started") or ()
    compaction = fields.pop("compaction")
    messages = [{**m, "message_id": UUID(m["message_id"])} for m in history]
    return SessionSnapshot(fields, messages, frozenset(started), compaction)
