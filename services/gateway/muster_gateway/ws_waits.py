"""WebSocket frames that end a wait (`answer_approval`, `answer_question`, `tool_result`)
and declare a LOCAL client (`hello`). The decisions are `muster_agent.answers`'."""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from functools import partial
from typing import Any, Protocol
from uuid import UUID

from muster_agent import answers

from muster_gateway.context import Gateway
from muster_gateway.errors import GatewayError
from muster_gateway.ids import parse_session_id
from muster_gateway.protocol import Frame


class WaitClient(Protocol):
    user_id: str

    def push(self, frame: dict[str, Any]) -> bool: ...

    def reply(self, frame_type: str, frame_id: Any, data: dict[str, Any] | None) -> None: ...


def _wait_id(raw: str, name: str) -> UUID:
    try:
        return UUID(raw)
    except ValueError:
        raise GatewayError("not_found", f"{name} {raw[:64]!r} not found") from None


async def _answered(decide: Callable[[], Awaitable[dict[str, Any]]]) -> dict[str, Any]:
    try:
        return await decide()
    except answers.AnswerRefused as refused:
        raise GatewayError(refused.code, refused.message) from None


async def answer_approval(gw: Gateway, client: WaitClient, frame: Frame) -> None:
    assert frame.session_id is not None
    data = frame.data
    ack = await _answered(
        partial(
            answers.answer_approval,
            gw.uows,
            client.user_id,
            parse_session_id(frame.session_id),
            _wait_id(data.approvalId, "approval"),
            data.decision,
            data.reason,
        )
    )
    client.reply("ack", frame.id, ack)


async def answer_question(gw: Gateway, client: WaitClient, frame: Frame) -> None:
    assert frame.session_id is not None
    ack = await _answered(
        partial(
            answers.answer_question,
            gw.uows,
            client.user_id,
            parse_session_id(frame.session_id),
            _wait_id(frame.data.questionId, "question"),
            frame.data.answer,
        )
    )
    client.reply("ack", frame.id, ack)


async def tool_result(gw: Gateway, client: WaitClient, frame: Frame) -> None:
    assert frame.session_id is not None
    result = frame.data.result
    content = result if isinstance(result, str) else json.dumps(result)
    ack = await _answered(
        partial(
            answers.answer_tool_request,
            gw.uows,
            client.user_id,
            parse_session_id(frame.session_id),
            _wait_id(frame.data.requestId, "tool request"),
            content,
        )
    )
    client.reply("ack", frame.id, ack)


async def hello(gw: Gateway, client: WaitClient, frame: Frame) -> None:
    """The ack comes first, then every outstanding tool request of the user."""
    client.reply("ack", frame.id, {"localTools": frame.data.localTools})
    if frame.data.localTools:
        await gw.local.attach(client)
