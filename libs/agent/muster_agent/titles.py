"""A session's automatic title: made from its first message when it has none (ADR 0040).

The harness names a session when it starts a turn of a session without a title (its first
turn, in practice), alongside the turn: the model is asked for a short title (`purpose`
"title"; the scripted model answers with the message's first line), and the title is
recorded as `SessionSettingsChanged` under the session's lock only if the session still
has no title, so a title the user set, even while this one was being made, is never
overwritten. Naming is best effort: a failed model call falls back to the first line, and
a crash before the record leaves the session untitled until its next turn starts.
"""

from __future__ import annotations

import logging
import re
from uuid import UUID

from muster_contracts.session_events import SessionSettingsChanged
from muster_runtime.uow.aggregates import Session
from muster_runtime.uow.unit_of_work import UnitOfWorkFactory

from muster_agent.models.base import ModelError, ModelProvider, ModelRequest

log = logging.getLogger("muster.titles")

TITLE_CHARS = 60  # at most, an ellipsis included
# What the model is given of the first message: enough to name it, never a whole document.
SOURCE_CHARS = 2000
TITLE_PROMPT = (
    "Write a short title (at most six words) for a conversation that starts with the user's "
    "message below. Answer with the title only: no quotes, no punctuation at the end."
)


def clean_title(text: str) -> str:
    """The first non-blank line of `text`, without markdown heading marks or quotes, its
    whitespace collapsed, cut at a word to at most `TITLE_CHARS` characters."""
    line = next((line for line in text.splitlines() if line.strip()), "")
    line = re.sub(r"\s+", " ", line).strip().lstrip("#").strip().strip("\"'`").strip()
    if len(line) <= TITLE_CHARS:
        return line
    cut = line[: TITLE_CHARS - 1]
    if " " in cut[TITLE_CHARS // 2 :]:
        cut = cut[: cut.rindex(" ")]
    return cut.rstrip(" ,.;:-") + "…"


async def make_title(model: ModelProvider, session_id: UUID, model_name: str, first_message: str) -> str:
    """A title for a conversation starting with `first_message`: the model's, cleaned, else
    (a failed call or an empty answer) the message's first line."""
    request = ModelRequest(
        session_id=str(session_id),
        model=model_name,
        messages=[
            {"role": "system", "content": TITLE_PROMPT},
            {"role": "user", "content": first_message[:SOURCE_CHARS]},
        ],
        tools=[],
        purpose="title",
    )
    try:
        answer = clean_title((await model.complete(request)).content)
    except ModelError as exc:
        log.warning("title_model_failed session=%s reason=%s", session_id, exc)
        answer = ""
    return answer or clean_title(first_message)


async def record_title(uows: UnitOfWorkFactory, session_id: UUID, title: str) -> bool:
    """Record `title` if the session still has none, decided under its lock."""
    if not title:
        return False
    async with uows() as uow:
        row = await uow.lock_session(session_id)
        session = Session.of(row) if row is not None else None
        if session is None or session.title is not None or session.is_subagent:
            return False
        meta = {"user_id": session.user_id, "root_session_id": str(session.root_session_id)}
        changed = [SessionSettingsChanged(title=title)]
        await uow.append(str(session_id), changed, expected_version=session.version, metadata=meta)
    return True


async def record_made(uows: UnitOfWorkFactory, session_id: UUID, title: str) -> None:
    """`record_title`, logged; never raises (but for cancellation): naming is best effort."""
    try:
        if await record_title(uows, session_id, title):
            log.info("session_titled session=%s", session_id)
    except Exception:
        log.exception("session_title_failed session=%s", session_id)
