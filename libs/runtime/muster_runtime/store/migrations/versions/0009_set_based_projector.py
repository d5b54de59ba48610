"""The inline projections, set-based: `muster_project(stream, first, last)` reads the
range once and applies it with one INSERT … SELECT per table, then one UPDATE per changed
row (by primary key), instead of one or two statements per event. Live appends
(`muster_append`, `muster_record`) and the rebuild still call this one function (ADR 0013).

The rows equal those of applying the events one by one in position order, wherever the
range is cut: rows are inserted first (in position order); a change applies only to rows
that existed when it was recorded (their `position` is older); the last change wins a
column and counters add up; a session row takes its stream's highest seq, last phase and
resumes, and the version and time of its last event that is not a creation or an
execution's. A row's creating event comes first in its stream (`SessionCreated`,
`ExecutionStarted` at version 1), as every writer appends them.

The definitions are the files `sql/versions/0009_*.sql` (ADR 0031).

Revision ID: 0009
Revises: 0008
"""

from alembic import op
from muster_runtime.store.migrate import install

revision = "0009"
down_revision = "0008"

# The per-event helpers of 0007, which only the old `muster_project` called.
OLD_HELPERS = (
    "DROP FUNCTION muster_project_event(events)",
    "DROP FUNCTION muster_touch_session(text, int, boolean, text, text, int, boolean, int, timestamptz)",
)


def upgrade() -> None:
    # `muster_event`: the fields of an event a projection reads.
    install("0009_muster_event.sql", "0009_muster_project.sql")
    for statement in OLD_HELPERS:
        op.execute(statement)


def downgrade() -> None:
    """Back to 0007's per-event functions."""
    install("0007_muster_project_event.sql", "0007_muster_project.sql", "0007_muster_touch_session.sql")
    op.execute("DROP TYPE muster_event")
