"""REST routes of side tasks and session management (§7): listings, search, settings,
archive, delete, promote, read, and the model context of a session."""

from __future__ import annotations

from functools import cache
from pathlib import Path
from typing import Annotated, Any

from fastapi import APIRouter, Query, Response
from muster_agent.agents import AgentRegistry, UnknownAgentType
from muster_agent.context import model_messages
from muster_agent.session_store import read_state
from muster_agent.tools.schemas import tool_schemas

from muster_gateway import management, schemas
from muster_gateway import tree_schemas as ts
from muster_gateway.errors import GatewayError, not_found
from muster_gateway.rest import _ERRORS, GW, User

router = APIRouter()
_MANAGE_ERRORS: dict[int | str, dict[str, Any]] = {**_ERRORS, 409: {"model": schemas.ErrorBody}}


@cache
def _agents(path: Path | None) -> AgentRegistry:
    # The same definitions as the harness (MUSTER_AGENTS_FILE, else the built-in ones).
    return AgentRegistry.load(path)


@router.get("/v1/sessions/{session_id}/side-tasks", response_model=ts.SideTaskList, responses=_ERRORS)
async def side_tasks(gw: GW, user: User, session_id: str, recursive: bool = False) -> dict[str, Any]:
    """Direct SIDE_TASK children, or with `recursive=1` every SIDE_TASK descendant, flat,
    newest `updatedAt` first; archived subtrees and deleted sessions' subtrees left out."""
    return {"items": await gw.reads.side_tasks(user, session_id, recursive)}


@router.get("/v1/search", response_model=ts.SearchResults, responses=_ERRORS)
async def search(
    gw: GW,
    user: User,
    q: Annotated[str, Query(min_length=1, max_length=500)],
    limit: Annotated[int, Query(ge=1, le=200)] = 20,
) -> dict[str, Any]:
    """Full-text search over the USER messages of this user's NORMAL and SIDE_TASK sessions."""
    if "\x00" in q:
        raise GatewayError("bad_request", "q: must not contain NUL characters")
    return {"items": await gw.reads.search(user, q, limit)}


@router.patch(
    "/v1/sessions/{session_id}",
    response_model=schemas.Session,
    response_model_exclude_unset=True,
    responses=_MANAGE_ERRORS,
)
async def patch_session(
    gw: GW, user: User, session_id: str, body: ts.SessionPatch | None = None
) -> dict[str, Any]:
    # Without a valid token the error handlers answer unauthorized whatever the body.
    body = body or ts.SessionPatch()
    changes = {"title": body.title, "model_id": body.modelId, "permission_level": body.permissionLevel}
    await management.change_settings(gw.uows, user, session_id, changes)
    return await gw.reads.session(user, session_id)


@router.delete("/v1/sessions/{session_id}", status_code=204, responses=_MANAGE_ERRORS)
async def delete_session(gw: GW, user: User, session_id: str) -> Response:
    """That session only (a running turn is cancelled first); it answers not_found after."""
    await management.delete(gw.uows, user, session_id)
    return Response(status_code=204)


@router.post(
    "/v1/sessions/{session_id}/archive",
    response_model=schemas.Session,
    response_model_exclude_unset=True,
    responses=_MANAGE_ERRORS,
)
async def archive(gw: GW, user: User, session_id: str) -> dict[str, Any]:
    await management.set_archived(gw.uows, user, session_id, True)
    return await gw.reads.session(user, session_id)


@router.post(
    "/v1/sessions/{session_id}/unarchive",
    response_model=schemas.Session,
    response_model_exclude_unset=True,
    responses=_MANAGE_ERRORS,
)
async def unarchive(gw: GW, user: User, session_id: str) -> dict[str, Any]:
    await management.set_archived(gw.uows, user, session_id, False)
    return await gw.reads.session(user, session_id)


@router.post(
    "/v1/sessions/{session_id}/promote",
    response_model=schemas.Session,
    response_model_exclude_unset=True,
    responses=_MANAGE_ERRORS,
)
async def promote(gw: GW, user: User, session_id: str) -> dict[str, Any]:
    """A side task becomes a NORMAL session, root of its own tree with its descendants."""
    await management.promote(gw.uows, user, session_id)
    return await gw.reads.session(user, session_id)


@router.post(
    "/v1/sessions/{session_id}/read",
    response_model=schemas.Session,
    response_model_exclude_unset=True,
    responses=_MANAGE_ERRORS,
)
async def mark_read(gw: GW, user: User, session_id: str) -> dict[str, Any]:
    await management.mark_read(gw.uows, user, session_id)
    return await gw.reads.session(user, session_id)


@router.get("/v1/sessions/{session_id}/context", response_model=ts.ModelContext, responses=_ERRORS)
async def context(gw: GW, user: User, session_id: str) -> dict[str, Any]:
    """Exactly what the next model call of this session sends (the loop's own function)."""
    sid = await gw.reads.owned_session_id(user, session_id)
    state = await read_state(gw.uows, sid)
    if state is None:
        raise not_found()
    try:
        agent = _agents(gw.settings.agents_file).get(state.agent_type)
    except UnknownAgentType:
        raise GatewayError("conflict", f"unknown agent type {state.agent_type!r}") from None
    system, *messages = model_messages(agent, state)
    tools = tool_schemas(agent.tools_for(state.session_type))
    if gw.mcp is not None:
        tools += await gw.mcp.schemas(agent)
    return {"system": system["content"], "messages": messages, "tools": tools}
