"""Assembling a streamed chat completion (SSE chunks) into one `ModelReply` (ADR 0039).

The chunks of OpenAI, vLLM, llama.cpp and Ollama differ in small ways, all handled here:

- text comes as `delta.content` pieces (the first often empty, with `role` only);
- a tool call starts with a delta that has its `id` and `function.name` and goes on with
  deltas of the same `index` that carry more of `function.arguments`: parallel calls
  interleave by `index`. Some servers send a whole call in one delta, give every call of a
  round index 0 (a new `id` then starts a new call), or omit `index` (continuing the
  latest call). The arguments' text is concatenated exactly as sent: it is recorded and
  sent back byte for byte (ADR 0028);
- usage comes in a last chunk with no choices (`stream_options.include_usage`), or with
  the finish chunk, or on every chunk (the last one counts);
- `finish_reason` is `stop`, `tool_calls` (Ollama says `stop` for calls too), `length`,
  `content_filter` or `function_call`; a stream that ends with none was cut off.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from muster_agent.models.base import ModelError, ModelReply, ToolCall, Usage, storable


@dataclass
class _Call:
    index: int | None
    id: str | None
    name: str = ""
    arguments: list[str] = field(default_factory=list)


class ReplyAssembler:
    def __init__(self, on_text: Callable[[str], None] | None = None) -> None:
        self._on_text = on_text
        self._text: list[str] = []
        self._calls: list[_Call] = []
        self._by_index: dict[int, _Call] = {}
        self.usage: Usage | None = None
        self.finish_reasons: list[str] = []

    def add(self, chunk: Any) -> None:
        """One chunk, as the SDK parsed it (a `ChatCompletionChunk`)."""
        usage = getattr(chunk, "usage", None)
        if usage is not None:
            self.usage = Usage(usage.prompt_tokens or 0, usage.completion_tokens or 0)
        for choice in getattr(chunk, "choices", None) or ():
            if getattr(choice, "index", 0) not in (0, None):
                continue  # only the first choice is asked for
            delta = choice.delta
            if delta is not None:
                if delta.content:
                    self._text.append(delta.content)
                    if self._on_text is not None:
                        # A preview is published as JSON: a lone surrogate would fail it.
                        self._on_text(storable(delta.content))
                for call in delta.tool_calls or ():
                    self._add_call(call)
            if choice.finish_reason:
                self.finish_reasons.append(choice.finish_reason)

    def _add_call(self, delta: Any) -> None:
        index, call_id = getattr(delta, "index", None), getattr(delta, "id", None)
        function = getattr(delta, "function", None)
        if index is not None:
            current = self._by_index.get(index)
        else:
            current = self._calls[-1] if self._calls else None
        if current is None or (call_id and current.id and call_id != current.id):
            current = _Call(index, call_id)
            self._calls.append(current)
            if index is not None:
                self._by_index[index] = current
        elif call_id and not current.id:
            current.id = call_id
        if function is not None:
            if function.name and not current.name:  # some servers repeat it on every delta
                current.name = function.name
            if function.arguments:
                current.arguments.append(function.arguments)

    def reply(self) -> ModelReply:
        if not self.finish_reasons:
            raise ModelError("the model's stream ended before its answer was complete")
        calls = []
        for call in self._calls:
            if not call.name:
                raise ModelError("the model streamed a tool call without a name")
            arguments = "".join(call.arguments) or "{}"
            calls.append(ToolCall(call.id or f"call_{uuid.uuid4().hex[:24]}", call.name, arguments))
        if calls and "length" in self.finish_reasons:
            raise ModelError("the model hit its output length limit in the middle of a tool call")
        return ModelReply("".join(self._text), tuple(calls), self.usage or Usage())
