-- muster_event: the fields of an event that a projection reads (the payload as `p`); the
-- projector reads a range of `events` once into an array of these.
-- Used by: muster_project, muster_project_positions and the helpers they pass it to.

CREATE TYPE muster_event AS (position bigint, stream_id text, stream_version int, type text,
    p jsonb, recorded_at timestamptz);
