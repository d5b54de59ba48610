-- muster_project_manage: the rare session-management events (settings, archive, unarchive,
-- delete, promote, read, tree status), one statement each in position order, so the last
-- one wins. A promotion makes the session a root and moves its descendants' root.
-- Called by: muster_project_events (only when the pass holds one of
-- these events).

CREATE OR REPLACE FUNCTION muster_project_manage(evs muster_event[], present text[]) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
    c record;
BEGIN
    FOR c IN
        SELECT stream_id::uuid AS id, type, p, position FROM unnest(evs)
        WHERE type IN ('SessionSettingsChanged', 'SessionArchived', 'SessionUnarchived',
            'SessionDeleted', 'SessionPromoted', 'SessionRead', 'SessionTreeStatusChanged')
        ORDER BY position
    LOOP
        CASE c.type
        WHEN 'SessionSettingsChanged' THEN
            UPDATE sessions SET title = coalesce(c.p->>'title', title),
                model_id = coalesce(c.p->>'model_id', model_id),
                permission_level = coalesce(c.p->>'permission_level', permission_level)
            WHERE session_id = c.id;
        WHEN 'SessionArchived' THEN
            UPDATE sessions SET archived = true WHERE session_id = c.id;
        WHEN 'SessionUnarchived' THEN
            UPDATE sessions SET archived = false WHERE session_id = c.id;
        WHEN 'SessionDeleted' THEN
            UPDATE sessions SET deleted = true WHERE session_id = c.id;
        WHEN 'SessionRead' THEN
            UPDATE sessions SET read_position = c.position WHERE session_id = c.id;
        WHEN 'SessionTreeStatusChanged' THEN
            UPDATE sessions SET tree_running = (c.p->>'tree_running')::boolean,
                tree_unread = (c.p->>'tree_unread')::boolean,
                pending_approvals = (c.p->>'pending_approvals')::int,
                pending_questions = (c.p->>'pending_questions')::int
            WHERE session_id = c.id;
        WHEN 'SessionPromoted' THEN
            UPDATE sessions SET session_type = 'NORMAL', parent_session_id = NULL,
                root_session_id = c.id
            WHERE session_id = c.id;
            -- Its descendants follow it (defensive cap of 10 levels, like every tree walk).
            WITH RECURSIVE below(session_id, depth) AS (
                SELECT session_id, 1 FROM sessions WHERE parent_session_id = c.id
                UNION ALL
                SELECT s.session_id, b.depth + 1 FROM sessions s
                JOIN below b ON s.parent_session_id = b.session_id WHERE b.depth < 10)
            UPDATE sessions SET root_session_id = c.id
            WHERE session_id IN (SELECT session_id FROM below);
        END CASE;
    END LOOP;
END
$$;
