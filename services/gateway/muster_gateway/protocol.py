"""Client → server WebSocket frames: decoding and per-type validation.

Every failure becomes a `FrameError` carrying the contract's error code, a message that
names the offending field, and the frame's `id` whenever the JSON was an object, so a
client can match the error to the request it sent.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, ValidationError

from muster_gateway.errors import ErrorCode
from muster_gateway.validation import describe

MAX_FRAME_BYTES = 1024 * 1024  # contract: frames over 1 MiB are answered with too_large
# The transport accepts more than MAX_FRAME_BYTES so the app, not the socket, says too_large.
TRANSPORT_MAX_BYTES = 8 * 1024 * 1024


def _storable(value: str) -> str:
    # PostgreSQL text and jsonb cannot hold NUL, and UTF-8 cannot encode a lone surrogate
    # (JSON allows both as escapes): refuse them here as bad input, not later as `internal`.
    if "\x00" in value:
        raise ValueError("must not contain NUL characters")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise ValueError("must not contain unpaired surrogates") from None
    return value


# Length constraints before the validator, so they stay string constraints with their messages.
Content = Annotated[str, Field(min_length=1), AfterValidator(_storable)]
Text = Annotated[str, Field(min_length=1, max_length=200), AfterValidator(_storable)]
Title = Annotated[str, Field(max_length=500), AfterValidator(_storable)]


class _Data(BaseModel):
    # strict: "1" is not an integer and 1 is not a string; forbid: a misspelt optional field
    # (say `contnet`) would otherwise silently change the meaning of the request.
    model_config = ConfigDict(strict=True, extra="forbid", frozen=True)


PermissionLevel = Literal["auto", "ask", "read_only"]
ExecutionMode = Literal["CLOUD", "LOCAL"]
ContextMode = Literal["none", "summary", "fork"]


class CreateSessionData(_Data):
    content: Content | None = None
    title: Title | None = None
    agentType: Text | None = None
    modelId: Text | None = None
    permissionLevel: PermissionLevel | None = None
    executionMode: ExecutionMode | None = None
    clientMessageId: Text | None = None


class CreateSideSessionData(_Data):
    """A side task of the frame's `sessionId`; unnamed settings are the source's."""

    content: Content
    contextMode: ContextMode = "none"
    forkFromMessageId: Text | None = None
    title: Title | None = None
    modelId: Text | None = None
    permissionLevel: PermissionLevel | None = None
    clientMessageId: Text | None = None


class SendMessageData(_Data):
    content: Content
    clientMessageId: Text | None = None


# Event positions are PostgreSQL bigints: a larger afterPosition is bad input, not a query
# that overflows into `internal` (found by the WebSocket fuzzer).
MAX_POSITION = 2**63 - 1


class SubscribeData(_Data):
    afterPosition: Annotated[int, Field(ge=0, le=MAX_POSITION)] | None = None


Reason = Annotated[str, Field(max_length=2000), AfterValidator(_storable)]


class AnswerApprovalData(_Data):
    approvalId: Text
    decision: Literal["approve", "deny"]
    reason: Reason | None = None


class AnswerQuestionData(_Data):
    questionId: Text
    answer: Annotated[str, AfterValidator(_storable)]


class HelloData(_Data):
    """`localTools: true` declares a LOCAL client: it is sent its user's tool requests."""

    localTools: bool = False
    client: Text | None = None  # the client's name and version, for the logs


class ToolResultData(_Data):
    requestId: Text
    # The tool's outcome (`{"success": …}`), as an object or as its JSON text.
    result: dict[str, Any] | Annotated[str, AfterValidator(_storable)]


class EmptyData(_Data):
    model_config = ConfigDict(extra="ignore")


class _Envelope(BaseModel):
    model_config = ConfigDict(strict=True, extra="ignore")
    type: str
    id: str | int | None = None
    sessionId: str | None = None
    data: dict[str, Any] | None = None


@dataclass(frozen=True)
class FrameSpec:
    data: type[_Data]
    needs_session: bool


FRAME_TYPES: dict[str, FrameSpec] = {
    "create_session": FrameSpec(CreateSessionData, needs_session=False),
    "send_message": FrameSpec(SendMessageData, needs_session=True),
    "create_side_session": FrameSpec(CreateSideSessionData, needs_session=True),
    "cancel": FrameSpec(EmptyData, needs_session=True),
    "subscribe": FrameSpec(SubscribeData, needs_session=True),
    "unsubscribe": FrameSpec(EmptyData, needs_session=True),
    "ping": FrameSpec(EmptyData, needs_session=False),
    "answer_approval": FrameSpec(AnswerApprovalData, needs_session=True),
    "answer_question": FrameSpec(AnswerQuestionData, needs_session=True),
    "hello": FrameSpec(HelloData, needs_session=False),
    "tool_result": FrameSpec(ToolResultData, needs_session=True),
}


@dataclass(frozen=True)
class Frame:
    type: str
    id: str | int | None
    session_id: str | None
    data: Any  # the FrameSpec's model instance


class FrameError(Exception):
    def __init__(self, code: ErrorCode, message: str, frame_id: Any = None) -> None:
        super().__init__(message)
        self.code: ErrorCode = code
        self.message = message
        self.frame_id = frame_id


def frame_size(raw: str | bytes) -> int:
    return len(raw) if isinstance(raw, bytes) else len(raw.encode("utf-8", "surrogatepass"))


def _decode(raw: str | bytes) -> tuple[Any, Any]:
    """The parsed JSON and the `id` to echo (None unless the JSON is an object)."""
    if isinstance(raw, bytes):
        try:
            raw = raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise FrameError("bad_request", f"binary frame is not UTF-8 text: {exc.reason}") from None
    try:
        value = json.loads(raw)
    except (json.JSONDecodeError, RecursionError) as exc:
        detail = (
            f"{exc.msg} at line {exc.lineno} column {exc.colno}"
            if isinstance(exc, json.JSONDecodeError)
            else "nested too deeply"
        )
        raise FrameError("bad_request", f"malformed JSON: {detail}") from None
    return value, value.get("id") if isinstance(value, dict) else None


def parse_frame(raw: str | bytes) -> Frame:
    if frame_size(raw) > MAX_FRAME_BYTES:
        try:
            frame_id = _decode(raw)[1]
        except FrameError:
            frame_id = None
        raise FrameError("too_large", f"frame exceeds {MAX_FRAME_BYTES} bytes", frame_id)
    value, frame_id = _decode(raw)
    if not isinstance(value, dict):
        raise FrameError("bad_request", "frame must be a JSON object")
    try:
        envelope = _Envelope.model_validate(value)
    except ValidationError as exc:
        raise FrameError("bad_request", describe(exc), frame_id) from None
    spec = FRAME_TYPES.get(envelope.type)
    if spec is None:
        shown = envelope.type if len(envelope.type) <= 64 else envelope.type[:64] + "…"
        raise FrameError("unknown_type", f"unknown message type {shown!r}", frame_id)
    if spec.needs_session and envelope.sessionId is None:
        raise FrameError("bad_request", "sessionId: field required", frame_id)
    try:
        data = spec.data.model_validate(envelope.data or {})
    except ValidationError as exc:
        raise FrameError("bad_request", describe(exc, "data."), frame_id) from None
    return Frame(envelope.type, envelope.id, envelope.sessionId, data)
