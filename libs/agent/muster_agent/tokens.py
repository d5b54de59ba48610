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
    """Estimated prompt tokens of chat-form messages (their text, as the scripted model counts).
    The scripted model counts its whole request at every step: plain text, nearly every
    message's, is measured without a call."""
    chars = 0
    for message in messages:
        content = message.get("content")
        chars += len(content) if content.__class__ is str else len(message_text(content))
    return estimate_tokens(chars)
