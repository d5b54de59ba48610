"""A decision's writes in one round trip: every append whose version the caller knows and
every command, staged by the unit of work and written together before its next read or at
commit (ADR 0021).

`muster_append_all` inserts the events of several appends (any streams), one outbox row per
append and one per command, and projects all the new events in one pass of the set-based
projector (`muster_project_positions`: 0012's `muster_project` over a set of positions
instead of one stream's range), rather than one `muster_append` and one projector pass per
append. A taken version fails on `events_stream_version_key` before anything is written.

The definitions are the files `sql/versions/0014_*.sql` (ADR 0031).

Revision ID: 0014
Revises: 0013
"""

from muster_runtime.store.migrate import install, run_script

revision = "0014"
down_revision = "0013"

DOWNGRADE = """
DROP FUNCTION muster_append_all(int[], text[], int[], uuid[], text[], int[], jsonb[], jsonb[],
    timestamptz[], text, boolean, text[], text[], jsonb[], text[]);
DROP FUNCTION muster_project_positions(bigint[]);
"""



def upgrade() -> None:
    install("0014_muster_project_positions.sql", "0014_muster_append_all.sql")


def downgrade() -> None:
    run_script(DOWNGRADE)
