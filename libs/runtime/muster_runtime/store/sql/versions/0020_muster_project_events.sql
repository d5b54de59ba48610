-- muster_project_events: the inline projector (ADR 0012, 0013, 0023). Applies `evs` (events
-- in position order, as muster_project and muster_project_positions read them) to the read
-- models: sessions, session_inputs, messages, tool_runs, file_changes, executions,
-- compactions, session_waits. It writes set-based: one INSERT ... SELECT per table, then one
-- UPDATE per table joined by primary key. The rows equal those of applying the events one
-- by one in position order, wherever a range is cut: a change applies only to rows that
-- existed when it was recorded (their `position` is older), the last change wins a column,
-- counters add up.
-- Projections read the stored payload: an event schema change must teach it its new
-- schema_version.
-- Called by: muster_project, muster_project_positions.

CREATE OR REPLACE FUNCTION muster_project_events(evs muster_event[])
RETURNS void LANGUAGE plpgsql
-- Plans do not depend on the events (rows change by primary key), so each statement is
-- planned once per connection, not at every call.
SET plan_cache_mode = force_generic_plan
-- Changes join their rows by primary key: a nested loop over the index, never a hash or
-- merge join or a sequential scan that a small table at planning time would favour.
SET enable_hashjoin = off SET enable_mergejoin = off SET enable_seqscan = off AS $$
DECLARE
    present text[];
    users boolean;
