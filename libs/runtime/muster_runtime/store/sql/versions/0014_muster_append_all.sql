CREATE OR REPLACE FUNCTION muster_append_all(
    p_appends int[], p_streams text[], p_versions int[], p_ids uuid[], p_types text[],
    p_schema_versions int[], p_payloads jsonb[], p_metadata jsonb[], p_recorded_at timestamptz[],
    p_topic text, p_claimed boolean,
    p_command_topics text[], p_command_keys text[], p_commands jsonb[], p_command_traces text[]
) RETURNS TABLE (append_index int, event_position bigint, outbox_id bigint, command_id text)
LANGUAGE plpgsql AS $$
#variable_conflict use_column
DECLARE
    positions bigint[];
BEGIN
    IF cardinality(p_ids) > 0 THEN
        -- Event i of the arrays belongs to append p_appends[i]; positions follow that order.
        WITH appended AS (
            INSERT INTO events (stream_id, stream_version, event_id, type, schema_version,
                payload, metadata, recorded_at)
            SELECT s, v, id, t, sv, p, m, r
            FROM unnest(p_streams, p_versions, p_ids, p_types, p_schema_versions, p_payloads,
                        p_metadata, p_recorded_at) WITH ORDINALITY AS x(s, v, id, t, sv, p, m, r, n)
            ORDER BY n
            RETURNING position, event_id)
        SELECT array_agg(a.position ORDER BY x.n) INTO positions
        FROM appended a JOIN unnest(p_ids) WITH ORDINALITY AS x(id, n) ON x.id = a.event_id;
        RETURN QUERY
        WITH ranges AS (
            SELECT g.a, min(g.pos) AS first, max(g.pos) AS last, min(g.s) AS stream
            FROM unnest(p_appends, positions, p_streams) AS g(a, pos, s) GROUP BY g.a),
        queued AS (
            INSERT INTO outbox (topic, key, event_position, event_last_position, claimed)
            SELECT p_topic, stream, first, last, p_claimed FROM ranges ORDER BY a
            RETURNING id, event_position)
        SELECT g.a, g.pos, q.id, NULL::text
        FROM unnest(p_appends, positions) WITH ORDINALITY AS g(a, pos, n)
        JOIN ranges r ON r.a = g.a JOIN queued q ON q.event_position = r.first
        ORDER BY g.n;
        PERFORM muster_project_positions(positions);
    END IF;
    IF cardinality(p_commands) > 0 THEN
        RETURN QUERY
        WITH queued AS (
            INSERT INTO outbox (topic, key, payload, claimed, trace_context)
            SELECT t, k, c, p_claimed, tc
            FROM unnest(p_command_topics, p_command_keys, p_commands, p_command_traces)
                WITH ORDINALITY AS x(t, k, c, tc, n)
            ORDER BY n
            RETURNING id, payload->>'message_id' AS message_id)
        SELECT NULL::int, NULL::bigint, q.id, q.message_id FROM queued q;
    END IF;
    IF NOT p_claimed THEN
        PERFORM pg_notify('muster_outbox', '');
    END IF;
END
$$;
