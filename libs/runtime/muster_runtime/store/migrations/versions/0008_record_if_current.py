"""The loop's most frequent decision in one round trip and one implicit transaction:
lock the session, check that it still runs and that nobody recorded a message since the
caller looked, store the blobs the events reference, append (`muster_append`).

The definition is the file `sql/versions/0008_muster_record.sql` (ADR 0031).

Revision ID: 0008
Revises: 0007
"""

from alembic import op
from muster_runtime.store.migrate import install

revision = "0008"
down_revision = "0007"

DOWNGRADE = """
DROP FUNCTION muster_record(uuid, int, uuid[], text[], int[], jsonb[], jsonb, timestamptz, text,
    boolean, text[], text[])
"""


def upgrade() -> None:
    install("0008_muster_record.sql")


def downgrade() -> None:
    op.execute(DOWNGRADE.strip())
