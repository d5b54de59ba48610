CREATE OR REPLACE FUNCTION muster_touch_session(
    p_stream text, p_max_seq int, p_phase_set boolean, p_phase text, p_error text,
    p_resumes int, p_touched boolean, p_version int, p_time timestamptz
) RETURNS void LANGUAGE sql AS $$
    UPDATE sessions SET
        message_count = greatest(message_count, coalesce(p_max_seq, 0)),
        phase = CASE WHEN p_phase_set THEN p_phase ELSE phase END,
        last_error = CASE WHEN p_phase_set THEN p_error ELSE last_error END,
        recoveries = recoveries + p_resumes,
        version = CASE WHEN p_touched THEN p_version ELSE version END,
        updated_at = CASE WHEN p_touched THEN p_time ELSE updated_at END
    WHERE session_id = p_stream::uuid
$$;
