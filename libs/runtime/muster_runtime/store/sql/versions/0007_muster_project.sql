CREATE OR REPLACE FUNCTION muster_project(p_stream text, p_first bigint, p_last bigint)
RETURNS void LANGUAGE plpgsql AS $$
DECLARE
    e events;
    run_stream text;
    max_seq int;
    phase_set boolean;
    new_phase text;
    new_error text;
    resumes int;
    touched boolean;
    new_version int;
    new_time timestamptz;
BEGIN
    FOR e IN
        SELECT * FROM events
        WHERE position BETWEEN p_first AND p_last AND (p_stream IS NULL OR stream_id = p_stream)
        ORDER BY position
    LOOP
        IF run_stream IS DISTINCT FROM e.stream_id THEN
            IF run_stream IS NOT NULL AND (max_seq IS NOT NULL OR phase_set OR touched) THEN
                PERFORM muster_touch_session(run_stream, max_seq, phase_set, new_phase, new_error,
                    resumes, touched, new_version, new_time);
            END IF;
            run_stream := e.stream_id;
            max_seq := NULL; phase_set := false; new_phase := NULL; new_error := NULL;
            resumes := 0; touched := false;
        END IF;
        PERFORM muster_project_event(e);
        IF e.type = 'MessageRecorded' THEN
            max_seq := greatest(max_seq, (e.payload->>'seq')::int);
        ELSIF e.type = 'SessionPhaseChanged' THEN
            phase_set := true;
            new_phase := e.payload->>'phase';
            new_error := e.payload->>'error';
            resumes := resumes + (new_phase = 'RESUMING')::int;
        END IF;
        IF e.type NOT IN ('SessionCreated', 'ExecutionStarted', 'ExecutionFinished',
                          'ExecutionDelivered', 'ExecutionRecovering') THEN
            touched := true;
            new_version := e.stream_version;
            new_time := e.recorded_at;
        END IF;
    END LOOP;
    IF run_stream IS NOT NULL AND (max_seq IS NOT NULL OR phase_set OR touched) THEN
        PERFORM muster_touch_session(run_stream, max_seq, phase_set, new_phase, new_error,
            resumes, touched, new_version, new_time);
    END IF;
END
$$;
