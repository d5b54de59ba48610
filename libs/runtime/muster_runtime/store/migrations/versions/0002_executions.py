"""Executions (subagent runs) and per-message model usage.

Revision ID: 0002
Revises: 0001
"""

from muster_runtime.store.migrate import run_script

revision = "0002"
down_revision = "0001"

UPGRADE = """
ALTER TABLE messages ADD COLUMN usage JSONB;

CREATE TABLE executions (
    execution_id        UUID PRIMARY KEY,
    parent_session_id   UUID NOT NULL,
    parent_tool_call_id TEXT,
    parent_message_id   UUID,
    child_session_id    UUID NOT NULL,
    user_id             TEXT NOT NULL,
    agent_type          TEXT NOT NULL,
    invocation_type     TEXT NOT NULL,
    task                TEXT NOT NULL,
    round               INTEGER NOT NULL,
    status              TEXT NOT NULL,
    delivery_status     TEXT NOT NULL,
    result              TEXT,
    error               TEXT,
    start_message_id    UUID,
    end_message_id      UUID,
    final_message_id    UUID,
    tool_message_id     UUID,
    rounds              INTEGER NOT NULL DEFAULT 0,
    tool_calls          INTEGER NOT NULL DEFAULT 0,
    usage               JSONB NOT NULL DEFAULT '{}'::jsonb,
    started_at          TIMESTAMPTZ NOT NULL,
    ended_at            TIMESTAMPTZ,
    deadline_at         TIMESTAMPTZ NOT NULL,
    version             INTEGER NOT NULL,
    CONSTRAINT executions_parent_call_key UNIQUE (parent_session_id, parent_tool_call_id)
);
CREATE INDEX executions_child ON executions (child_session_id, round);
CREATE INDEX executions_open ON executions (status) WHERE status IN ('RUNNING', 'RECOVERING');
CREATE INDEX executions_undelivered ON executions (parent_session_id)
    WHERE delivery_status = 'PENDING'
"""

DOWNGRADE = """
DROP TABLE executions;
ALTER TABLE messages DROP COLUMN usage
"""


def upgrade() -> None:
    run_script(UPGRADE)


def downgrade() -> None:
    run_script(DOWNGRADE)
