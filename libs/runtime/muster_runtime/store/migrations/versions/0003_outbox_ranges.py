"""One outbox row per append (the range of event positions it covers); an index for it.

Revision ID: 0003
Revises: 0002
"""

from alembic import op

revision = "0003"
down_revision = "0002"


def upgrade() -> None:
    op.execute("ALTER TABLE outbox ADD COLUMN event_last_position BIGINT")
    op.execute("UPDATE outbox SET event_last_position = event_position WHERE event_position IS NOT NULL")
    # Serves the relay's range join and subscriptions replaying a stream by position.
    op.execute("CREATE INDEX events_stream_position ON events (stream_id, position)")


def downgrade() -> None:
    op.execute("DROP INDEX events_stream_position")
    op.execute("ALTER TABLE outbox DROP COLUMN event_last_position")
