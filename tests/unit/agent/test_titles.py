"""Automatic titles on the in-memory unit of work: made from the first message, recorded
under the session's lock only while the session has no title (a title the user set, even
while this one was being made, is kept)."""

from __future__ import annotations

from typing import Any
from uuid import UUID

import pytest
from muster_agent import titles
from muster_agent.models import ModelError, ModelReply, ModelRequest, ScriptedModel, Usage
from muster_contracts.session_events import SessionSettingsChanged
from muster_gateway import management
from muster_runtime.uow.memory_uow import MemoryStore

from tests.unit.gateway.memory_support import USER, events, session


class Answering:
    """A model that answers titles with `answer` (or fails), after `meanwhile`."""

    def __init__(self, answer: str | None, meanwhile: object = None) -> None:
        self.answer, self.meanwhile, self.requests = answer, meanwhile, list[ModelRequest]()

    async def complete(self, request: ModelRequest) -> ModelReply:
        self.requests.append(request)
        if callable(self.meanwhile):
            await self.meanwhile()
        if self.answer is None:
            raise ModelError("model endpoint http://model.test/v1 answered 503")
        return ModelReply(self.answer, (), Usage())


def titled(store: MemoryStore, sid: UUID) -> list[str | None]:
    return [e.title for e in events(store, sid) if isinstance(e, SessionSettingsChanged)]


@pytest.mark.parametrize(
    ("text", "title"),
    [
        ("  Plan the trip to Lyon  \nwith details", "Plan the trip to Lyon"),
        ("\n\n# Heading   with   spaces", "Heading with spaces"),
        ('"Quoted title"', "Quoted title"),
        ("word " * 30, "word " * 10 + "word…"),
        ("x" * 80, "x" * 59 + "…"),
    ],
)
def test_a_title_is_the_first_line_trimmed(text: str, title: str) -> None:
    assert titles.clean_title(text) == title
    assert len(titles.clean_title(text)) <= titles.TITLE_CHARS


async def test_the_scripted_model_titles_with_the_first_line() -> None:
    title = await titles.make_title(
        ScriptedModel(), UUID(int=1), "default", "Fix the login bug\nIt fails on Safari"
    )
    assert title == "Fix the login bug"


async def test_a_real_model_is_asked_and_a_failed_call_falls_back_to_the_first_line() -> None:
    model = Answering('"Login bug on Safari."\n')
    assert await titles.make_title(model, UUID(int=1), "gpt-x", "Fix the login bug") == "Login bug on Safari."
    (request,) = model.requests
    assert (request.purpose, request.model, request.tools) == ("title", "gpt-x", [])
    assert request.messages[-1] == {"role": "user", "content": "Fix the login bug"}
    assert await titles.make_title(Answering(None), UUID(int=1), "gpt-x", "Fix it\nnow") == "Fix it"


async def name_session(uows: Any, model: Any, session_id: UUID, model_name: str, first: str) -> None:
    """What the harness does for a turn that started an untitled session: make the title,
    then record it (`muster_harness.handlers.drive`)."""
    await titles.record_made(uows, session_id, await titles.make_title(model, session_id, model_name, first))


async def test_an_untitled_session_gets_its_title_once() -> None:
    store = MemoryStore()
    sid = await session(store)
    await name_session(store.uow, ScriptedModel(), sid, "default", "Write the report\nmore")
    await name_session(store.uow, ScriptedModel(), sid, "default", "Another message")
    assert titled(store, sid) == ["Write the report"]


async def test_a_title_the_user_set_is_never_replaced_even_one_set_while_the_title_was_made() -> None:
    store = MemoryStore()
    given = await session(store, title="mine")
    await name_session(store.uow, ScriptedModel(), given, "default", "Write the report")
    assert titled(store, given) == []
    racing = await session(store)

    async def user_renames() -> None:
        await management.change_settings(store.uow, USER, str(racing), {"title": "renamed meanwhile"})

    await name_session(store.uow, Answering("Model title", user_renames), racing, "default", "Write")
    assert titled(store, racing) == ["renamed meanwhile"]


async def test_a_subagent_is_never_titled() -> None:
    store = MemoryStore()
    parent = await session(store)
    child = await session(store, session_type="SUBAGENT", parent_session_id=parent, root_session_id=parent)
    await name_session(store.uow, ScriptedModel(), child, "default", "the task")
    assert titled(store, child) == []
