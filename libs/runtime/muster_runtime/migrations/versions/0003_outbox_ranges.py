"""One outbox row per append: the range of event positions it covers.

Revision ID: 0003
Revises: 0002
"""

from alembic import op

revision = "0003"
down_revision = "0002"


def upgrade() -> None:
    op.execute("ALTER TABLE outbox ADD COLUMN event_last_position BIGINT")
    op.execute("UPDATE outbox SET event_last_position = event_position WHERE event_position IS NOT NULL")


def downgrade() -> None:
    op.execute("ALTER TABLE outbox DROP COLUMN event_last_position")
