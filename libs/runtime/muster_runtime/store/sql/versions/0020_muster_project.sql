-- muster_project: the projector (muster_project_events) over the events of positions
-- p_first..p_last, of one stream, or of every stream when p_stream is null.
-- Called by: muster_append, muster_record (through muster_append) and `muster rebuild`
-- (store/rebuild.py).

CREATE OR REPLACE FUNCTION muster_project(p_stream text, p_first bigint, p_last bigint)
RETURNS void LANGUAGE plpgsql
-- The read is planned once per connection, over the index on position.
SET plan_cache_mode = force_generic_plan SET enable_seqscan = off AS $$
BEGIN
    PERFORM muster_project_events(ARRAY(
        SELECT ROW(position, stream_id, stream_version, type, payload, recorded_at)::muster_event
        FROM events
        WHERE position BETWEEN p_first AND p_last AND (p_stream IS NULL OR stream_id = p_stream)
        ORDER BY position));
END
$$;
