"""One body for the projector: `muster_project_events(evs)` applies an array of events;
`muster_project` (a range of positions) and `muster_project_positions` (a set of them) only
read the events into it. Before, the two held the same 200-line body, each its own copy.

The definitions are the files `sql/versions/0020_*.sql` (ADR 0031).

Revision ID: 0020
Revises: 0019
"""

from muster_runtime.store.migrate import install, run_script

revision = "0020"
down_revision = "0019"


def upgrade() -> None:
    install("0020_muster_project_events.sql", "0020_muster_project.sql", "0020_muster_project_positions.sql")


def downgrade() -> None:
    install("0019_muster_project.sql", "0019_muster_project_positions.sql")
    run_script("DROP FUNCTION muster_project_events(muster_event[])")
