"""A session's message history as the model sees it, and what its tail still owes."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any
from uuid import UUID


@dataclass(frozen=True)
class StoredMessage:
    message_id: UUID
    seq: int
    role: str
    content: str
    tool_calls: list[dict[str, Any]] | None
    tool_call_id: str | None
    usage: dict[str, int] | None = None  # ASSISTANT messages: what their model call reported


def to_chat(messages: list[StoredMessage]) -> list[dict[str, Any]]:
    """OpenAI chat-format messages (without the system prompt)."""
    chat: list[dict[str, Any]] = []
    for m in messages:
        if m.role == "USER":
            chat.append({"role": "user", "content": m.content})
        elif m.role == "TOOL":
            chat.append({"role": "tool", "tool_call_id": m.tool_call_id, "content": m.content})
        else:
            item: dict[str, Any] = {"role": "assistant", "content": m.content}
            if m.tool_calls:
                item["tool_calls"] = [
                    {
                        "id": call["id"],
                        "type": "function",
                        # The model's own text, byte for byte (a provider's prompt cache
                        # needs the prefix unchanged).
                        "function": {"name": call["name"], "arguments": call["arguments"]},
                    }
                    for call in m.tool_calls
                ]
            chat.append(item)
    return chat


def last_tool_round(messages: list[StoredMessage]) -> StoredMessage | None:
    """The newest ASSISTANT message if it carries tool calls, else None."""
    for m in reversed(messages):
        if m.role == "ASSISTANT":
            return m if m.tool_calls else None
        if m.role == "USER":
            return None
    return None


def pending_tool_calls(messages: list[StoredMessage]) -> list[dict[str, Any]]:
    """Tool calls of the newest tool round that have no TOOL result yet, in call order."""
    round_ = last_tool_round(messages)
    if round_ is None or not round_.tool_calls:
        return []
    answered: set[str | None] = set()
    for m in reversed(messages):  # only the round's tail: O(round), not O(history)
        if m.seq <= round_.seq:
            break
        if m.role == "TOOL":
            answered.add(m.tool_call_id)
    return [call for call in round_.tool_calls if call["id"] not in answered]


def turn_finished(messages: list[StoredMessage]) -> bool:
    """True when the newest message is an ASSISTANT answer without tool calls."""
    return bool(messages) and messages[-1].role == "ASSISTANT" and not messages[-1].tool_calls


def incomplete_tail(
    messages: list[StoredMessage], started: frozenset[str], delegations: frozenset[str]
) -> list[StoredMessage]:
    """What a crash left half-written at the end of the history, to discard before resuming:
    TOOL messages answering no call of the round they follow (orphans), and a tool round
    cut off mid-way (some call started but never answered). A round holding a delegation
    is never discarded — the barrier completes it, and discarding it would let the model
    delegate again. Calls never started are not a crash tail: they simply run next."""
    tail: list[StoredMessage] = []
    calls: set[str | None] = set()
    for m in messages:
        if m.role == "ASSISTANT":
            calls = {call["id"] for call in m.tool_calls or ()}
        elif m.role == "USER":
            calls = set()
        elif m.tool_call_id in calls:
            calls.discard(m.tool_call_id)  # answered: a second answer would be an orphan
        else:
            tail.append(m)
    round_ = last_tool_round(messages)
    if round_ is None or any(call["name"] in delegations for call in round_.tool_calls or ()):
        return tail
    pending = pending_tool_calls(messages)
    if not any(call["id"] in started for call in pending):
        return tail
    cut = [m for m in messages if m.seq >= round_.seq and m not in tail]
    return tail + cut
