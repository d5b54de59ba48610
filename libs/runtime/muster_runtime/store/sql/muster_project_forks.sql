-- muster_project_forks: a fork's copies (ADR 0014). For each SessionForked of the pass, in
-- position order, copies the source's messages and file changes up to the fork's seq
-- (minus the skipped ones) into the side task, with ids from muster_copied_id. One fork at
-- a time: a fork of a fork copies rows the previous statement inserted.
-- Called by: muster_project_events.

CREATE OR REPLACE FUNCTION muster_project_forks(evs muster_event[]) RETURNS void LANGUAGE plpgsql AS $$
DECLARE
    f muster_event;
    side uuid;
    source uuid;
    up_to int;
    skipped uuid[];
BEGIN
    FOR f IN SELECT * FROM unnest(evs) WHERE type = 'SessionForked' ORDER BY position LOOP
        side := f.stream_id::uuid;
        source := (f.p->>'source_session_id')::uuid;
        up_to := (f.p->>'up_to_seq')::int;
        skipped := ARRAY(SELECT jsonb_array_elements_text(
            coalesce(f.p->'skipped_message_ids', '[]')))::uuid[];
        INSERT INTO messages (message_id, session_id, seq, role, content, tool_calls,
            tool_call_id, usage, position, created_at, forked_from)
        SELECT muster_copied_id(side, m.message_id), side, m.seq, m.role, m.content,
            m.tool_calls, m.tool_call_id, m.usage, f.position, f.recorded_at,
            coalesce(m.forked_from, m.message_id)
        FROM messages m
        WHERE m.session_id = source AND m.seq <= up_to AND m.message_id <> ALL (skipped)
        ORDER BY m.seq;
        INSERT INTO file_changes (change_id, session_id, message_id, message_seq, tool_call_id,
            path, change_type, lines_added, lines_deleted, diff_sha256, before_sha256,
            after_sha256, before_size, after_size, session_type, agent_type, note, position,
            created_at)
        SELECT muster_copied_id(side, c.change_id), side, muster_copied_id(side, c.message_id),
            c.message_seq, c.tool_call_id, c.path, c.change_type, c.lines_added,
            c.lines_deleted, c.diff_sha256, c.before_sha256, c.after_sha256, c.before_size,
            c.after_size, c.session_type, c.agent_type, c.note, f.position, f.recorded_at
        FROM file_changes c
        WHERE c.session_id = source AND c.message_seq <= up_to AND c.message_id <> ALL (skipped);
        UPDATE sessions SET message_count = greatest(message_count, up_to) WHERE session_id = side;
    END LOOP;
END
$$;
