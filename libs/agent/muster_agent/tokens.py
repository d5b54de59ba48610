"""Token counts without a tokenizer (these machines download nothing at run time): about
four characters per token, the estimate the scripted model reports too. Real providers
report exact prompt tokens per call; compaction starts from those (`compaction.py`)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any


def estimate_tokens(chars: int) -> int:
    return (chars + 3) // 4


def message_text(content: Any) -> str:
    """Text of a chat message's `content`, which may be a string, null or a list of parts."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(
            part.get("text", "")
            for part in content
            if isinstance(part, dict) and isinstance(part.get("text"), str)
        )
    return ""


def chat_tokens(messages: Iterable[Mapping[str, Any]]) -> int:
    """Estimated prompt tokens of chat-form messages (their text, as the scripted model counts)."""
    return estimate_tokens(sum(len(message_text(m.get("content"))) for m in messages))
