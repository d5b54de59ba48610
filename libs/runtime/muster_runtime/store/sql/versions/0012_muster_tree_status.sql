CREATE OR REPLACE FUNCTION muster_tree_status(p_roots uuid[])
RETURNS TABLE (root_session_id uuid, tree_running boolean, tree_unread boolean,
    pending_approvals int, pending_questions int)
LANGUAGE sql STABLE AS $$
    WITH RECURSIVE tree(root, session_id, depth) AS (
        SELECT r, s.session_id, 1 FROM unnest(p_roots) r
        JOIN sessions s ON s.parent_session_id = r
        WHERE s.session_type = 'SIDE_TASK' AND NOT s.archived AND NOT s.deleted
        UNION ALL
        SELECT t.root, s.session_id, t.depth + 1 FROM tree t
        JOIN sessions s ON s.parent_session_id = t.session_id
        WHERE t.depth < 10 AND NOT s.archived AND NOT s.deleted),
    signals AS (
        SELECT r,
            coalesce(bool_or(s.phase IN ('RUNNING', 'RESUMING', 'CANCELLING', 'WAITING_CLIENT')),
                false) AS running,
            coalesce(bool_or(s.session_type <> 'SUBAGENT'
                AND s.turn_ended_position > coalesce(s.read_position, 0)), false) AS unread
        FROM unnest(p_roots) r
        LEFT JOIN tree t ON t.root = r
        LEFT JOIN sessions s ON s.session_id = t.session_id
        GROUP BY r),
    waits AS (
        SELECT s.root_session_id AS r,
            count(*) FILTER (WHERE w.kind = 'approval')::int AS approvals,
            count(*) FILTER (WHERE w.kind = 'question')::int AS questions
        FROM sessions s JOIN session_waits w ON w.session_id = s.session_id
        WHERE s.root_session_id = ANY (p_roots) AND NOT s.deleted
          AND w.status = 'pending' AND w.kind IN ('approval', 'question')
        GROUP BY s.root_session_id)
    SELECT g.r, g.running, g.unread, coalesce(w.approvals, 0), coalesce(w.questions, 0)
    FROM signals g LEFT JOIN waits w ON w.r = g.r
$$;
