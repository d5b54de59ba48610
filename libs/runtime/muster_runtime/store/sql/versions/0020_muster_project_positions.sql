-- muster_project_positions: the projector (muster_project_events) over a set of event
-- positions, so one pass projects every append of a decision (ADR 0021).
-- Called by: muster_append_all.

CREATE OR REPLACE FUNCTION muster_project_positions(p_positions bigint[])
RETURNS void LANGUAGE plpgsql
-- The read is planned once per connection, over the index on position.
SET plan_cache_mode = force_generic_plan SET enable_seqscan = off AS $$
BEGIN
    PERFORM muster_project_events(ARRAY(
        SELECT ROW(position, stream_id, stream_version, type, payload, recorded_at)::muster_event
        FROM events
        WHERE position = ANY (p_positions)
        ORDER BY position));
END
$$;
