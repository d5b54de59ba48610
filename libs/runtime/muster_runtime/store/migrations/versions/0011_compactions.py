"""Compaction: `compactions` holds each session's latest `CompactionRecorded` (its boundary
and summary), projected by `muster_project` like every other table, so the loop reads it
with the session's state in the same round trip and `muster rebuild` reproduces it.

The function text is 0010's with the compaction upsert added, so the projector stays one
function (ADR 0013). A fork's copy of its source's compaction is an event of its own on
the side task's stream, so it needs nothing here.

Revision ID: 0011
Revises: 0010
"""

from alembic import op
from muster_runtime.store.migrate import migration_module

revision = "0011"
down_revision = "0010"

TABLE = """
CREATE TABLE compactions (
    session_id uuid PRIMARY KEY,
    boundary_message_id uuid NOT NULL,
    boundary_seq int NOT NULL,
    summary text NOT NULL,
    messages_compacted int NOT NULL,
    tokens_before int NOT NULL,
    tokens_after int NOT NULL,
    at_seq int NOT NULL,
    position bigint NOT NULL,
    created_at timestamptz NOT NULL
)"""

# The newest compaction of each session in the range wins (a later one covers the earlier).
UPSERT = """
    IF 'CompactionRecorded' = ANY (present) THEN
        INSERT INTO compactions (session_id, boundary_message_id, boundary_seq, summary,
            messages_compacted, tokens_before, tokens_after, at_seq, position, created_at)
        SELECT DISTINCT ON (stream_id) stream_id::uuid, (p->>'boundary_message_id')::uuid,
            (p->>'boundary_seq')::int, p->>'summary', (p->>'messages_compacted')::int,
            (p->>'tokens_before')::int, (p->>'tokens_after')::int, (p->>'at_seq')::int,
            position, recorded_at
        FROM unnest(evs) WHERE type = 'CompactionRecorded' ORDER BY stream_id, position DESC
        ON CONFLICT (session_id) DO UPDATE SET
            boundary_message_id = EXCLUDED.boundary_message_id,
            boundary_seq = EXCLUDED.boundary_seq, summary = EXCLUDED.summary,
            messages_compacted = EXCLUDED.messages_compacted,
            tokens_before = EXCLUDED.tokens_before, tokens_after = EXCLUDED.tokens_after,
            at_seq = EXCLUDED.at_seq, position = EXCLUDED.position,
            created_at = EXCLUDED.created_at
        WHERE compactions.position < EXCLUDED.position;
    END IF;
"""
ANCHOR = "    -- Changes to existing rows: one statement per changed row"


def project_function() -> str:
    """0010's `muster_project` with the compaction upsert (later migrations extend this)."""
    previous: str = migration_module("0010_session_trees.py").project_text()
    assert previous.count(ANCHOR) == 1, "anchor not found once in 0010's projector"
    return previous.replace(ANCHOR, UPSERT + ANCHOR, 1)


def upgrade() -> None:
    op.execute(TABLE)
    op.execute(project_function().strip())


def downgrade() -> None:
    op.execute(migration_module("0010_session_trees.py").project_text().strip())
    op.execute("DROP TABLE compactions")
