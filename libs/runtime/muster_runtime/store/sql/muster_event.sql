-- muster_event: the fields of an event that a projection reads (the payload as `p`); the
-- projector reads a range of `events` once into an array of these.
-- Used by: muster_project and muster_project_positions, which read events into an array of
-- these for muster_project_events and the helpers it passes it to.

CREATE TYPE muster_event AS (position bigint, stream_id text, stream_version int, type text,
    p jsonb, recorded_at timestamptz);
