"""File changes: content-addressed blobs (file contents and diffs, stored once) and the
`file_changes` projection of `FileChanged` events.

`blobs` is not a projection: events reference its rows by sha256, and they are written in
the transaction that records the event, so a rebuild of the projections keeps them.

Revision ID: 0004
Revises: 0003
"""

from muster_runtime.store.migrate import run_script

revision = "0004"
down_revision = "0003"

UPGRADE = """
CREATE TABLE blobs (
    sha256  TEXT PRIMARY KEY,
    content TEXT NOT NULL,
    size    INTEGER NOT NULL
);

CREATE TABLE file_changes (
    change_id     UUID PRIMARY KEY,
    session_id    UUID NOT NULL,
    message_id    UUID NOT NULL,
    message_seq   INTEGER NOT NULL,
    tool_call_id  TEXT NOT NULL,
    path          TEXT NOT NULL,
    change_type   TEXT NOT NULL,
    lines_added   INTEGER NOT NULL,
    lines_deleted INTEGER NOT NULL,
    diff_sha256   TEXT,
    before_sha256 TEXT,
    after_sha256  TEXT,
    before_size   BIGINT,
    after_size    BIGINT,
    session_type  TEXT NOT NULL,
    agent_type    TEXT NOT NULL,
    note          TEXT,
    position      BIGINT NOT NULL,
    created_at    TIMESTAMPTZ NOT NULL
);
CREATE INDEX file_changes_message ON file_changes (session_id, message_id);
CREATE INDEX file_changes_seq ON file_changes (session_id, message_seq)
"""

DOWNGRADE = """
DROP TABLE file_changes;
DROP TABLE blobs
"""


def upgrade() -> None:
    run_script(UPGRADE)


def downgrade() -> None:
    run_script(DOWNGRADE)
