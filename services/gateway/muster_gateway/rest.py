"""REST reads (§7). Every route but /healthz, /metrics and the specs needs a bearer token;
every error, FastAPI's own included, is `{"error": {"code", "message"}}`."""

from __future__ import annotations

import logging
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Depends, FastAPI, Query, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from starlette.exceptions import HTTPException

from muster_gateway import commands, schemas
from muster_gateway.auth import bearer_token
from muster_gateway.context import Gateway, gateway_of
from muster_gateway.errors import GatewayError, rest_body, retry_after_header
from muster_gateway.validation import describe_errors

log = logging.getLogger("muster.gateway.rest")

router = APIRouter()
UNAUTHORIZED = "missing or invalid bearer token"
_ERRORS: dict[int | str, dict[str, Any]] = {
    status: {"model": schemas.ErrorBody} for status in (400, 401, 404, 500)
}


def _gateway(request: Request) -> Gateway:
    return gateway_of(request.app)


def _user_or_none(request: Request) -> str | None:
    return gateway_of(request.app).auth.user_for(bearer_token(request.headers.get("authorization")))


def _anonymous_api_call(request: Request) -> bool:
    return request.url.path.startswith("/v1/") and _user_or_none(request) is None


def _user(request: Request) -> str:
    user = _user_or_none(request)
    if user is None:
        raise GatewayError("unauthorized", UNAUTHORIZED)
    return user


GW = Annotated[Gateway, Depends(_gateway)]
User = Annotated[str, Depends(_user)]
SessionType = Literal["NORMAL", "SIDE_TASK", "SUBAGENT"]


@router.get(
    "/v1/sessions", response_model=schemas.SessionList, responses=_ERRORS, response_model_exclude_unset=True
)
async def list_sessions(
    gw: GW,
    user: User,
    session_type: Annotated[SessionType, Query(alias="type")] = "NORMAL",
    limit: Annotated[int, Query(ge=1, le=1000)] = 100,
) -> dict[str, Any]:
    """This user's sessions of one type, newest first."""
    return {"items": await gw.reads.sessions(user, session_type, limit)}


@router.get(
    "/v1/sessions/{session_id}",
    response_model=schemas.Session,
    responses=_ERRORS,
    response_model_exclude_unset=True,
)
async def get_session(gw: GW, user: User, session_id: str) -> dict[str, Any]:
    return await gw.reads.session(user, session_id)


@router.get(
    "/v1/sessions/{session_id}/messages",
    response_model=schemas.MessagePage,
    responses=_ERRORS,
    response_model_exclude_unset=True,
)
async def list_messages(
    gw: GW,
    user: User,
    session_id: str,
    rounds: Annotated[int, Query(ge=1, le=1000)] = 20,
    before_seq: Annotated[int | None, Query(alias="beforeSeq", ge=1, le=2**31 - 1)] = None,
    include_discarded: Annotated[bool, Query(alias="includeDiscarded")] = False,
) -> dict[str, Any]:
    """The newest `rounds` rounds before `beforeSeq`, ascending; follow `nextBeforeSeq`."""
    return await gw.reads.messages(
        user, session_id, rounds=rounds, before_seq=before_seq, include_discarded=include_discarded
    )


@router.get(
    "/v1/sessions/{session_id}/rounds/{message_id}/file-changes",
    response_model=schemas.TurnFileChanges,
    responses=_ERRORS,
)
async def round_file_changes(gw: GW, user: User, session_id: str, message_id: str) -> dict[str, Any]:
    """The file changes of the turn holding `message_id` (any message of it: a turn is a
    USER message and everything up to the next one), made by this session and by the
    subagents it delegated to, merged by path."""
    return await gw.reads.round_file_changes(user, session_id, message_id)


@router.get(
    "/v1/sessions/{session_id}/executions",
    response_model=schemas.ExecutionList,
    responses=_ERRORS,
    response_model_exclude_unset=True,
)
async def list_executions(
    gw: GW,
    user: User,
    session_id: str,
    role: Literal["parent", "child"] = "parent",
) -> dict[str, Any]:
    """Executions this session delegated (`parent`, oldest first) or ran as the child
    session of (`child`, one per delegate / follow-up round)."""
    return {"items": await gw.reads.executions(user, session_id, role)}


@router.post(
    "/v1/sessions/{session_id}/compact",
    status_code=202,
    response_model=schemas.CompactionAccepted,
    responses={**_ERRORS, 409: {"model": schemas.ErrorBody}, 429: {"model": schemas.ErrorBody}},
)
async def compact_session(gw: GW, user: User, session_id: str) -> dict[str, Any]:
    """Compact an idle session now: every turn but the latest is summarised by the
    session's model (`compaction_recorded` follows on its stream). `conflict` while a turn
    runs; messages stay stored, only the model's context shrinks."""
    gw.admission.rates.admit(user)  # a compaction is work: it counts as a message
    return await commands.request_compaction(gw.uows, user, session_id)


@router.get("/healthz", response_model=schemas.Health, responses={503: {"model": schemas.Health}})
async def healthz(request: Request) -> Response:
    found = getattr(request.app.state, "gateway", None)
    if found is not None and await found.reads.healthy():
        return JSONResponse({"status": "ok"})
    return JSONResponse({"status": "unavailable"}, status_code=503)


def _error(code: str, message: str, status: int, **headers: str) -> JSONResponse:
    return JSONResponse(rest_body(code, message), status_code=status, headers=headers or None)


def install_error_handlers(app: FastAPI) -> None:
    async def gateway_error(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, GatewayError)
        _count(request, exc.code)
        if exc.code == "unauthorized":
            return _error(exc.code, exc.message, exc.status, **{"WWW-Authenticate": "Bearer"})
        if exc.retry_after_ms is not None:
            body = rest_body(exc.code, exc.message, exc.retry_after_ms)
            headers = {"Retry-After": retry_after_header(exc.retry_after_ms)}
            return JSONResponse(body, status_code=exc.status, headers=headers)
        return _error(exc.code, exc.message, exc.status)

    async def validation_error(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, RequestValidationError)
        # A body is parsed before the route's dependencies run: without a valid token the
        # answer is still `unauthorized`, whatever the body (nothing about it is revealed).
        if _anonymous_api_call(request):
            return await gateway_error(request, GatewayError("unauthorized", UNAUTHORIZED))
        _count(request, "bad_request")
        return _error("bad_request", describe_errors(exc.errors(), skip=1), 400)

    async def http_error(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, HTTPException)
        if exc.status_code in (400, 422) and _anonymous_api_call(request):
            # A body that cannot even be read: still `unauthorized` first (see above).
            return await gateway_error(request, GatewayError("unauthorized", UNAUTHORIZED))
        code = {401: "unauthorized", 404: "not_found"}.get(exc.status_code)
        code = code or ("internal" if exc.status_code >= 500 else "bad_request")
        _count(request, code)
        return _error(code, str(exc.detail).lower(), exc.status_code)

    async def unexpected(request: Request, exc: Exception) -> Response:
        log.error("rest_request_failed path=%s error=%s", request.url.path, type(exc).__name__, exc_info=exc)
        _count(request, "internal")
        return _error("internal", "internal error", 500)

    app.add_exception_handler(GatewayError, gateway_error)
    app.add_exception_handler(RequestValidationError, validation_error)
    app.add_exception_handler(HTTPException, http_error)
    app.add_exception_handler(Exception, unexpected)


def _count(request: Request, code: str) -> None:
    metrics = getattr(request.app.state, "metrics", None)
    if metrics is not None:
        metrics.errors.labels(code).inc()
