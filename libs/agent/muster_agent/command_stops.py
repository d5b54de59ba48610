"""Commands cut off by a crash in a turn that ended before anyone resumed it.

A service killed in the middle of a command takes the command with it; the run that resumes
the session answers the call from the command's log (`command_calls.interrupted_command`).
But a session cancelled (or an execution stopped) while its runner was dead is never resumed:
its started command would stay unanswered and what it changed unattributed. So the service
that gets the cancel and holds no runner for it answers such calls at once, as a resumed
run would: "interrupted", the output until the crash, the files it changed.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any
from uuid import UUID

from muster_runtime.uow.aggregates import Session

from muster_agent import session_store as store
from muster_agent.command_calls import forget, interrupted_command
from muster_agent.file_changes import ChangeRecorder
from muster_agent.history import last_tool_round, pending_tool_calls
from muster_agent.tools.schemas import COMMAND_TOOL_NAMES
from muster_agent.tools.workspace import Workspace

log = logging.getLogger("muster.loop")


async def answer_stopped_commands(deps: Any, session_id: UUID) -> int:
    """Answer the started, unanswered commands of `session_id` when its turn has ended
    (a session still running is its runner's to answer). Returns how many were answered;
    never raises (but for cancellation): a failure leaves them to the session's next turn."""
    try:
        return await _answer(deps, session_id)
    except Exception:
        log.warning("stopped_commands_unanswered session=%s", session_id, exc_info=True)
        return 0


async def _answer(deps: Any, session_id: UUID) -> int:
    async with deps.uows() as uow:
        row = await uow.lock_session(session_id)
        session = Session.of(row) if row is not None else None
        if session is None or session.active:
            return 0
        state = await store.load_state(uow, session_id)
        round_ = last_tool_round(state.messages) if state is not None else None
        if state is None or round_ is None:
            return 0
        calls = [
            c
            for c in pending_tool_calls(state.messages)
            if c["name"] in COMMAND_TOOL_NAMES and c["id"] in state.started_tool_calls
        ]
        if not calls:
            return 0
        workspace = Workspace(deps.workspaces / str(state.workspace_id or state.root_session_id))
        recorder = ChangeRecorder(workspace, state, round_.message_id, round_.seq)
        items: list[store.Item] = []
        for call in calls:
            result, made = await interrupted_command(deps, state, workspace, recorder, call)
            items += [store.tool_message(call["id"], result), *made]
        await uow.store_blobs(recorder.blobs)
        events = store.message_items(items, session.message_count + 1)
        await uow.append(str(session_id), events, expected_version=session.version)
    await asyncio.to_thread(forget, recorder.spent)
    log.info("stopped_commands_answered session=%s calls=%d", session_id, len(calls))
    return len(calls)
