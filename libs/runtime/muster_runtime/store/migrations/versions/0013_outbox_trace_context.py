"""Trace context kept with a command's outbox row: the W3C `traceparent` of the span that
enqueued it, so whichever process publishes the row (the writer after commit, or the relay
later, after a crash) sends it as the Kafka header and the consumer's span joins the trace.
An append's row needs none: its events carry the trace context in their metadata.

Revision ID: 0013
Revises: 0012
"""

from muster_runtime.store.migrate import run_script

revision = "0013"
down_revision = "0012"

UPGRADE = """
ALTER TABLE outbox ADD COLUMN trace_context TEXT;
"""

DOWNGRADE = """
ALTER TABLE outbox DROP COLUMN trace_context;
"""


def upgrade() -> None:
    run_script(UPGRADE)


def downgrade() -> None:
    run_script(DOWNGRADE)
