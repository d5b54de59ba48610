"""Compaction: `compactions` holds each session's latest `CompactionRecorded` (its boundary
and summary), projected by `muster_project` like every other table, so the loop reads it
with the session's state in the same round trip and `muster rebuild` reproduces it.

`muster_project` is 0010's with the compaction upsert added (the newest compaction of each
session in the range wins: a later one covers the earlier), so the projector stays one
function (ADR 0013). A fork's copy of its source's compaction is an event of its own on
the side task's stream, so it needs nothing here.

The definition is the file `sql/versions/0011_muster_project.sql` (ADR 0031).

Revision ID: 0011
Revises: 0010
"""

from alembic import op
from muster_runtime.store.migrate import install

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


def upgrade() -> None:
    op.execute(TABLE)
    install("0011_muster_project.sql")


def downgrade() -> None:
    install("0010_muster_project.sql")
    op.execute("DROP TABLE compactions")
