CREATE TYPE muster_event AS (position bigint, stream_id text, stream_version int, type text,
    p jsonb, recorded_at timestamptz);
