"""The inline projections as server-side functions: one round trip per append.

`muster_project(stream, first, last)` applies the events of positions first..last (of one
stream, or of every stream when `stream` is null) to the read models, in position order.
The live append (`muster_append`) and the rebuild call the same function, so a rebuilt
table can only differ from a live one if the log differs (ADR 0012). Each run of
consecutive events of one session stream updates the `sessions` row once.

Projections read the stored payload: an event schema change must teach this function its
new `schema_version` (the Python upcasters serve the readers of events, not the projector).

Revision ID: 0007
Revises: 0006
"""

from alembic import op

revision = "0007"
down_revision = "0006"

UPGRADE = r"""
CREATE FUNCTION muster_project_event(e events) RETURNS void LANGUAGE plpgsql AS $$
DECLARE
    p jsonb := e.payload;
BEGIN
    CASE e.type
    WHEN 'SessionCreated' THEN
        INSERT INTO sessions (session_id, user_id, session_type, parent_session_id,
            root_session_id, title, agent_type, model_id, version, created_at, updated_at)
        VALUES ((p->>'session_id')::uuid, p->>'user_id', p->>'session_type',
            (p->>'parent_session_id')::uuid, (p->>'root_session_id')::uuid, p->>'title',
            p->>'agent_type', p->>'model_id', e.stream_version, e.recorded_at, e.recorded_at);
    WHEN 'UserMessageQueued' THEN
        INSERT INTO session_inputs (message_id, session_id, client_message_id, content, state,
            position, queued_at)
        VALUES ((p->>'message_id')::uuid, e.stream_id::uuid, p->>'client_message_id',
            p->>'content', 'QUEUED', e.position, e.recorded_at);
    WHEN 'QueuedMessagesDropped' THEN
        UPDATE session_inputs SET state = 'DROPPED'
        WHERE message_id IN (SELECT x::uuid FROM jsonb_array_elements_text(p->'message_ids') x);
    WHEN 'MessageRecorded' THEN
        INSERT INTO messages (message_id, session_id, seq, role, content, tool_calls,
            tool_call_id, usage, position, created_at)
        VALUES ((p->>'message_id')::uuid, e.stream_id::uuid, (p->>'seq')::int, p->>'role',
            p->>'content',
            CASE WHEN jsonb_typeof(p->'tool_calls') = 'array'
                  AND jsonb_array_length(p->'tool_calls') > 0 THEN p->'tool_calls' END,
            p->>'tool_call_id',
            CASE WHEN jsonb_typeof(p->'usage') = 'object' THEN p->'usage' END,
            e.position, e.recorded_at);
        IF p->>'role' = 'USER' THEN
            -- A queued input becomes this USER message: same id, so the entry is consumed.
            UPDATE session_inputs SET state = 'CONSUMED' WHERE message_id = (p->>'message_id')::uuid;
        END IF;
    WHEN 'MessagesDiscarded' THEN
        UPDATE messages SET discarded = true
        WHERE message_id IN (SELECT x::uuid FROM jsonb_array_elements_text(p->'message_ids') x);
    WHEN 'ToolCallStarted' THEN
        INSERT INTO tool_runs (session_id, tool_call_id, message_id, name, started_at)
        VALUES (e.stream_id::uuid, p->>'tool_call_id', (p->>'message_id')::uuid, p->>'name',
            e.recorded_at);
    WHEN 'FileChanged' THEN
        INSERT INTO file_changes (change_id, session_id, message_id, message_seq, tool_call_id,
            path, change_type, lines_added, lines_deleted, diff_sha256, before_sha256,
            after_sha256, before_size, after_size, session_type, agent_type, note, position,
            created_at)
        VALUES ((p->>'change_id')::uuid, e.stream_id::uuid, (p->>'message_id')::uuid,
            (p->>'message_seq')::int, p->>'tool_call_id', p->>'path', p->>'change_type',
            (p->>'lines_added')::int, (p->>'lines_deleted')::int, p->>'diff_sha256',
            p->>'before_sha256', p->>'after_sha256', (p->>'before_size')::bigint,
            (p->>'after_size')::bigint, p->>'session_type', p->>'agent_type', p->>'note',
            e.position, e.recorded_at);
    WHEN 'ExecutionStarted' THEN
        INSERT INTO executions (execution_id, parent_session_id, parent_tool_call_id,
            parent_message_id, child_session_id, user_id, agent_type, invocation_type, task,
            round, status, delivery_status, start_message_id, started_at, deadline_at, version)
        VALUES ((p->>'execution_id')::uuid, (p->>'parent_session_id')::uuid,
            p->>'parent_tool_call_id', (p->>'parent_message_id')::uuid,
            (p->>'child_session_id')::uuid, p->>'user_id', p->>'agent_type',
            p->>'invocation_type', p->>'task', (p->>'round')::int, 'RUNNING', 'PENDING',
            (p->>'start_message_id')::uuid, e.recorded_at, (p->>'deadline_at')::timestamptz,
            e.stream_version);
    WHEN 'ExecutionFinished' THEN
        UPDATE executions SET status = p->>'status', result = p->>'result', error = p->>'error',
            final_message_id = (p->>'final_message_id')::uuid,
            end_message_id = (p->>'end_message_id')::uuid, rounds = (p->>'rounds')::int,
            tool_calls = (p->>'tool_calls')::int, usage = p->'usage', ended_at = e.recorded_at,
            version = e.stream_version
        WHERE execution_id = e.stream_id::uuid;
    WHEN 'ExecutionDelivered' THEN
        UPDATE executions SET delivery_status = p->>'delivery_status',
            tool_message_id = (p->>'tool_message_id')::uuid, version = e.stream_version
        WHERE execution_id = e.stream_id::uuid;
    WHEN 'ExecutionRecovering' THEN
        UPDATE executions SET status = 'RECOVERING', recoveries = recoveries + 1,
            lease_expiries = lease_expiries + (p->>'reason' = 'lease_expired')::int,
            version = e.stream_version
        WHERE execution_id = e.stream_id::uuid;
    ELSE
        NULL;  -- notices for clients (SubagentSessionCreated, …) have no table of their own
    END CASE;
END
$$;

-- The session row's share of a run of one stream's events, written once: highest message
-- seq, last phase (with its error), resumes, and the version and time of the last event
-- that is not a creation or an execution's.
CREATE FUNCTION muster_project(p_stream text, p_first bigint, p_last bigint)
RETURNS void LANGUAGE plpgsql AS $$
DECLARE
    e events;
    run_stream text;
    max_seq int;
    phase_set boolean;
    new_phase text;
    new_error text;
    resumes int;
    touched boolean;
    new_version int;
    new_time timestamptz;
BEGIN
    FOR e IN
        SELECT * FROM events
        WHERE position BETWEEN p_first AND p_last AND (p_stream IS NULL OR stream_id = p_stream)
        ORDER BY position
    LOOP
        IF run_stream IS DISTINCT FROM e.stream_id THEN
            IF run_stream IS NOT NULL AND (max_seq IS NOT NULL OR phase_set OR touched) THEN
                PERFORM muster_touch_session(run_stream, max_seq, phase_set, new_phase, new_error,
                    resumes, touched, new_version, new_time);
            END IF;
            run_stream := e.stream_id;
            max_seq := NULL; phase_set := false; new_phase := NULL; new_error := NULL;
            resumes := 0; touched := false;
        END IF;
        PERFORM muster_project_event(e);
        IF e.type = 'MessageRecorded' THEN
            max_seq := greatest(max_seq, (e.payload->>'seq')::int);
        ELSIF e.type = 'SessionPhaseChanged' THEN
            phase_set := true;
            new_phase := e.payload->>'phase';
            new_error := e.payload->>'error';
            resumes := resumes + (new_phase = 'RESUMING')::int;
        END IF;
        IF e.type NOT IN ('SessionCreated', 'ExecutionStarted', 'ExecutionFinished',
                          'ExecutionDelivered', 'ExecutionRecovering') THEN
            touched := true;
            new_version := e.stream_version;
            new_time := e.recorded_at;
        END IF;
    END LOOP;
    IF run_stream IS NOT NULL AND (max_seq IS NOT NULL OR phase_set OR touched) THEN
        PERFORM muster_touch_session(run_stream, max_seq, phase_set, new_phase, new_error,
            resumes, touched, new_version, new_time);
    END IF;
END
$$;

CREATE FUNCTION muster_touch_session(
    p_stream text, p_max_seq int, p_phase_set boolean, p_phase text, p_error text,
    p_resumes int, p_touched boolean, p_version int, p_time timestamptz
) RETURNS void LANGUAGE sql AS $$
    UPDATE sessions SET
        message_count = greatest(message_count, coalesce(p_max_seq, 0)),
        phase = CASE WHEN p_phase_set THEN p_phase ELSE phase END,
        last_error = CASE WHEN p_phase_set THEN p_error ELSE last_error END,
        recoveries = recoveries + p_resumes,
        version = CASE WHEN p_touched THEN p_version ELSE version END,
        updated_at = CASE WHEN p_touched THEN p_time ELSE updated_at END
    WHERE session_id = p_stream::uuid
$$;

-- One append in one round trip: the events, their projections and their outbox row. A
-- taken version fails on events_stream_version_key before anything else is written.
CREATE FUNCTION muster_append(
    p_stream text, p_versions int[], p_ids uuid[], p_types text[], p_schema_versions int[],
    p_payloads jsonb[], p_metadata jsonb, p_recorded_at timestamptz, p_topic text,
    p_claimed boolean
) RETURNS TABLE (event_position bigint, outbox_id bigint) LANGUAGE plpgsql AS $$
DECLARE
    positions bigint[];
    queued bigint;
BEGIN
    WITH appended AS (
        INSERT INTO events (stream_id, stream_version, event_id, type, schema_version, payload,
            metadata, recorded_at)
        SELECT p_stream, v, id, t, sv, p, p_metadata, p_recorded_at
        FROM unnest(p_versions, p_ids, p_types, p_schema_versions, p_payloads) AS x(v, id, t, sv, p)
        RETURNING position)
    SELECT array_agg(position ORDER BY position) INTO positions FROM appended;
    INSERT INTO outbox (topic, key, event_position, event_last_position, claimed)
    VALUES (p_topic, p_stream, positions[1], positions[cardinality(positions)], p_claimed)
    RETURNING id INTO queued;
    PERFORM muster_project(p_stream, positions[1], positions[cardinality(positions)]);
    IF NOT p_claimed THEN
        PERFORM pg_notify('muster_outbox', '');
    END IF;
    RETURN QUERY SELECT unnest(positions), queued;
END
$$;
"""

DOWNGRADE = """
DROP FUNCTION muster_append(text, int[], uuid[], text[], int[], jsonb[], jsonb, timestamptz, text, boolean);
DROP FUNCTION muster_project(text, bigint, bigint);
DROP FUNCTION muster_touch_session(text, int, boolean, text, text, int, boolean, int, timestamptz);
DROP FUNCTION muster_project_event(events);
"""


def upgrade() -> None:
    # Function bodies hold semicolons: one statement per `$$ … $$;` definition.
    for statement in UPGRADE.split("\n$$;\n"):
        if statement.strip():
            op.execute(statement.strip() + "\n$$" if "$$" in statement else statement)


def downgrade() -> None:
    for statement in DOWNGRADE.split(";\n"):
        if statement.strip():
            op.execute(statement)
