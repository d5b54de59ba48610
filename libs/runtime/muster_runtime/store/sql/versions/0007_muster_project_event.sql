CREATE OR REPLACE FUNCTION muster_project_event(e events) RETURNS void LANGUAGE plpgsql AS $$
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
