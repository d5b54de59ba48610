"""Waits (issue 11): `session_waits` holds every approval, question and LOCAL tool request
with its status, projected by `muster_project` like every other table (0011's function
with a call to `muster_project_waits` added), so the gateway answers them under the
session's lock, recovery counts them for the tree signals and `muster rebuild` reproduces
them. `muster_record` takes `p_ungated`, so a gated tool's start stays one round trip in an
`auto` CLOUD session. `muster_tree_status` now counts the pending approvals and questions of a tree (the
root, its subagents and every side task) and counts a session waiting for its LOCAL client
as running.

Revision ID: 0012
Revises: 0011
"""

from alembic import op
from muster_runtime.store.migrate import migration_module, run_script

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

# Requests insert a row; a resolution changes it only if it was recorded later (its
# position is greater), so a range applied at once equals its events applied one by one.
PROJECT_WAITS = r"""
CREATE FUNCTION muster_project_waits(evs muster_event[]) RETURNS void LANGUAGE sql AS $$
    INSERT INTO session_waits (wait_id, kind, session_id, user_id, tool_call_id, detail,
        status, position, created_at)
    SELECT coalesce(e.p->>'approval_id', e.p->>'question_id', e.p->>'request_id')::uuid,
        CASE e.type WHEN 'ApprovalRequested' THEN 'approval'
                    WHEN 'QuestionAsked' THEN 'question' ELSE 'tool' END,
        e.stream_id::uuid, s.user_id, e.p->>'tool_call_id', e.p, 'pending', e.position,
        e.recorded_at
    FROM unnest(evs) e JOIN sessions s ON s.session_id = e.stream_id::uuid
    WHERE e.type IN ('ApprovalRequested', 'QuestionAsked', 'ToolRequested')
    ORDER BY e.position
    ON CONFLICT (wait_id) DO NOTHING;
    UPDATE session_waits w SET
        status = CASE
            WHEN r.p->>'decision' = 'approve' THEN 'approved'
            WHEN r.p->>'decision' = 'deny' THEN 'denied'
            WHEN coalesce(r.p->>'decision', r.p->>'outcome') = 'dropped' THEN 'dropped'
            ELSE 'answered' END,
        reason = r.p->>'reason',
        resolved_at = r.recorded_at
    FROM (SELECT DISTINCT ON (id) id, p, position, recorded_at FROM (
              SELECT coalesce(p->>'approval_id', p->>'question_id', p->>'request_id')::uuid AS id,
                  p, position, recorded_at
              FROM unnest(evs)
              WHERE type IN ('ApprovalResolved', 'QuestionResolved', 'ToolRequestResolved')) x
          ORDER BY id, position DESC) r
    WHERE w.wait_id = r.id AND w.position < r.position;
$$"""

WAIT_TYPES = (
    "'ApprovalRequested', 'ApprovalResolved', 'QuestionAsked', 'QuestionResolved', "
    "'ToolRequested', 'ToolRequestResolved'"
)
WAITS_CALL = f"""    IF present && ARRAY[{WAIT_TYPES}] THEN
        PERFORM muster_project_waits(evs);
    END IF;
"""
ANCHOR = "    -- Changes to existing rows: one statement per changed row"

