"""A session's lock and what a decision under it reads first, in one round trip.

A decision that locks a session row then reads, in statements of their own, the session's
oldest queued input, its open execution (as a child) and its open executions (as a
parent). `muster_lock_session` does all four: the lock first, then each read as a
statement of its own inside the function. A VOLATILE PL/pgSQL function takes a new
snapshot for every statement it runs, so the reads see every decision that committed
before the lock was granted, exactly as the separate statements did; a single statement
with the lock would read from the snapshot taken before it waited for the lock.

The definition is the file `sql/versions/0015_muster_lock_session.sql` (ADR 0031).

Revision ID: 0015
Revises: 0014
"""

from alembic import op
from muster_runtime.store.migrate import install

revision = "0015"
down_revision = "0014"


def upgrade() -> None:
    install("0015_muster_lock_session.sql")


def downgrade() -> None:
    op.execute("DROP FUNCTION muster_lock_session(uuid, text[])")
