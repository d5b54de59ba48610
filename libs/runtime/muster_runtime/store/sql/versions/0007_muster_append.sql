CREATE OR REPLACE FUNCTION muster_append(
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
