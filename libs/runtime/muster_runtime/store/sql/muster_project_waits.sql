-- muster_project_waits: session_waits from the wait events (ADR 0020): a request
-- (approval, question, LOCAL tool request) inserts a pending row; a resolution changes it
-- only if it was recorded later (its position is greater), so a range applied at once
-- equals its events applied one by one.
-- Called by: muster_project_events.

CREATE OR REPLACE FUNCTION muster_project_waits(evs muster_event[]) RETURNS void LANGUAGE sql AS $$
    INSERT INTO session_waits (wait_id, kind, session_id, user_id, tool_call_id, detail,
        status, position, created_at)
    SELECT coalesce(e.p->>'approval_id', e.p->>'question_id', e.p->>'request_id')::uuid,
        CASE e.type WHEN 'ApprovalRequested' THEN 'approval'
                    WHEN 'QuestionAsked' THEN 'question' ELSE 'tool' END,
        e.stream_id::uuid, s.user_id, e.p->>'tool_call_id', e.p, 'pending', e.position,
        e.recorded_at
    FROM unnest(evs) e JOIN sessions s ON s.session_id = e.stream_id::uuid
    WHERE e.type IN ('ApprovalRequested', 'QuestionAsked', 'ToolRequested')
    ORDER BY e.position
    ON CONFLICT (wait_id) DO NOTHING;
    UPDATE session_waits w SET
        status = CASE
            WHEN r.p->>'decision' = 'approve' THEN 'approved'
            WHEN r.p->>'decision' = 'deny' THEN 'denied'
            WHEN coalesce(r.p->>'decision', r.p->>'outcome') = 'dropped' THEN 'dropped'
            ELSE 'answered' END,
        reason = r.p->>'reason',
        resolved_at = r.recorded_at
    FROM (SELECT DISTINCT ON (id) id, p, position, recorded_at FROM (
              SELECT coalesce(p->>'approval_id', p->>'question_id', p->>'request_id')::uuid AS id,
                  p, position, recorded_at
              FROM unnest(evs)
              WHERE type IN ('ApprovalResolved', 'QuestionResolved', 'ToolRequestResolved')) x
          ORDER BY id, position DESC) r
    WHERE w.wait_id = r.id AND w.position < r.position;
$$;
