"""Side tasks and session management (issue 10): per-session settings, archive, delete,
read state and the tree signals' last value as `sessions` columns; forks copied by the
projector (ADR 0014); the tree status and the full-text index over USER messages.

`muster_project` is 0009's text with three additions, spliced at named anchors (asserted,
so a change of 0009 cannot silently drop one): the new `SessionCreated` columns, fork
copies right after the inserts (a fork's source rows may come from the same range), and
the management events after the session rows.

Revision ID: 0010
Revises: 0009
"""

from alembic import op
from muster_runtime.store.migrate import migration_module, run_script

revision = "0010"
down_revision = "0009"

COLUMNS = """
ALTER TABLE sessions ADD COLUMN permission_level TEXT NOT NULL DEFAULT 'auto';
ALTER TABLE sessions ADD COLUMN execution_mode TEXT NOT NULL DEFAULT 'CLOUD';
ALTER TABLE sessions ADD COLUMN context_mode TEXT;
ALTER TABLE sessions ADD COLUMN background JSONB;
ALTER TABLE sessions ADD COLUMN workspace_id UUID;
ALTER TABLE sessions ADD COLUMN archived BOOLEAN NOT NULL DEFAULT false;
ALTER TABLE sessions ADD COLUMN deleted BOOLEAN NOT NULL DEFAULT false;
ALTER TABLE sessions ADD COLUMN turn_ended_position BIGINT;
ALTER TABLE sessions ADD COLUMN read_position BIGINT;
ALTER TABLE sessions ADD COLUMN tree_running BOOLEAN NOT NULL DEFAULT false;
ALTER TABLE sessions ADD COLUMN tree_unread BOOLEAN NOT NULL DEFAULT false;
ALTER TABLE sessions ADD COLUMN pending_approvals INTEGER NOT NULL DEFAULT 0;
ALTER TABLE sessions ADD COLUMN pending_questions INTEGER NOT NULL DEFAULT 0;
UPDATE sessions SET workspace_id = root_session_id;
-- What the projector below would have written for the events already there.
UPDATE sessions s SET turn_ended_position = (
    SELECT max(position) FROM events e
    WHERE e.stream_id = s.session_id::text AND e.type = 'SessionPhaseChanged'
      AND e.payload->>'phase' IN ('COMPLETED', 'FAILED'));
ALTER TABLE messages ADD COLUMN forked_from UUID;
-- Search covers the messages users typed, once: a fork's copies are left out (the original
-- is found), which also keeps a fork of thousands of messages from indexing them all again.
CREATE INDEX messages_user_text ON messages USING gin (to_tsvector('english', content))
    WHERE role = 'USER' AND forked_from IS NULL
"""

COLUMNS_DOWN = """
DROP INDEX messages_user_text;
ALTER TABLE messages DROP COLUMN forked_from;
ALTER TABLE sessions DROP COLUMN permission_level, DROP COLUMN execution_mode,
    DROP COLUMN context_mode, DROP COLUMN background, DROP COLUMN workspace_id,
    DROP COLUMN archived, DROP COLUMN deleted, DROP COLUMN turn_ended_position,
    DROP COLUMN read_position, DROP COLUMN tree_running, DROP COLUMN tree_unread,
    DROP COLUMN pending_approvals, DROP COLUMN pending_questions
"""

# A fork's copy of a message (or file change) has an id derived from the side task and the
# original, so replaying the fork gives the same ids (Python twin: `fork_ids.copied_id`).
COPIED_ID = """
CREATE FUNCTION muster_copied_id(p_side uuid, p_original uuid) RETURNS uuid
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT md5(p_side::text || ':' || p_original::text)::uuid
$$"""

# One fork at a time, in position order: a fork of a fork copies rows the previous
# statement inserted (a single INSERT would not see its own rows).
FORKS = r"""
CREATE FUNCTION muster_project_forks(evs muster_event[]) RETURNS void LANGUAGE plpgsql AS $$
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
$$"""

# Management events are rare: one statement each, in position order (the last one wins).
# Turn ends are frequent: one statement per session that ended one.
MANAGE = r"""
CREATE FUNCTION muster_project_manage(evs muster_event[], present text[]) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
    c record;
BEGIN
    IF 'SessionPhaseChanged' = ANY (present) THEN
        FOR c IN
            SELECT stream_id::uuid AS id, max(position) AS at FROM unnest(evs)
            WHERE type = 'SessionPhaseChanged' AND p->>'phase' IN ('COMPLETED', 'FAILED')
            GROUP BY stream_id
        LOOP
            UPDATE sessions SET turn_ended_position = c.at WHERE session_id = c.id;
        END LOOP;
    END IF;
    IF NOT present && ARRAY['SessionSettingsChanged', 'SessionArchived', 'SessionUnarchived',
            'SessionDeleted', 'SessionPromoted', 'SessionRead', 'SessionTreeStatusChanged'] THEN
        RETURN;
    END IF;
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
$$"""

