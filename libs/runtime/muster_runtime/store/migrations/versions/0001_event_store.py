"""Event store, outbox, consumer tracking, leases and the session projections.

Revision ID: 0001
"""

from muster_runtime.store.migrate import run_script

revision = "0001"
down_revision = None

UPGRADE = """
CREATE TABLE events (
    position       BIGSERIAL PRIMARY KEY,
    stream_id      TEXT NOT NULL,
    stream_version INTEGER NOT NULL,
    event_id       UUID NOT NULL UNIQUE,
    type           TEXT NOT NULL,
    schema_version INTEGER NOT NULL,
    payload        JSONB NOT NULL,
    metadata       JSONB NOT NULL DEFAULT '{}'::jsonb,
    recorded_at    TIMESTAMPTZ NOT NULL,
    CONSTRAINT events_stream_version_key UNIQUE (stream_id, stream_version)
);

-- Outgoing messages written in the same transaction as the decision; the relay publishes
-- and deletes them. Event rows reference the event instead of copying its payload.
CREATE TABLE outbox (
    id             BIGSERIAL PRIMARY KEY,
    topic          TEXT NOT NULL,
    key            TEXT NOT NULL,
    event_position BIGINT,
    payload        JSONB,
    created_at     TIMESTAMPTZ NOT NULL DEFAULT now()
);

CREATE TABLE processed_messages (
    consumer     TEXT NOT NULL,
    message_id   TEXT NOT NULL,
    processed_at TIMESTAMPTZ NOT NULL DEFAULT now(),
    PRIMARY KEY (consumer, message_id)
);

CREATE TABLE leases (
    resource_id TEXT PRIMARY KEY,
    owner       TEXT NOT NULL,
    expires_at  TIMESTAMPTZ NOT NULL
);

CREATE TABLE sessions (
    session_id        UUID PRIMARY KEY,
    user_id           TEXT NOT NULL,
    session_type      TEXT NOT NULL,
    parent_session_id UUID,
    root_session_id   UUID NOT NULL,
    title             TEXT,
    agent_type        TEXT NOT NULL,
    model_id          TEXT,
    phase             TEXT,
    last_error        TEXT,
    message_count     INTEGER NOT NULL DEFAULT 0,
    version           INTEGER NOT NULL,
    created_at        TIMESTAMPTZ NOT NULL,
    updated_at        TIMESTAMPTZ NOT NULL
);
CREATE INDEX sessions_user_type ON sessions (user_id, session_type, created_at);
CREATE INDEX sessions_parent ON sessions (parent_session_id);
CREATE INDEX sessions_phase ON sessions (phase) WHERE phase IN ('RUNNING', 'RESUMING', 'CANCELLING');

CREATE TABLE messages (
    message_id   UUID PRIMARY KEY,
    session_id   UUID NOT NULL,
    seq          INTEGER NOT NULL,
    role         TEXT NOT NULL,
    content      TEXT NOT NULL,
    tool_calls   JSONB,
    tool_call_id TEXT,
    discarded    BOOLEAN NOT NULL DEFAULT false,
    position     BIGINT NOT NULL,
    created_at   TIMESTAMPTZ NOT NULL,
    CONSTRAINT messages_session_seq_key UNIQUE (session_id, seq)
);

CREATE TABLE session_inputs (
    message_id        UUID PRIMARY KEY,
    session_id        UUID NOT NULL,
    client_message_id TEXT,
    content           TEXT NOT NULL,
    state             TEXT NOT NULL,
    position          BIGINT NOT NULL,
    queued_at         TIMESTAMPTZ NOT NULL,
    CONSTRAINT session_inputs_client_key UNIQUE (session_id, client_message_id)
);
CREATE INDEX session_inputs_queued ON session_inputs (session_id, position) WHERE state = 'QUEUED';

CREATE TABLE tool_runs (
    session_id   UUID NOT NULL,
    tool_call_id TEXT NOT NULL,
    message_id   UUID NOT NULL,
    name         TEXT NOT NULL,
    started_at   TIMESTAMPTZ NOT NULL,
    PRIMARY KEY (session_id, tool_call_id)
);
"""

DOWNGRADE = """
DROP TABLE tool_runs, session_inputs, messages, sessions, leases, processed_messages,
    outbox, events;
"""


def upgrade() -> None:
    run_script(UPGRADE)


def downgrade() -> None:
    run_script(DOWNGRADE)
