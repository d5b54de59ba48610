"""The deterministic scripted model (DESIGN §7), the default for local runs and tests.

It is a pure function of the request, so a step retried after a crash gets the same
answer and the same tool-call ids as the attempt that died.
"""

from __future__ import annotations

import asyncio
import functools
import hashlib
import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from muster_agent.models.base import ModelError, ModelReply, ModelRequest, ToolCall, Usage
from muster_agent.tokens import chat_tokens, estimate_tokens, message_text

SCRIPT_PREFIX = "#script"
DONE = "done"
_ECHO_LIMIT = 200


@dataclass(frozen=True)
class _Step:
    tool_calls: tuple[tuple[str, str], ...]  # (name, the arguments' text as sent)
    content: str
    delay_ms: float
    fail: str | None
    stream: tuple[int, float] | None = None  # (characters per piece, ms between pieces)


def tool_call_id(session_id: str, user_index: int, step: int, position: int, summary: str = "") -> str:
    """Stable for a retried step, unique in the session: after a compaction the user
    message's index in the request starts over, so the summary before it counts too."""
    key = f"{session_id}:{user_index}:{step}:{position}" + (f":{summary}" if summary else "")
    return "call_" + hashlib.sha1(key.encode()).hexdigest()[:24]


# Every step of a turn parses its USER message again, so the parse of the turns in flight
# is kept (the steps are frozen; a bad script raises and is not kept). Only scripts of
# this size or less: a cache of whole messages must not hold megabytes.
_KEPT_SCRIPTS = 256
_KEPT_SCRIPT_CHARS = 16_384


def parse_script(text: str) -> tuple[_Step, ...] | None:
    """The steps of a `#script` message, None when it is not a script. The whole script is
    validated up front so a mistake fails the first step, not a surprising later one."""
    return _kept_parse(text) if len(text) <= _KEPT_SCRIPT_CHARS else _parse_script(text)


@functools.lru_cache(maxsize=_KEPT_SCRIPTS)
def _kept_parse(text: str) -> tuple[_Step, ...] | None:
    return _parse_script(text)


def _parse_script(text: str) -> tuple[_Step, ...] | None:
    if not text.startswith(SCRIPT_PREFIX):
        return None
    body = text[len(SCRIPT_PREFIX) :]
    if body and not (body[0].isspace() or body[0] == "{"):
        return None  # "#scripting is fun" is prose, not a script
    try:
        data = json.loads(body)
    except json.JSONDecodeError as exc:
        raise ModelError(f"invalid #script: not valid JSON ({exc})") from None
    if not isinstance(data, dict) or not isinstance(data.get("steps"), list):
        raise ModelError('invalid #script: expected a JSON object {"steps": [...]}')
    return tuple(_parse_step(i, raw) for i, raw in enumerate(data["steps"]))


def _parse_step(index: int, raw: Any) -> _Step:
    where = f"invalid #script: step {index}"
    if not isinstance(raw, dict):
        raise ModelError(f"{where} must be a JSON object")
    raw_calls = raw.get("tool_calls")
    if raw_calls is None:
        raw_calls = []
    if not isinstance(raw_calls, list):
        raise ModelError(f"{where}: tool_calls must be a list")
    calls: list[tuple[str, str]] = []
    for i, call in enumerate(raw_calls):
        if not isinstance(call, dict):
            raise ModelError(f"{where}: tool_calls[{i}] must be a JSON object")
        name, arguments = call.get("name"), call.get("arguments", {})
        if not isinstance(name, str) or not name:
            raise ModelError(f"{where}: tool_calls[{i}].name must be a non-empty string")
        # An object is sent as json.dumps of it (keys in the order written), a string
        # verbatim, so a script can produce any text a real model might (DESIGN §7).
        if isinstance(arguments, dict):
            arguments = json.dumps(arguments)
        elif not isinstance(arguments, str):
            raise ModelError(f"{where}: tool_calls[{i}].arguments must be a JSON object or a string")
        calls.append((name, arguments))
    content = raw.get("content", "")
    if not isinstance(content, str):
        raise ModelError(f"{where}: content must be a string")
    delay = raw.get("delay_ms", 0)
    if isinstance(delay, bool) or not isinstance(delay, int | float) or delay < 0:
        raise ModelError(f"{where}: delay_ms must be a non-negative number")
    fail = raw.get("fail")
    return _Step(
        tuple(calls), content, float(delay), None if fail is None else str(fail), _stream(where, raw)
    )