# The four tree signals of each root, over its descendants: side tasks at any depth and
# their subagents; an archived or deleted session hides itself and everything below it.
# The root's own subagents are its turn (its phase already says it runs), not its tree:
# leaving them out keeps the signal, and its writes, off the path of every delegation.
TREE_STATUS = """
CREATE FUNCTION muster_tree_status(p_roots uuid[])
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
        WHERE t.depth < 10 AND NOT s.archived AND NOT s.deleted)
    SELECT r,
        coalesce(bool_or(s.phase IN ('RUNNING', 'RESUMING', 'CANCELLING')), false),
        coalesce(bool_or(s.session_type <> 'SUBAGENT'
            AND s.turn_ended_position > coalesce(s.read_position, 0)), false),
        0, 0  -- approvals and questions arrive with the human-in-the-loop issue
    FROM unnest(p_roots) r
    LEFT JOIN tree t ON t.root = r
    LEFT JOIN sessions s ON s.session_id = t.session_id
    GROUP BY r
$$"""

CREATED_FROM = """            root_session_id, title, agent_type, model_id, version, created_at, updated_at)
        SELECT (p->>'session_id')::uuid, p->>'user_id', p->>'session_type',
            (p->>'parent_session_id')::uuid, (p->>'root_session_id')::uuid, p->>'title',
            p->>'agent_type', p->>'model_id', stream_version, recorded_at, recorded_at
"""
CREATED_TO = """            root_session_id, title, agent_type, model_id, version, created_at, updated_at,
            permission_level, execution_mode, context_mode, background, workspace_id)
        SELECT (p->>'session_id')::uuid, p->>'user_id', p->>'session_type',
            (p->>'parent_session_id')::uuid, (p->>'root_session_id')::uuid, p->>'title',
            p->>'agent_type', p->>'model_id', stream_version, recorded_at, recorded_at,
            coalesce(p->>'permission_level', 'auto'), coalesce(p->>'execution_mode', 'CLOUD'),
            p->>'context_mode',
            CASE WHEN jsonb_typeof(p->'background') = 'array' THEN p->'background' END,
            coalesce((p->>'workspace_id')::uuid, (p->>'root_session_id')::uuid)
"""
BEFORE_UPDATES = "    -- Changes to existing rows: one statement per changed row"
FORK_CALL = """    IF 'SessionForked' = ANY (present) THEN
        PERFORM muster_project_forks(evs);
    END IF;
"""
END_ANCHOR = "\nEND\n$$"
# Only when the range holds one of its events: most appends (messages, tool starts) do not.
MANAGE_CALL = """
    IF present && ARRAY['SessionPhaseChanged', 'SessionSettingsChanged', 'SessionArchived',
            'SessionUnarchived', 'SessionDeleted', 'SessionPromoted', 'SessionRead',
            'SessionTreeStatusChanged'] THEN
        PERFORM muster_project_manage(evs, present);
    END IF;"""


def _splice(text: str, anchor: str, replacement: str) -> str:
    assert text.count(anchor) == 1, f"anchor not found once in 0009's projector: {anchor[:40]!r}"
    return text.replace(anchor, replacement)


def project_text() -> str:
    text: str = migration_module("0009_set_based_projector.py").PROJECT
    text = _splice(text, CREATED_FROM, CREATED_TO)
    text = _splice(text, BEFORE_UPDATES, FORK_CALL + BEFORE_UPDATES)
    return _splice(text, END_ANCHOR, MANAGE_CALL + END_ANCHOR)


def upgrade() -> None:
    run_script(COLUMNS)
    for function in (COPIED_ID, FORKS, MANAGE, TREE_STATUS, project_text()):
        op.execute(function.strip())


def downgrade() -> None:
    op.execute(migration_module("0009_set_based_projector.py").PROJECT.strip())
    for function in (
        "muster_tree_status(uuid[])",
        "muster_project_manage(muster_event[], text[])",
        "muster_project_forks(muster_event[])",
        "muster_copied_id(uuid, uuid)",
    ):
        op.execute(f"DROP FUNCTION {function}")
    run_script(COLUMNS_DOWN)
