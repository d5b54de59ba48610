"""The projector's changes to existing rows, one statement per table (ADR 0023).

0009 to 0012 changed existing rows one `UPDATE` per row, in loops over a query: a pass
that closed a turn ran its loop queries, an `UPDATE` per session, per execution and per
turn end, and each statement pays its executor start and end (relations and indexes
opened and locked) whatever it changes. Here each table gets one `UPDATE ... FROM` over
the same grouped rows, and a session's turn end is a column of its statistics' update
instead of a second update of the same row in `muster_project_manage`, which now runs only
for the rare management events. A pass's USER messages are known from its first read, so
a pass without one or a drop skips the queued inputs.

The projector functions plan once per connection (`force_generic_plan`), so their settings
also forbid hash and merge joins and sequential scans: every change stays a nested loop
over the primary key, whatever the tables' sizes when a connection planned it.

Revision ID: 0016
Revises: 0015
"""

from alembic import op
from muster_runtime.store.migrate import migration_module

revision = "0016"
down_revision = "0015"

GENERIC = "SET plan_cache_mode = force_generic_plan AS $$"
BY_KEY = (
    "SET plan_cache_mode = force_generic_plan\n"
    "-- Changes join their rows by primary key: a nested loop over the index, never a hash or\n"
    "-- merge join or a sequential scan that a small table at planning time would favour.\n"
    "SET enable_hashjoin = off SET enable_mergejoin = off SET enable_seqscan = off AS $$"
)
LOOP_VARIABLE = "    c record;\n"
USERS_VARIABLE = "    users boolean;\n"
FIRST_READ = "           array_agg(DISTINCT type)\n    INTO evs, present\n"
FIRST_READ_WITH_USERS = (
    "           array_agg(DISTINCT type),\n"
    "           coalesce(bool_or(type = 'MessageRecorded' AND payload->>'role' = 'USER'), false)\n"
    "    INTO evs, present, users\n"
)
CHANGES_START = "    -- Changes to existing rows: one statement per changed row"
FUNCTION_END = "END\n$$"

# The rows each loop of 0012 walked, spliced from its text (as every projector migration
# does), each now joined in one UPDATE; the session's query also gives its last turn end.
LOOP_END = "\n        LOOP\n            UPDATE {table} SET"
SESSION_VERSION = "                (array_agg(stream_version ORDER BY position DESC))[1] AS version,\n"
TURN_END = """                max(position) FILTER (WHERE type = 'SessionPhaseChanged'
                    AND p->>'phase' IN ('COMPLETED', 'FAILED')) AS ended,
"""


def grouped(previous: str, table: str) -> str:
    """The query whose rows a loop of `previous` updated `table` with, one row at a time."""
    end = LOOP_END.format(table=table)
    assert previous.count(end) == 1, f"0012's loop over {table} changed"
    head = previous[: previous.index(end)]
    return head[head.rindex("FOR c IN\n") + len("FOR c IN\n") :]


