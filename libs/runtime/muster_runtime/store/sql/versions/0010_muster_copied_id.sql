CREATE OR REPLACE FUNCTION muster_copied_id(p_side uuid, p_original uuid) RETURNS uuid
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT md5(p_side::text || ':' || p_original::text)::uuid
$$;