def _stream(where: str, raw: dict[str, Any]) -> tuple[int, float] | None:
    """A step's `"stream": {"chunk": N, "delay_ms": M}` (DESIGN §7), validated."""
    stream = raw.get("stream")
    if stream is None:
        return None
    if not isinstance(stream, dict):
        raise ModelError(f"{where}: stream must be a JSON object")
    chunk, delay = stream.get("chunk", 1), stream.get("delay_ms", 0)
    if isinstance(chunk, bool) or not isinstance(chunk, int) or chunk < 1:
        raise ModelError(f"{where}: stream.chunk must be a positive integer")
    if isinstance(delay, bool) or not isinstance(delay, int | float) or delay < 0:
        raise ModelError(f"{where}: stream.delay_ms must be a non-negative number")
    return chunk, float(delay)


async def stream_text(
    content: str, chunk: int, delay_ms: float, on_text: Callable[[str], None] | None
) -> None:
    """Tell `on_text` the content in pieces of `chunk` characters, `delay_ms` apart: a plain
    sleep between pieces, so cancelling the turn interrupts the "stream"."""
    for start in range(0, len(content), chunk):
        if start and delay_ms:
            await asyncio.sleep(delay_ms / 1000)
        if on_text is not None:
            on_text(content[start : start + chunk])


class ScriptedModel:
    def __init__(self, summary_delay_ms: float = 0.0) -> None:
        # How long a summarisation takes (MUSTER_SCRIPT_SUMMARY_DELAY_MS), so tests can
        # stop a process in the middle of a compaction.
        self._summary_delay_s = summary_delay_ms / 1000

    async def complete(self, request: ModelRequest) -> ModelReply:
        messages = request.messages
        if request.purpose == "summary":
            if self._summary_delay_s:
                await asyncio.sleep(self._summary_delay_s)
            return _summary(messages)
        if request.purpose == "title":  # a session's title: the first line of its first message
            first = next((m for m in messages if m.get("role") == "user"), {})
            return ModelReply(message_text(first.get("content")), (), Usage())
        user_index = next(
            (i for i in range(len(messages) - 1, -1, -1) if messages[i].get("role") == "user"),
            None,
        )
        if user_index is None:
            raise ModelError("scripted model: the conversation has no user message")
        text = message_text(messages[user_index].get("content"))
        # A compaction's summary: system messages after the agent's own prompt.
        summary = "".join(
            message_text(m.get("content")) for m in messages[1:user_index] if m.get("role") == "system"
        )
        steps = parse_script(text)
        calls: tuple[ToolCall, ...] = ()
        if steps is None:
            content = f"You said: {text[:_ECHO_LIMIT]}"
        else:
            k = sum(1 for m in messages[user_index + 1 :] if m.get("role") == "assistant")
            if k >= len(steps):
                content = DONE
            else:
                step = steps[k]
                if step.delay_ms:
                    # A plain sleep, so cancelling the turn interrupts the "model call".
                    await asyncio.sleep(step.delay_ms / 1000)
                if step.fail is not None:
                    raise ModelError(step.fail)
                content = step.content
                if step.stream is not None:
                    await stream_text(content, *step.stream, request.on_text)
                calls = tuple(
                    ToolCall(tool_call_id(request.session_id, user_index, k, i, summary), name, args)
                    for i, (name, args) in enumerate(step.tool_calls)
                )
        completion = content + "".join(json.dumps(c.to_openai()) for c in calls)
        usage = Usage(chat_tokens(messages), estimate_tokens(len(completion)))
        return ModelReply(content, calls, usage)


def _summary(messages: list[dict[str, Any]]) -> ModelReply:
    """A compaction's summary, deterministic: how many messages it covers (those between
    the summarisation prompt and the closing instruction, an earlier summary included)."""
    covered = [m for m in messages[1:-1] if m.get("role") in ("user", "assistant", "tool", "system")]
    # The digest tells summaries of different messages apart (tool-call ids depend on it).
    digest = hashlib.sha1(json.dumps([message_text(m.get("content")) for m in covered]).encode()).hexdigest()
    content = f"summary of {len(covered)} messages ({digest[:8]})"
    return ModelReply(content, (), Usage(chat_tokens(messages), estimate_tokens(len(content))))