def changes(previous: str) -> str:
    inputs, discarded, executions, sessions = (
        grouped(previous, table) for table in ("session_inputs", "messages", "executions", "sessions")
    )
    assert sessions.count(SESSION_VERSION) == 1, "0012's session statistics changed"
    sessions = sessions.replace(SESSION_VERSION, TURN_END + SESSION_VERSION, 1)
    return f"""    -- Changes to existing rows: one UPDATE per table, joined by primary key, applied only
    -- to rows that existed when the change was recorded (their `position` is older). The
    -- last change wins a column.
    IF users OR 'QueuedMessagesDropped' = ANY (present) THEN
        -- A USER message consumes the queued input of its id; a drop drops it.
        UPDATE session_inputs i SET state = u.state
        FROM ({inputs}) u
        WHERE i.message_id = u.id AND i.position < u.at;
    END IF;
    IF 'MessagesDiscarded' = ANY (present) THEN
        UPDATE messages m SET discarded = true
        FROM ({discarded}) u
        WHERE m.message_id = u.id AND m.position < u.at;
    END IF;
    IF present && ARRAY['ExecutionFinished', 'ExecutionDelivered', 'ExecutionRecovering'] THEN
        UPDATE executions x SET
            status = CASE WHEN u.statuses IS NULL THEN x.status ELSE u.statuses[1] END,
            result = CASE WHEN u.fin IS NULL THEN x.result ELSE u.fin->>'result' END,
            error = CASE WHEN u.fin IS NULL THEN x.error ELSE u.fin->>'error' END,
            final_message_id = CASE WHEN u.fin IS NULL THEN x.final_message_id
                ELSE (u.fin->>'final_message_id')::uuid END,
            end_message_id = CASE WHEN u.fin IS NULL THEN x.end_message_id
                ELSE (u.fin->>'end_message_id')::uuid END,
            rounds = CASE WHEN u.fin IS NULL THEN x.rounds ELSE (u.fin->>'rounds')::int END,
            tool_calls = CASE WHEN u.fin IS NULL THEN x.tool_calls
                ELSE (u.fin->>'tool_calls')::int END,
            usage = CASE WHEN u.fin IS NULL THEN x.usage ELSE u.fin->'usage' END,
            ended_at = CASE WHEN u.fin IS NULL THEN x.ended_at ELSE u.fin_at END,
            delivery_status = CASE WHEN u.dlv IS NULL THEN x.delivery_status
                ELSE u.dlv->>'delivery_status' END,
            tool_message_id = CASE WHEN u.dlv IS NULL THEN x.tool_message_id
                ELSE (u.dlv->>'tool_message_id')::uuid END,
            recoveries = x.recoveries + u.recoveries,
            lease_expiries = x.lease_expiries + u.expiries,
            version = u.version
        FROM ({executions}) u
        WHERE x.execution_id = u.id;
    END IF;
    -- The session row: its stream's highest seq, last phase (with its error), resumes, last
    -- turn end, and the version and time of its last event that is not a creation or an
    -- execution's.
    IF NOT present <@ ARRAY['SessionCreated', 'ExecutionStarted', 'ExecutionFinished',
            'ExecutionDelivered', 'ExecutionRecovering'] THEN
        UPDATE sessions s SET
            message_count = greatest(s.message_count, coalesce(u.max_seq, 0)),
            phase = CASE WHEN u.phases IS NULL THEN s.phase ELSE u.phases[1] END,
            last_error = CASE WHEN u.phases IS NULL THEN s.last_error ELSE u.errors[1] END,
            recoveries = s.recoveries + u.resumes,
            turn_ended_position = coalesce(u.ended, s.turn_ended_position),
            version = u.version,
            updated_at = u.at
        FROM ({sessions}) u
        WHERE s.session_id = u.id;
    END IF;
    IF present && ARRAY['SessionSettingsChanged', 'SessionArchived', 'SessionUnarchived',
            'SessionDeleted', 'SessionPromoted', 'SessionRead', 'SessionTreeStatusChanged'] THEN
        PERFORM muster_project_manage(evs, present);
    END IF;
"""


# 0010's management projection without the turn ends (now in the session row's update) and
# without its early return (its caller now checks the same types).
TURN_ENDS_START = "    IF 'SessionPhaseChanged' = ANY (present) THEN\n"
MANAGEMENT_START = "    FOR c IN\n        SELECT stream_id::uuid AS id, type, p, position FROM unnest(evs)"


def project_function() -> str:
    """0012's range projector with the changes to existing rows set-based."""
    previous: str = migration_module("0012_session_waits.py").project_function()
    for part in (GENERIC, LOOP_VARIABLE, FIRST_READ, CHANGES_START):
        assert previous.count(part) == 1, f"0012's projector changed: {part!r}"
    head, _, _ = previous.partition(CHANGES_START)
    head = head.replace(GENERIC, BY_KEY, 1).replace(LOOP_VARIABLE, USERS_VARIABLE, 1)
    return head.replace(FIRST_READ, FIRST_READ_WITH_USERS, 1) + changes(previous) + FUNCTION_END


def manage_function() -> str:
    previous: str = migration_module("0010_session_trees.py").MANAGE
    assert previous.count(TURN_ENDS_START) == 1 and previous.count(MANAGEMENT_START) == 1
    head, _, rest = previous.partition(TURN_ENDS_START)
    _, _, tail = rest.partition(MANAGEMENT_START)
    return head.replace("CREATE FUNCTION", "CREATE OR REPLACE FUNCTION", 1) + MANAGEMENT_START + tail


def positions_function(range_function: str) -> str:
    return str(migration_module("0014_staged_writes.py").positions_variant(range_function))


def upgrade() -> None:
    op.execute(manage_function().strip())
    op.execute(project_function().strip())
    op.execute(positions_function(project_function()).strip())


def downgrade() -> None:
    previous: str = migration_module("0012_session_waits.py").project_function()
    manage: str = migration_module("0010_session_trees.py").MANAGE
    op.execute(manage.strip().replace("CREATE FUNCTION", "CREATE OR REPLACE FUNCTION", 1))
    op.execute(previous.strip())
    op.execute(positions_function(previous).strip())
