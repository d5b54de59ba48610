"""A turn's close in one statement when nothing must be decided under its locks (ADR 0025).

A close used to be an explicit transaction of four round trips: `BEGIN`, the session's lock
(a child's with its parent's) and their reads, the staged write, `COMMIT`; the parent's row
stayed locked while the worker's event loop got round to the last two. Most closes decide
nothing under those locks: the session still runs with the messages the caller saw, no
input waits in its queue, and for a child, its run is still the open execution the worker
claimed and a sibling is still open (this is not the round's last). `muster_close_quietly`
checks exactly that under the same locks, in the same order (the child, then its parent),
each read a statement of its own after its lock (a VOLATILE function takes a new snapshot
per statement, as in migration 0015), and then writes the caller's events with
`muster_append_all`: the session's after its locked version, the run's `ExecutionFinished`
after the version the worker claimed, the parent's notice after the parent's locked
version. When a check fails it writes nothing and says which one; the caller then makes the
decision the long way, under the locks, as before.

The definition is the file `sql/versions/0017_muster_close_quietly.sql` (ADR 0031).

Revision ID: 0017
Revises: 0016
"""

from alembic import op
from muster_runtime.store.migrate import install

revision = "0017"
down_revision = "0016"

DOWNGRADE = """
DROP FUNCTION muster_close_quietly(uuid, int, text[], uuid, int, uuid, int[], text[], uuid[],
    text[], int[], jsonb[], jsonb[], timestamptz[], text, boolean)
"""



def upgrade() -> None:
    install("0017_muster_close_quietly.sql")


def downgrade() -> None:
    op.execute(DOWNGRADE.strip())
