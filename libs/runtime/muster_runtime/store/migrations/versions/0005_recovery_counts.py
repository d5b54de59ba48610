"""Recovery counts on the projections: how often an execution was taken over (and how often
because its worker's lease expired), how often a session's turn was resumed. The gateway's
`/metrics` sums them, so the figures survive restarts and cover every recovery instance.

Revision ID: 0005
Revises: 0004
"""

from muster_runtime.store.migrate import run_script

revision = "0005"
down_revision = "0004"

UPGRADE = """
ALTER TABLE executions ADD COLUMN recoveries INTEGER NOT NULL DEFAULT 0;
ALTER TABLE executions ADD COLUMN lease_expiries INTEGER NOT NULL DEFAULT 0;
ALTER TABLE sessions ADD COLUMN recoveries INTEGER NOT NULL DEFAULT 0;
"""

DOWNGRADE = """
ALTER TABLE sessions DROP COLUMN recoveries;
ALTER TABLE executions DROP COLUMN lease_expiries;
ALTER TABLE executions DROP COLUMN recoveries;
"""


def upgrade() -> None:
    run_script(UPGRADE)


def downgrade() -> None:
    run_script(DOWNGRADE)
