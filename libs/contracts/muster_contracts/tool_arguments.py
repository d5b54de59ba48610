"""A tool call's arguments: the exact text the model produced, and what it means.

The text is the record (DESIGN §7): frames, REST, `muster.events` and the next model
request all carry it byte for byte, so a client sees the same frame live and on replay and
a provider's prompt cache keeps hitting. The parsed object is derived from it on demand,
for the tools, validation and the frames whose contract shows an object.

Events written before `MessageRecorded` v3 (and the wait events' v2) stored the parsed
object; its text is `json.dumps` of the object as stored — what every reader showed then.
"""

from __future__ import annotations

import json
from typing import Any


def arguments_text(value: object) -> str:
    """The arguments' text: verbatim when already text, else the text of a stored object."""
    return value if isinstance(value, str) else json.dumps(value)


def with_text_arguments(calls: list[dict[str, Any]] | None) -> list[dict[str, Any]] | None:
    """Stored tool calls `{id, name, arguments}` with `arguments` as text (rows projected
    from events before MessageRecorded v3 hold the parsed object)."""
    if not calls:
        return calls
    return [{**call, "arguments": arguments_text(call["arguments"])} for call in calls]


def parsed_arguments(text: str) -> dict[str, Any] | None:
    """The JSON object `text` holds, keys in the order written; `{}` for empty text (some
    servers send "" for a call without arguments); None when it is not a JSON object."""
    if not text.strip():
        return {}
    try:
        value = json.loads(text)
    except json.JSONDecodeError:
        return None
    return value if isinstance(value, dict) else None


def shown_arguments(text: str) -> Any:
    """The arguments as an object for frames whose contract shows one (approvals, LOCAL
    tool requests), parsed from the text so live and replay agree key for key; text that is
    no JSON object is shown as `{"_raw": text}`."""
    parsed = parsed_arguments(text)
    return {"_raw": text} if parsed is None else parsed
