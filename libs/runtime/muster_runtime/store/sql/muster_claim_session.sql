-- muster_claim_session: a harness's claim of a session to start a turn, in one round trip
-- (ADR 0025). In order: records the command as processed (a redelivery stops there), locks
-- the session with its reads (muster_lock_session), takes the session's lease (not for a
-- SUBAGENT, whose runs are the workers'), and once the lease is held reads the visible
-- history, the started tool calls and the latest compaction.
-- Called by: PostgresUnitOfWork.claim_session (postgres_queries.CLAIM_SESSION).

CREATE OR REPLACE FUNCTION muster_claim_session(
    p_consumer text, p_message_id text, p_session uuid, p_owner text, p_ttl_s float8, p_open text[]
) RETURNS TABLE (claim_first boolean, claim_leased boolean, locked sessions, queued_id uuid,
                 queued_content text, open_run executions, open_children executions[],
                 history json, started text[], compaction json)
LANGUAGE plpgsql VOLATILE AS $$
#variable_conflict use_column
DECLARE
    holder text;
    l record;
BEGIN
    claim_leased := false;
    INSERT INTO processed_messages (consumer, message_id) VALUES (p_consumer, p_message_id)
    ON CONFLICT DO NOTHING;
    claim_first := FOUND;
    IF NOT claim_first THEN
        RETURN NEXT;
        RETURN;
    END IF;
    SELECT * INTO l FROM muster_lock_session(p_session, p_open);
    locked := l.locked;
    queued_id := l.queued_id;
    queued_content := l.queued_content;
    open_run := l.open_run;
    open_children := l.open_children;
    IF locked.session_id IS NULL OR locked.session_type = 'SUBAGENT' THEN
        RETURN NEXT;
        RETURN;
    END IF;
    INSERT INTO leases (resource_id, owner, expires_at)
    VALUES (p_session::text, p_owner, now() + make_interval(secs => p_ttl_s))
    ON CONFLICT (resource_id) DO UPDATE
        SET owner = EXCLUDED.owner, expires_at = EXCLUDED.expires_at
        WHERE leases.expires_at < now() OR leases.owner = EXCLUDED.owner
    RETURNING owner INTO holder;
    claim_leased := coalesce(holder = p_owner, false);
    IF claim_leased THEN
        SELECT json_agg(json_build_object('message_id', m.message_id, 'seq', m.seq, 'role', m.role,
                   'content', m.content, 'tool_calls', m.tool_calls, 'tool_call_id', m.tool_call_id,
                   'usage', m.usage) ORDER BY m.seq)
          INTO history FROM messages m WHERE m.session_id = p_session AND NOT m.discarded;
        SELECT array_agg(t.tool_call_id) INTO started FROM tool_runs t WHERE t.session_id = p_session;
        SELECT row_to_json(c) INTO compaction FROM compactions c WHERE c.session_id = p_session;
    END IF;
    RETURN NEXT;
END
$$;
