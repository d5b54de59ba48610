CREATE OR REPLACE FUNCTION muster_lock_session(p_session uuid, p_open text[])
RETURNS TABLE (locked sessions, queued_id uuid, queued_content text, open_run executions,
               open_children executions[])
LANGUAGE plpgsql VOLATILE AS $$
BEGIN
    SELECT * INTO locked FROM sessions WHERE session_id = p_session FOR UPDATE;
    IF FOUND THEN
        SELECT i.message_id, i.content INTO queued_id, queued_content FROM session_inputs i
         WHERE i.session_id = p_session AND i.state = 'QUEUED' ORDER BY i.position LIMIT 1;
        SELECT * INTO open_run FROM executions e
         WHERE e.child_session_id = p_session AND e.status = ANY (p_open) ORDER BY e.round DESC LIMIT 1;
        open_children := ARRAY(
            SELECT e FROM executions e WHERE e.parent_session_id = p_session AND e.status = ANY (p_open)
             ORDER BY e.started_at);
    END IF;
    RETURN NEXT;
END
$$;
