-- muster_close_quietly: a turn's close in one statement when nothing must be decided under
-- its locks (ADR 0025). Under the session's lock (and, for a child, its parent's, child
-- first) it checks that the session still runs with the messages the caller saw, that no
-- input is queued, and for a child that its run is still the claimed open execution and
-- that a sibling is still open. Then it writes the caller's events (muster_append_all);
-- when a check fails it writes nothing and answers which one ('gone', 'moved', 'queued',
-- 'changed', 'last'), and the caller decides the long way under the locks.
-- Called by: uow/quiet_close.py (the harness's and the worker's turn close).

CREATE OR REPLACE FUNCTION muster_close_quietly(
    p_session uuid, p_expected_count int, p_open text[],
    p_execution uuid, p_execution_version int, p_parent uuid,
    p_appends int[], p_streams text[], p_ids uuid[], p_types text[], p_schema_versions int[],
    p_payloads jsonb[], p_metadata jsonb[], p_recorded_at timestamptz[], p_topic text,
    p_claimed boolean
) RETURNS TABLE (outcome text, append_index int, stream_version int, event_position bigint,
                 outbox_id bigint)
LANGUAGE plpgsql VOLATILE AS $$
#variable_conflict use_column
DECLARE
    s sessions;
    p sessions;
    run executions;
    versions int[];
BEGIN
    SELECT * INTO s FROM sessions WHERE session_id = p_session FOR UPDATE;
    IF NOT FOUND OR s.phase IS NULL OR s.phase NOT IN ('RUNNING', 'RESUMING') THEN
        RETURN QUERY SELECT 'gone'::text, NULL::int, NULL::int, NULL::bigint, NULL::bigint;
        RETURN;
    END IF;
    IF s.message_count <> p_expected_count THEN
        RETURN QUERY SELECT 'moved'::text, NULL::int, NULL::int, NULL::bigint, NULL::bigint;
        RETURN;
    END IF;
    IF EXISTS (SELECT 1 FROM session_inputs i WHERE i.session_id = p_session AND i.state = 'QUEUED') THEN
        RETURN QUERY SELECT 'queued'::text, NULL::int, NULL::int, NULL::bigint, NULL::bigint;
        RETURN;
    END IF;
    IF p_execution IS NOT NULL THEN
        SELECT * INTO run FROM executions e
         WHERE e.child_session_id = p_session AND e.status = ANY (p_open) ORDER BY e.round DESC LIMIT 1;
        IF run.execution_id IS DISTINCT FROM p_execution OR run.version <> p_execution_version THEN
            RETURN QUERY SELECT 'changed'::text, NULL::int, NULL::int, NULL::bigint, NULL::bigint;
            RETURN;
        END IF;
        SELECT * INTO p FROM sessions WHERE session_id = p_parent FOR UPDATE;
        IF NOT FOUND THEN
            RETURN QUERY SELECT 'changed'::text, NULL::int, NULL::int, NULL::bigint, NULL::bigint;
            RETURN;
        END IF;
        -- A statement of its own after the parent's lock: it sees a sibling's close that
        -- committed while this one waited, so two last children cannot both pass.
        IF NOT EXISTS (SELECT 1 FROM executions e WHERE e.parent_session_id = p_parent
                        AND e.status = ANY (p_open) AND e.execution_id <> p_execution) THEN
            RETURN QUERY SELECT 'last'::text, NULL::int, NULL::int, NULL::bigint, NULL::bigint;
            RETURN;
        END IF;
    END IF;
    -- Each stream's events follow the version its lock read (the run's: the claimed one).
    versions := ARRAY(
        SELECT (CASE x.stream WHEN p_session::text THEN s.version
                              WHEN p_execution::text THEN p_execution_version
                              ELSE p.version END
                + row_number() OVER (PARTITION BY x.stream ORDER BY x.n))::int
        FROM unnest(p_streams) WITH ORDINALITY AS x(stream, n) ORDER BY x.n);
    RETURN QUERY
    SELECT 'closed'::text, a.i, v.version, a.pos, a.outbox
    FROM muster_append_all(p_appends, p_streams, versions, p_ids, p_types, p_schema_versions,
            p_payloads, p_metadata, p_recorded_at, p_topic, p_claimed,
            '{}'::text[], '{}'::text[], '{}'::jsonb[], '{}'::text[])
         WITH ORDINALITY AS a(i, pos, outbox, command, n)
    JOIN unnest(versions) WITH ORDINALITY AS v(version, n) ON v.n = a.n
    ORDER BY a.n;
END
$$;
