"""Outbox rows claimed by the process that wrote them: it publishes them itself right after
commit, so the relay leaves a claimed row alone until it is older than the relay's grace
period (the writer died or could not publish). Unclaimed rows are the relay's at once.

Revision ID: 0006
Revises: 0005
"""

from muster_runtime.store.migrate import run_script

revision = "0006"
down_revision = "0005"

UPGRADE = """
ALTER TABLE outbox ADD COLUMN claimed BOOLEAN NOT NULL DEFAULT false;
"""

DOWNGRADE = """
ALTER TABLE outbox DROP COLUMN claimed;
"""


def upgrade() -> None:
    run_script(UPGRADE)


def downgrade() -> None:
    run_script(DOWNGRADE)