# 0010's function with what it selects replaced: the same tree, then the signals and the
# waits of each root. Every pending wait of the tree counts, the root's own and its
# subagents' included: each needs the user.
TREE_SELECT = "    SELECT r,\n"
SIGNALS_AND_WAITS = """,
    signals AS (
        SELECT r,
            coalesce(bool_or(s.phase IN ('RUNNING', 'RESUMING', 'CANCELLING', 'WAITING_CLIENT')),
                false) AS running,
            coalesce(bool_or(s.session_type <> 'SUBAGENT'
                AND s.turn_ended_position > coalesce(s.read_position, 0)), false) AS unread
        FROM unnest(p_roots) r
        LEFT JOIN tree t ON t.root = r
        LEFT JOIN sessions s ON s.session_id = t.session_id
        GROUP BY r),
    waits AS (
        SELECT s.root_session_id AS r,
            count(*) FILTER (WHERE w.kind = 'approval')::int AS approvals,
            count(*) FILTER (WHERE w.kind = 'question')::int AS questions
        FROM sessions s JOIN session_waits w ON w.session_id = s.session_id
        WHERE s.root_session_id = ANY (p_roots) AND NOT s.deleted
          AND w.status = 'pending' AND w.kind IN ('approval', 'question')
        GROUP BY s.root_session_id)
    SELECT g.r, g.running, g.unread, coalesce(w.approvals, 0), coalesce(w.questions, 0)
    FROM signals g LEFT JOIN waits w ON w.r = g.r
$$"""


def tree_status_function() -> str:
    earlier: str = migration_module("0010_session_trees.py").TREE_STATUS
    assert earlier.count(TREE_SELECT) == 1, "0010's muster_tree_status changed"
    head = earlier[: earlier.index(TREE_SELECT)].rstrip()
    return head.replace("CREATE FUNCTION", "CREATE OR REPLACE FUNCTION", 1) + SIGNALS_AND_WAITS


OLD_RECORD = """DROP FUNCTION muster_record(uuid, int, uuid[], text[], int[], jsonb[], jsonb, timestamptz,
    text, boolean, text[], text[])"""
# A gated tool's start in one round trip when nothing gates it: with `p_ungated`, a session
# that is not `auto` and CLOUD answers 'gated' and the loop decides under a lock instead.
GATE_CHECK = """    IF s.message_count <> p_expected_count THEN"""
GATE = """    IF p_ungated AND (s.permission_level <> 'auto' OR s.execution_mode <> 'CLOUD') THEN
        RETURN QUERY SELECT 'gated'::text, s.version, s.phase, NULL::bigint, NULL::bigint;
        RETURN;
    END IF;
"""


def record_function() -> str:
    previous: str = migration_module("0008_record_if_current.py").UPGRADE
    text = previous.replace(
        "p_claimed boolean, p_blob_digests text[], p_blob_contents text[]",
        "p_claimed boolean, p_blob_digests text[], p_blob_contents text[],\n"
        "    p_ungated boolean DEFAULT false",
        1,
    )
    assert text != previous and text.count(GATE_CHECK) == 1, "0008's muster_record changed"
    return text.replace(GATE_CHECK, GATE + GATE_CHECK, 1)


def project_function() -> str:
    """0011's `muster_project` with the waits' projection (later migrations extend this)."""
    previous: str = migration_module("0011_compactions.py").project_function()
    assert previous.count(ANCHOR) == 1, "anchor not found once in 0011's projector"
    return previous.replace(ANCHOR, WAITS_CALL + ANCHOR, 1)


def upgrade() -> None:
    run_script(TABLE)
    op.execute(PROJECT_WAITS.strip())
    op.execute(project_function().strip())
    op.execute(tree_status_function().strip())
    op.execute(OLD_RECORD)
    op.execute(record_function().strip())


def downgrade() -> None:
    op.execute(
        "DROP FUNCTION muster_record(uuid, int, uuid[], text[], int[], jsonb[], jsonb, timestamptz, "
        "text, boolean, text[], text[], boolean)"
    )
    op.execute(migration_module("0008_record_if_current.py").UPGRADE.strip())
    earlier: str = migration_module("0010_session_trees.py").TREE_STATUS
    op.execute(earlier.strip().replace("CREATE FUNCTION", "CREATE OR REPLACE FUNCTION", 1))
    op.execute(migration_module("0011_compactions.py").project_function().strip())
    op.execute("DROP FUNCTION muster_project_waits(muster_event[])")
    op.execute("DROP INDEX sessions_root")
    op.execute("DROP TABLE session_waits")
