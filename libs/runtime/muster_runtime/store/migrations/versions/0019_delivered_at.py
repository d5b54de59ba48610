"""When an execution's result was delivered to its parent (or suppressed): `delivered_at`.

`/executions` items carry `deliveredAt` (DESIGN §7). The projector sets it from the
`ExecutionDelivered` event's recorded time, as it sets `ended_at` from `ExecutionFinished`'s;
existing rows are filled from the same events, so `muster rebuild --check` stays equal.

The definitions are the files `sql/versions/0019_*.sql` (ADR 0031).

Revision ID: 0019
Revises: 0018
"""

from muster_runtime.store.migrate import install, run_script

revision = "0019"
down_revision = "0018"

UPGRADE = """
ALTER TABLE executions ADD COLUMN delivered_at TIMESTAMPTZ;
UPDATE executions x SET delivered_at = d.at
FROM (
    SELECT DISTINCT ON (stream_id) stream_id::uuid AS id, recorded_at AS at
    FROM events WHERE type = 'ExecutionDelivered' ORDER BY stream_id, position DESC) d
WHERE x.execution_id = d.id
"""

DOWNGRADE = """
ALTER TABLE executions DROP COLUMN delivered_at
"""


def upgrade() -> None:
    run_script(UPGRADE)
    install("0019_muster_project.sql", "0019_muster_project_positions.sql")


def downgrade() -> None:
    install("0016_muster_project.sql", "0016_muster_project_positions.sql")
    run_script(DOWNGRADE)
