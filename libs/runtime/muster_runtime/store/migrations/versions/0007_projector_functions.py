"""The inline projections as server-side functions: one round trip per append.

`muster_project(stream, first, last)` applies the events of positions first..last (of one
stream, or of every stream when `stream` is null) to the read models, in position order,
one event at a time (`muster_project_event`); each run of consecutive events of one
session stream updates the `sessions` row once (`muster_touch_session`). The live append
(`muster_append`: the events, their projections and their outbox row) and the rebuild
call the same function, so a rebuilt table can only differ from a live one if the log
differs (ADR 0012).

Projections read the stored payload: an event schema change must teach the projector its
new `schema_version` (the Python upcasters serve the readers of events, not the projector).

The definitions are the files `sql/versions/0007_*.sql` (ADR 0031).

Revision ID: 0007
Revises: 0006
"""

from muster_runtime.store.migrate import install, run_script

revision = "0007"
down_revision = "0006"

DOWNGRADE = """
DROP FUNCTION muster_append(text, int[], uuid[], text[], int[], jsonb[], jsonb, timestamptz, text, boolean);
DROP FUNCTION muster_project(text, bigint, bigint);
DROP FUNCTION muster_touch_session(text, int, boolean, text, text, int, boolean, int, timestamptz);
DROP FUNCTION muster_project_event(events);
"""


def upgrade() -> None:
    install(
        "0007_muster_project_event.sql",
        "0007_muster_project.sql",
        "0007_muster_touch_session.sql",
        "0007_muster_append.sql",
    )


def downgrade() -> None:
    run_script(DOWNGRADE)
