"""Waits (issue 11): `session_waits` holds every approval, question and LOCAL tool request
with its status, projected by `muster_project` like every other table (0011's function
with a call to `muster_project_waits` added: requests insert a row; a resolution changes it
only if it was recorded later, so a range applied at once equals its events applied one
by one), so the gateway answers them under the session's lock, recovery counts them for
the tree signals and `muster rebuild` reproduces them. `muster_record` takes `p_ungated`,
so a gated tool's start stays one round trip in an `auto` CLOUD session (otherwise it
answers 'gated' and the loop decides under a lock). `muster_tree_status` now counts the
pending approvals and questions of a tree (the root, its subagents and every side task)
and counts a session waiting for its LOCAL client as running.

The definitions are the files `sql/versions/0012_*.sql` (ADR 0031).

Revision ID: 0012
Revises: 0011
"""

from alembic import op
from muster_runtime.store.migrate import install, run_script

revision = "0012"
down_revision = "0011"

TABLE = """
CREATE TABLE session_waits (
    wait_id uuid PRIMARY KEY,
    kind text NOT NULL,  -- approval | question | tool
    session_id uuid NOT NULL,
    user_id text NOT NULL,
    tool_call_id text NOT NULL,
    detail jsonb NOT NULL,
    status text NOT NULL,  -- pending | approved | denied | answered | dropped
    reason text,
    position bigint NOT NULL,
    created_at timestamptz NOT NULL,
    resolved_at timestamptz
);
CREATE INDEX session_waits_call ON session_waits (session_id, tool_call_id);
CREATE INDEX session_waits_pending ON session_waits (user_id, kind) WHERE status = 'pending';
-- The tree signals count a tree's pending waits from its sessions (muster_tree_status).
CREATE INDEX sessions_root ON sessions (root_session_id)
"""

OLD_RECORD = """DROP FUNCTION muster_record(uuid, int, uuid[], text[], int[], jsonb[], jsonb, timestamptz,
    text, boolean, text[], text[])"""


def upgrade() -> None:
    run_script(TABLE)
    install("0012_muster_project_waits.sql", "0012_muster_project.sql", "0012_muster_tree_status.sql")
    op.execute(OLD_RECORD)
    install("0012_muster_record.sql")


def downgrade() -> None:
    op.execute(
        "DROP FUNCTION muster_record(uuid, int, uuid[], text[], int[], jsonb[], jsonb, timestamptz, "
        "text, boolean, text[], text[], boolean)"
    )
    install("0008_muster_record.sql", "0010_muster_tree_status.sql", "0011_muster_project.sql")
    op.execute("DROP FUNCTION muster_project_waits(muster_event[])")
    op.execute("DROP INDEX sessions_root")
    op.execute("DROP TABLE session_waits")
