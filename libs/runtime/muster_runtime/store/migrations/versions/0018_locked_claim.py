"""A harness's claim of a session under its lock, in one round trip (ADR 0025).

Starting a turn from a queued input recorded the command as processed, locked the session
(with its reads, migration 0015), took its lease and read its history (for the tool calls an
ended turn left open), each a statement of its own inside the transaction. `muster_claim_session`
does the four in that order: the record (a command applied before stops there), the lock
with its reads (each a statement of its own after the lock, so they see every decision that
committed before it), the lease (not for a subagent, whose runs are the workers'), and the
session's visible history, started tool calls and latest compaction once the lease is held.

The definition is the file `sql/versions/0018_muster_claim_session.sql` (ADR 0031).

Revision ID: 0018
Revises: 0017
"""

from alembic import op
from muster_runtime.store.migrate import install

revision = "0018"
down_revision = "0017"


def upgrade() -> None:
    install("0018_muster_claim_session.sql")


def downgrade() -> None:
    op.execute("DROP FUNCTION muster_claim_session(text, text, uuid, text, float8, text[])")
