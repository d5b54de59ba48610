"""The message on `muster.deltas`: one piece of an answer as the model streams it.

Ephemeral by design: published straight to Kafka by the process running the loop (never
through the event store or the outbox), fire-and-forget, and dropped under load. The
durable ASSISTANT message with the same `messageId` follows and is the truth; a delta is
only a preview of it (ADR 0039).
"""

from __future__ import annotations

import json
from typing import Any

from pydantic import BaseModel, ConfigDict, Field


class AssistantDelta(BaseModel):
    """Keyed by the session id, so the pieces of one answer stay in order."""

    model_config = ConfigDict(frozen=True, extra="ignore", populate_by_name=True)

    session_id: str = Field(alias="sessionId")
    message_id: str = Field(
        alias="messageId", description="The id the ASSISTANT message will be recorded with."
    )
    index: int = Field(ge=0, description="Counts from 0 within one message.")
    text: str
    at: float | None = Field(
        None, description="When the model gave the piece (Unix seconds): for latency figures only."
    )
    after_version: int = Field(
        0,
        alias="afterVersion",
        ge=0,
        description=(
            "The session's stream version when the model was called. Every event up to it comes "
            "before the answer (the user's message, RUNNING), so a subscriber is handed the piece "
            "only once it has those: the two topics are not ordered with each other."
        ),
    )


def encode_delta(
    session_id: str, message_id: str, index: int, text: str, at: float, after_version: int = 0
) -> bytes:
    """The record's value; built by hand, as it is sent for every piece of every answer."""
    body = {
        "sessionId": session_id,
        "messageId": message_id,
        "index": index,
        "text": text,
        "at": at,
        "afterVersion": after_version,
    }
    return json.dumps(body, separators=(",", ":"), ensure_ascii=False).encode()


def decode_delta(raw: bytes | None) -> tuple[dict[str, Any], int] | None:
    """`{messageId, index, text}` of a record (the frame's data) and its `afterVersion`, None
    when it is not a delta."""
    if not raw:
        return None
    try:
        body = json.loads(raw)
    except ValueError:
        return None
    if not isinstance(body, dict):
        return None
    message_id, index, text = body.get("messageId"), body.get("index"), body.get("text")
    if not isinstance(message_id, str) or type(index) is not int or not isinstance(text, str):
        return None
    after = body.get("afterVersion", 0)
    if type(after) is not int:
        return None
    return {"messageId": message_id, "index": index, "text": text}, after
