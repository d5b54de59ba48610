"""The projector's changes to existing rows, one statement per table (ADR 0023).

0009 to 0012 changed existing rows one `UPDATE` per row, in loops over a query: a pass
that closed a turn ran its loop queries, an `UPDATE` per session, per execution and per
turn end, and each statement pays its executor start and end (relations and indexes
opened and locked) whatever it changes. Here each table gets one `UPDATE ... FROM` over
the same grouped rows, and a session's turn end is a column of its statistics' update
instead of a second update of the same row in `muster_project_manage`, which now runs only
for the rare management events (and without its early return: its caller checks the same
types). A pass's USER messages are known from its first read, so
a pass without one or a drop skips the queued inputs.

The projector functions plan once per connection (`force_generic_plan`), so their settings
also forbid hash and merge joins and sequential scans: every change stays a nested loop
over the primary key, whatever the tables' sizes when a connection planned it.

`muster_project_positions` is the same projector over a set of positions (migration 0014).
The definitions are the files `sql/versions/0016_*.sql` (ADR 0031).

Revision ID: 0016
Revises: 0015
"""

from muster_runtime.store.migrate import install

revision = "0016"
down_revision = "0015"


def upgrade() -> None:
    install(
        "0016_muster_project_manage.sql",
        "0016_muster_project.sql",
        "0016_muster_project_positions.sql",
    )


def downgrade() -> None:
    install(
        "0010_muster_project_manage.sql",
        "0012_muster_project.sql",
        "0014_muster_project_positions.sql",
    )