BEGIN
    SELECT array_agg(DISTINCT type),
           coalesce(bool_or(type = 'MessageRecorded' AND p->>'role' = 'USER'), false)
    INTO present, users
    FROM unnest(evs);
    IF present IS NULL THEN
        RETURN;
    END IF;
    IF 'SessionCreated' = ANY (present) THEN
        INSERT INTO sessions (session_id, user_id, session_type, parent_session_id,
            root_session_id, title, agent_type, model_id, version, created_at, updated_at,
            permission_level, execution_mode, context_mode, background, workspace_id)
        SELECT (p->>'session_id')::uuid, p->>'user_id', p->>'session_type',
            (p->>'parent_session_id')::uuid, (p->>'root_session_id')::uuid, p->>'title',
            p->>'agent_type', p->>'model_id', stream_version, recorded_at, recorded_at,
            coalesce(p->>'permission_level', 'auto'), coalesce(p->>'execution_mode', 'CLOUD'),
            p->>'context_mode',
            CASE WHEN jsonb_typeof(p->'background') = 'array' THEN p->'background' END,
            coalesce((p->>'workspace_id')::uuid, (p->>'root_session_id')::uuid)
        FROM unnest(evs) WHERE type = 'SessionCreated' ORDER BY position;
    END IF;
    IF 'UserMessageQueued' = ANY (present) THEN
        INSERT INTO session_inputs (message_id, session_id, client_message_id, content, state,
            position, queued_at)
        SELECT (p->>'message_id')::uuid, stream_id::uuid, p->>'client_message_id',
            p->>'content', 'QUEUED', position, recorded_at
        FROM unnest(evs) WHERE type = 'UserMessageQueued' ORDER BY position;
    END IF;
    IF 'MessageRecorded' = ANY (present) THEN
        INSERT INTO messages (message_id, session_id, seq, role, content, tool_calls,
            tool_call_id, usage, position, created_at)
        SELECT (p->>'message_id')::uuid, stream_id::uuid, (p->>'seq')::int, p->>'role',
            p->>'content',
            CASE WHEN jsonb_typeof(p->'tool_calls') = 'array'
                  AND jsonb_array_length(p->'tool_calls') > 0 THEN p->'tool_calls' END,
            p->>'tool_call_id',
            CASE WHEN jsonb_typeof(p->'usage') = 'object' THEN p->'usage' END,
            position, recorded_at
        FROM unnest(evs) WHERE type = 'MessageRecorded' ORDER BY position;
    END IF;
    IF 'ToolCallStarted' = ANY (present) THEN
        INSERT INTO tool_runs (session_id, tool_call_id, message_id, name, started_at)
        SELECT stream_id::uuid, p->>'tool_call_id', (p->>'message_id')::uuid, p->>'name', recorded_at
        FROM unnest(evs) WHERE type = 'ToolCallStarted' ORDER BY position;
    END IF;
    IF 'FileChanged' = ANY (present) THEN
        INSERT INTO file_changes (change_id, session_id, message_id, message_seq, tool_call_id,
            path, change_type, lines_added, lines_deleted, diff_sha256, before_sha256,
            after_sha256, before_size, after_size, session_type, agent_type, note, position,
            created_at)
        SELECT (p->>'change_id')::uuid, stream_id::uuid, (p->>'message_id')::uuid,
            (p->>'message_seq')::int, p->>'tool_call_id', p->>'path', p->>'change_type',
            (p->>'lines_added')::int, (p->>'lines_deleted')::int, p->>'diff_sha256',
            p->>'before_sha256', p->>'after_sha256', (p->>'before_size')::bigint,
            (p->>'after_size')::bigint, p->>'session_type', p->>'agent_type', p->>'note',
            position, recorded_at
        FROM unnest(evs) WHERE type = 'FileChanged' ORDER BY position;
    END IF;
    IF 'ExecutionStarted' = ANY (present) THEN
        INSERT INTO executions (execution_id, parent_session_id, parent_tool_call_id,
            parent_message_id, child_session_id, user_id, agent_type, invocation_type, task,
            round, status, delivery_status, start_message_id, started_at, deadline_at, version)
        SELECT (p->>'execution_id')::uuid, (p->>'parent_session_id')::uuid,
            p->>'parent_tool_call_id', (p->>'parent_message_id')::uuid,
            (p->>'child_session_id')::uuid, p->>'user_id', p->>'agent_type',
            p->>'invocation_type', p->>'task', (p->>'round')::int, 'RUNNING', 'PENDING',
            (p->>'start_message_id')::uuid, recorded_at, (p->>'deadline_at')::timestamptz,
            stream_version
        FROM unnest(evs) WHERE type = 'ExecutionStarted' ORDER BY position;
    END IF;
    IF 'SessionForked' = ANY (present) THEN
        PERFORM muster_project_forks(evs);
    END IF;
    IF 'CompactionRecorded' = ANY (present) THEN
        INSERT INTO compactions (session_id, boundary_message_id, boundary_seq, summary,
            messages_compacted, tokens_before, tokens_after, at_seq, position, created_at)
        SELECT DISTINCT ON (stream_id) stream_id::uuid, (p->>'boundary_message_id')::uuid,
            (p->>'boundary_seq')::int, p->>'summary', (p->>'messages_compacted')::int,
            (p->>'tokens_before')::int, (p->>'tokens_after')::int, (p->>'at_seq')::int,
            position, recorded_at
        FROM unnest(evs) WHERE type = 'CompactionRecorded' ORDER BY stream_id, position DESC
        ON CONFLICT (session_id) DO UPDATE SET
            boundary_message_id = EXCLUDED.boundary_message_id,
            boundary_seq = EXCLUDED.boundary_seq, summary = EXCLUDED.summary,
            messages_compacted = EXCLUDED.messages_compacted,
            tokens_before = EXCLUDED.tokens_before, tokens_after = EXCLUDED.tokens_after,
            at_seq = EXCLUDED.at_seq, position = EXCLUDED.position,
            created_at = EXCLUDED.created_at
        WHERE compactions.position < EXCLUDED.position;
    END IF;
    IF present && ARRAY['ApprovalRequested', 'ApprovalResolved', 'QuestionAsked',
            'QuestionResolved', 'ToolRequested', 'ToolRequestResolved'] THEN
        PERFORM muster_project_waits(evs);
    END IF;
    -- Changes to existing rows: one UPDATE per table, joined by primary key, applied only
    -- to rows that existed when the change was recorded (their `position` is older). The
    -- last change wins a column.
    IF users OR 'QueuedMessagesDropped' = ANY (present) THEN
        -- A USER message consumes the queued input of its id; a drop drops it.
        UPDATE session_inputs i SET state = u.state
        FROM (
            SELECT DISTINCT ON (id) id, state, at FROM (
                SELECT (p->>'message_id')::uuid, 'CONSUMED', position FROM unnest(evs)
                WHERE type = 'MessageRecorded' AND p->>'role' = 'USER'
                UNION ALL
                SELECT d::uuid, 'DROPPED', position
                FROM unnest(evs), jsonb_array_elements_text(p->'message_ids') d
                WHERE type = 'QueuedMessagesDropped') t(id, state, at)
            ORDER BY id, at DESC) u
        WHERE i.message_id = u.id AND i.position < u.at;
    END IF;
    IF 'MessagesDiscarded' = ANY (present) THEN
        UPDATE messages m SET discarded = true
        FROM (
            SELECT d::uuid AS id, max(position) AS at
            FROM unnest(evs), jsonb_array_elements_text(p->'message_ids') d
            WHERE type = 'MessagesDiscarded' GROUP BY 1) u
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
            delivered_at = CASE WHEN u.dlv IS NULL THEN x.delivered_at ELSE u.dlv_at END,
            recoveries = x.recoveries + u.recoveries,
            lease_expiries = x.lease_expiries + u.expiries,
            version = u.version
        FROM (
            SELECT stream_id::uuid AS id,
                array_agg(CASE WHEN type = 'ExecutionFinished' THEN p->>'status' ELSE 'RECOVERING' END
                    ORDER BY position DESC) FILTER (WHERE type <> 'ExecutionDelivered') AS statuses,
                (array_agg(p ORDER BY position DESC) FILTER (WHERE type = 'ExecutionFinished'))[1] AS fin,
                (array_agg(recorded_at ORDER BY position DESC)
                    FILTER (WHERE type = 'ExecutionFinished'))[1] AS fin_at,
                (array_agg(p ORDER BY position DESC) FILTER (WHERE type = 'ExecutionDelivered'))[1] AS dlv,
                (array_agg(recorded_at ORDER BY position DESC)
                    FILTER (WHERE type = 'ExecutionDelivered'))[1] AS dlv_at,
                count(*) FILTER (WHERE type = 'ExecutionRecovering')::int AS recoveries,
                count(*) FILTER (WHERE type = 'ExecutionRecovering'
                    AND p->>'reason' = 'lease_expired')::int AS expiries,
                (array_agg(stream_version ORDER BY position DESC))[1] AS version
            FROM unnest(evs)
            WHERE type IN ('ExecutionFinished', 'ExecutionDelivered', 'ExecutionRecovering')
            GROUP BY stream_id) u
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
        FROM (
            SELECT stream_id::uuid AS id,
                max((p->>'seq')::int) FILTER (WHERE type = 'MessageRecorded') AS max_seq,
                array_agg(p->>'phase' ORDER BY position DESC)
                    FILTER (WHERE type = 'SessionPhaseChanged') AS phases,
                array_agg(p->>'error' ORDER BY position DESC)
                    FILTER (WHERE type = 'SessionPhaseChanged') AS errors,
                count(*) FILTER (WHERE type = 'SessionPhaseChanged'
                    AND p->>'phase' = 'RESUMING')::int AS resumes,
                max(position) FILTER (WHERE type = 'SessionPhaseChanged'
                    AND p->>'phase' IN ('COMPLETED', 'FAILED')) AS ended,
                (array_agg(stream_version ORDER BY position DESC))[1] AS version,
                (array_agg(recorded_at ORDER BY position DESC))[1] AS at
            FROM unnest(evs)
            WHERE type NOT IN ('SessionCreated', 'ExecutionStarted', 'ExecutionFinished',
                'ExecutionDelivered', 'ExecutionRecovering')
            GROUP BY stream_id) u
        WHERE s.session_id = u.id;
    END IF;
    IF present && ARRAY['SessionSettingsChanged', 'SessionArchived', 'SessionUnarchived',
            'SessionDeleted', 'SessionPromoted', 'SessionRead', 'SessionTreeStatusChanged'] THEN
        PERFORM muster_project_manage(evs, present);
    END IF;
END
$$;
