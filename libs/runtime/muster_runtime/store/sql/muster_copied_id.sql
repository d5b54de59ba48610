-- muster_copied_id: the id of a fork's copy of a message or file change, derived from the
-- side task and the original, so replaying the fork gives the same ids.
-- Python twin: muster_runtime.store.fork_ids.copied_id (they must stay equal).
-- Called by: muster_project_forks.

CREATE OR REPLACE FUNCTION muster_copied_id(p_side uuid, p_original uuid) RETURNS uuid
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT md5(p_side::text || ':' || p_original::text)::uuid
$$;
