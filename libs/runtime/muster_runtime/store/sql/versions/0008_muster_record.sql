CREATE OR REPLACE FUNCTION muster_record(
    p_session uuid, p_expected_count int, p_ids uuid[], p_types text[], p_schema_versions int[],
    p_payloads jsonb[], p_metadata jsonb, p_recorded_at timestamptz, p_topic text,
    p_claimed boolean, p_blob_digests text[], p_blob_contents text[]
) RETURNS TABLE (outcome text, base_version int, phase text, event_position bigint, outbox_id bigint)
LANGUAGE plpgsql AS $$
DECLARE
    s sessions;
BEGIN
    SELECT * INTO s FROM sessions WHERE session_id = p_session FOR UPDATE;
    IF NOT FOUND OR s.phase IS NULL OR s.phase NOT IN ('RUNNING', 'RESUMING') THEN
        RETURN QUERY SELECT 'gone'::text, s.version, s.phase, NULL::bigint, NULL::bigint;
        RETURN;
    END IF;
    IF s.message_count <> p_expected_count THEN
        RETURN QUERY SELECT 'moved'::text, s.version, s.phase, NULL::bigint, NULL::bigint;
        RETURN;
    END IF;
    IF cardinality(p_blob_digests) > 0 THEN
        -- Sorted by the caller: concurrent writers of shared blobs cannot deadlock.
        INSERT INTO blobs (sha256, content, size)
        SELECT d, c, octet_length(c) FROM unnest(p_blob_digests, p_blob_contents) AS x(d, c)
        ON CONFLICT (sha256) DO NOTHING;
    END IF;
    RETURN QUERY
    SELECT 'current'::text, s.version, s.phase, a.event_position, a.outbox_id
    FROM muster_append(
        p_session::text,
        ARRAY(SELECT generate_series(s.version + 1, s.version + cardinality(p_ids))),
        p_ids, p_types, p_schema_versions, p_payloads, p_metadata, p_recorded_at, p_topic,
        p_claimed) AS a;
END
$$;;
