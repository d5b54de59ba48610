"""A session's lock and what a decision under it reads first, in one round trip.

A decision that locks a session row then reads, in statements of their own, the session's
oldest queued input, its open execution (as a child) and its open executions (as a
parent). `muster_lock_session` does all four: the lock first, then each read as a
statement of its own inside the function. A VOLATILE PL/pgSQL function takes a new
snapshot for every statement it runs, so the reads see every decision that committed
before the lock was granted, exactly as the separate statements did; a single statement
with the lock would read from the snapshot taken before it waited for the lock.

Revision ID: 0015
Revises: 0014
"""

from alembic import op

revision = "0015"
down_revision = "0014"

LOCK_SESSION = r"""
CREATE FUNCTION muster_lock_session(p_session uuid, p_open text[])
RETURNS TABLE (locked sessions, queued_id uuid, queued_content text, open_run executions,
               open_children executions[])
LANGUAGE plpgsql VOLATILE AS $$
BEGIN
    SELECT * INTO locked FROM sessions WHERE session_id = p_session FOR UPDATE;
    IF FOUND THEN
        SELECT i.message_id, i.content INTO queued_id, queued_content FROM session_inputs i
         WHERE i.session_id = p_session AND i.state = 'QUEUED' ORDER BY i.position LIMIT 1;
        SELECT * INTO open_run FROM executions e
         WHERE e.child_session_id = p_session AND e.status = ANY (p_open) ORDER BY e.round DESC LIMIT 1;
        open_children := ARRAY(
            SELECT e FROM executions e WHERE e.parent_session_id = p_session AND e.status = ANY (p_open)
             ORDER BY e.started_at);
    END IF;
    RETURN NEXT;
END
$$
"""


def upgrade() -> None:
    op.execute(LOCK_SESSION.strip())


def downgrade() -> None:
    op.execute("DROP FUNCTION muster_lock_session(uuid, text[])")
