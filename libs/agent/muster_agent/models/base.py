"""The model-provider contract shared by the harness, the worker and every provider.

Messages stay plain OpenAI chat-format dicts rather than typed objects: that is the shape
the event store records, the API exposes and the chat-completions API consumes, so no
conversion layer can drift between them.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any, Protocol

# A code point in the surrogate range left alone in a str: JSON text may carry one
# ("\udc00"), but neither UTF-8 nor PostgreSQL's jsonb can hold it.
_LONE_SURROGATE = re.compile("[\ud800-\udfff]")


class ModelError(Exception):
    """The model call failed. The message is safe to show to users and to log: providers
    must never put keys, tokens or prompt content into it."""


@dataclass(frozen=True)
class ToolCall:
    id: str
    name: str
    arguments: str  # the exact text the model produced (muster_contracts.tool_arguments)

    def to_openai(self) -> dict[str, Any]:
        """The OpenAI wire form; `arguments` goes back verbatim."""
        function = {"name": self.name, "arguments": self.arguments}
        return {"id": self.id, "type": "function", "function": function}


@dataclass(frozen=True)
class Usage:
    prompt_tokens: int = 0
    completion_tokens: int = 0

    @property
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens

    def __add__(self, other: Usage) -> Usage:
        # Executions report the sum over their rounds.
        return Usage(
            self.prompt_tokens + other.prompt_tokens,
            self.completion_tokens + other.completion_tokens,
        )

    def to_dict(self) -> dict[str, int]:
        """The snake_case shape of the delegate result (DESIGN §4)."""
        return {
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens,
            "total_tokens": self.total_tokens,
        }


@dataclass(frozen=True)
class ModelReply:
    content: str
    tool_calls: tuple[ToolCall, ...]
    usage: Usage

    def to_message(self) -> dict[str, Any]:
        """The ASSISTANT message to record; `tool_calls` is omitted when empty because
        some OpenAI-compatible servers reject an empty list."""
        message: dict[str, Any] = {"role": "assistant", "content": self.content}
        if self.tool_calls:
            message["tool_calls"] = [call.to_openai() for call in self.tool_calls]
        return message

    def storable(self) -> ModelReply:
        """The reply with every lone surrogate of its text replaced (`storable`): what a
        provider hands back, so one odd character cannot fail the turn's record."""
        calls = tuple(
            replace(call, name=storable(call.name), arguments=storable(call.arguments))
            for call in self.tool_calls
        )
        return replace(self, content=storable(self.content), tool_calls=calls)


def storable(text: str) -> str:
    """`text` with each lone surrogate replaced by U+FFFD (the replacement character), as a
    decoder does with bytes it cannot read. Two halves of a pair that came apart (a streamed
    answer's pieces, each JSON of its own) are joined into their character again."""
    if _LONE_SURROGATE.search(text) is None:
        return text
    return text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "replace")


@dataclass(frozen=True)
class ModelRequest:
    session_id: str
    model: str
    messages: list[dict[str, Any]]
    tools: list[dict[str, Any]]
    # "turn": the next step of the conversation; "summary": summarise the messages given
    # (compaction), whose answer becomes the summary, never a message; "title": name the
    # conversation its user message starts (`titles`), whose answer becomes its title.
    purpose: str = "turn"
    # Told each piece of the answer's text as the model streams it (ADR 0039); a provider
    # that cannot stream never calls it. It must not block: it only queues a preview.
    on_text: Callable[[str], None] | None = field(default=None, compare=False, repr=False)


class ModelProvider(Protocol):
    async def complete(self, request: ModelRequest) -> ModelReply:
        """Answer one turn. Raises ModelError; cancellation must interrupt the call."""
        ...
