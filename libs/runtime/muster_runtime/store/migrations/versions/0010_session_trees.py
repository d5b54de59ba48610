"""Side tasks and session management (issue 10): per-session settings, archive, delete,
read state and the tree signals' last value as `sessions` columns; forks copied by the
projector (ADR 0014); the tree status and the full-text index over USER messages.

New functions: `muster_copied_id` (a fork's copy of a message or file change has an id
derived from the side task and the original, so replaying the fork gives the same ids;
Python twin: `fork_ids.copied_id`), `muster_project_forks` (one fork at a time, in position
order: a fork of a fork copies rows the previous statement inserted),
`muster_project_manage` (the rare management events, one statement each in position
order; turn ends one statement per session) and `muster_tree_status` (the four tree
signals of each root over its side tasks at any depth and their subagents; the root's own
subagents are its turn, not its tree). `muster_project` is 0009's with the new
`SessionCreated` columns, the fork copies right after the inserts (a fork's source rows
may come from the same range), and the management events after the session rows.

The definitions are the files `sql/versions/0010_*.sql` (ADR 0031).

Revision ID: 0010
Revises: 0009
"""

from alembic import op
from muster_runtime.store.migrate import install, run_script

revision = "0010"
down_revision = "0009"

COLUMNS = """
ALTER TABLE sessions ADD COLUMN permission_level TEXT NOT NULL DEFAULT 'auto';
ALTER TABLE sessions ADD COLUMN execution_mode TEXT NOT NULL DEFAULT 'CLOUD';
ALTER TABLE sessions ADD COLUMN context_mode TEXT;
ALTER TABLE sessions ADD COLUMN background JSONB;
ALTER TABLE sessions ADD COLUMN workspace_id UUID;
ALTER TABLE sessions ADD COLUMN archived BOOLEAN NOT NULL DEFAULT false;
ALTER TABLE sessions ADD COLUMN deleted BOOLEAN NOT NULL DEFAULT false;
ALTER TABLE sessions ADD COLUMN turn_ended_position BIGINT;
ALTER TABLE sessions ADD COLUMN read_position BIGINT;
ALTER TABLE sessions ADD COLUMN tree_running BOOLEAN NOT NULL DEFAULT false;
ALTER TABLE sessions ADD COLUMN tree_unread BOOLEAN NOT NULL DEFAULT false;
ALTER TABLE sessions ADD COLUMN pending_approvals INTEGER NOT NULL DEFAULT 0;
ALTER TABLE sessions ADD COLUMN pending_questions INTEGER NOT NULL DEFAULT 0;
UPDATE sessions SET workspace_id = root_session_id;
-- What the projector below would have written for the events already there.
UPDATE sessions s SET turn_ended_position = (
    SELECT max(position) FROM events e
    WHERE e.stream_id = s.session_id::text AND e.type = 'SessionPhaseChanged'
      AND e.payload->>'phase' IN ('COMPLETED', 'FAILED'));
ALTER TABLE messages ADD COLUMN forked_from UUID;
-- Search covers the messages users typed, once: a fork's copies are left out (the original
-- is found), which also keeps a fork of thousands of messages from indexing them all again.
CREATE INDEX messages_user_text ON messages USING gin (to_tsvector('english', content))
    WHERE role = 'USER' AND forked_from IS NULL
"""

COLUMNS_DOWN = """
DROP INDEX messages_user_text;
ALTER TABLE messages DROP COLUMN forked_from;
ALTER TABLE sessions DROP COLUMN permission_level, DROP COLUMN execution_mode,
    DROP COLUMN context_mode, DROP COLUMN background, DROP COLUMN workspace_id,
    DROP COLUMN archived, DROP COLUMN deleted, DROP COLUMN turn_ended_position,
    DROP COLUMN read_position, DROP COLUMN tree_running, DROP COLUMN tree_unread,
    DROP COLUMN pending_approvals, DROP COLUMN pending_questions
"""


def upgrade() -> None:
    run_script(COLUMNS)
    install(
        "0010_muster_copied_id.sql",
        "0010_muster_project_forks.sql",
        "0010_muster_project_manage.sql",
        "0010_muster_tree_status.sql",
        "0010_muster_project.sql",
    )


def downgrade() -> None:
    install("0009_muster_project.sql")
    for statement in (
        "DROP FUNCTION muster_tree_status(uuid[])",
        "DROP FUNCTION muster_project_manage(muster_event[], text[])",
        "DROP FUNCTION muster_project_forks(muster_event[])",
        "DROP FUNCTION muster_copied_id(uuid, uuid)",
    ):
        op.execute(statement)
    run_script(COLUMNS_DOWN)
