"""Hypothesis strategies for hostile WebSocket frames: `raw_frames(ids)` draws
`(parsed, raw)`, the JSON value the frame holds (None when it is not JSON) and its bytes
or text as sent."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import strategies as st

MiB = 1024 * 1024
KNOWN_TYPES = ["create_session", "send_message", "cancel", "subscribe", "unsubscribe", "ping",
               "create_side_session", "answer_approval", "answer_question", "hello", "tool_result",
               "ack", "error", "pong", "message", "session_status"]
FIELDS = ["content", "title", "agentType", "modelId", "clientMessageId", "afterPosition",
          "contextMode", "approvalId", "decision", "questionId", "answer", "localTools",
          "requestId", "result", "permissionLevel", "executionMode", "forkFromMessageId"]
# Sizes around the 1 MiB contract limit and up to the 4 MiB the transport must accept.
BIG_SIZES = [MiB - 200, MiB + 1, 2 * MiB, 4 * MiB - 100]

# Every code point, lone surrogates and NUL included: json.dumps escapes what it must.
text = st.text(st.characters(codec=None, min_codepoint=0), max_size=40)
leaves = (st.none() | st.booleans() | st.integers() | st.integers(min_value=-(2**70), max_value=2**70)
          | st.floats() | text)
values = st.recursive(leaves, lambda inner: st.lists(inner, max_size=4)
                      | st.dictionaries(text, inner, max_size=4), max_leaves=12)


# Integers at the edges of the types behind the API: int32 (seq), int64 (positions), beyond.
EDGE_INTS = st.sampled_from([-1, 0, 1, 2**31 - 1, 2**31, 2**53 + 1, 2**63 - 1, 2**63, 2**64, 2**70])
WORDS = st.sampled_from(["approve", "deny", "none", "summary", "fork", "auto", "ask", "read_only", "CLOUD",
                         "LOCAL", "general", "coder", "nope", "#script {\"steps\": [{\"content\": \"ok\"}]}"])


def _data(ids: st.SearchStrategy[str]) -> st.SearchStrategy[Any]:
    field_value = st.one_of(values, ids, EDGE_INTS, EDGE_INTS, WORDS, text)
    # Mostly the protocol's own field names, so values reach the validators behind them.
    keys = st.one_of(st.sampled_from(FIELDS), st.sampled_from(FIELDS), text)
    return st.one_of(st.dictionaries(keys, field_value, max_size=5), st.dictionaries(keys, field_value, max_size=5),
                     values)


# The fields each client frame type takes (DESIGN §7), so a typed frame reaches the
# validators and handlers behind the envelope with one hostile value among valid ones.
TYPE_FIELDS = {
    "create_session": ["content", "title", "agentType", "modelId", "clientMessageId", "permissionLevel",
                       "executionMode"],
    "send_message": ["content", "clientMessageId"],
    "subscribe": ["afterPosition"],
    "cancel": [], "unsubscribe": [], "ping": [],
    "create_side_session": ["content", "contextMode", "forkFromMessageId", "title", "modelId"],
    "answer_approval": ["approvalId", "decision", "reason"],
    "answer_question": ["questionId", "answer"],
    "hello": ["localTools"],
    "tool_result": ["requestId", "result"],
}


def _typed(ids: st.SearchStrategy[str]) -> st.SearchStrategy[Any]:
    value = st.one_of(text, EDGE_INTS, WORDS, ids, values)

    @st.composite
    def build(draw: st.DrawFn) -> dict[str, Any]:
        frame_type = draw(st.sampled_from(sorted(TYPE_FIELDS)))
        fields = TYPE_FIELDS[frame_type]
        data = draw(st.fixed_dictionaries({}, optional=dict.fromkeys(fields, value)))
        return {"type": frame_type, "id": draw(text | st.integers()), "sessionId": draw(ids), "data": data}

    return build()


def _frames(ids: st.SearchStrategy[str]) -> st.SearchStrategy[Any]:
    frame = st.fixed_dictionaries(
        {},
        optional={
            # Weighted towards what the gateway handles, so most frames get past the envelope.
            "type": st.one_of(st.sampled_from(KNOWN_TYPES), st.sampled_from(KNOWN_TYPES), text, values),
            "id": text | st.integers() | EDGE_INTS | values,
            "sessionId": st.one_of(ids, ids, ids, text, values),
            "data": _data(ids),
            "position": st.integers(),
        },
    )
    # Mostly object frames, sometimes any JSON value at all (nesting past the parser's
    # limit is drawn as raw text by `_raw`: json.dumps could not write it).
    return st.one_of(_typed(ids), _typed(ids), frame, frame, values)


@st.composite
def _padded(draw: st.DrawFn, ids: st.SearchStrategy[str]) -> tuple[Any, str | bytes]:
    """A frame made big in one of its string fields: close to, over, or far over 1 MiB on
    the wire, never over 4 MiB (past the transport's limit a socket may close)."""
    size = draw(st.sampled_from(BIG_SIZES))
    char = draw(st.sampled_from(["x", "\u00e9", "\u4e2d", "\U0001f600"]))
    ascii_only = draw(st.booleans())
    unit = len(json.dumps(char, ensure_ascii=ascii_only).encode("utf-8")) - 2  # "\ud83d\ude00" is 12
    filler = char * (size // unit)
    frame: dict[str, Any] = {"type": draw(st.sampled_from(["create_session", "send_message", "ping", "teleport"])),
                             "id": "big", "sessionId": draw(ids), "data": {}}
    where = draw(st.sampled_from(["content", "title", "id", "sessionId"]))
    if where in ("content", "title"):
        frame["data"][where] = filler
    else:
        frame[where] = filler
    raw = json.dumps(frame, ensure_ascii=ascii_only)
    return frame, raw.encode("utf-8") if draw(st.booleans()) else raw


def _encoded(value: Any, draw: st.DrawFn) -> tuple[Any, str | bytes]:
    """As a text or a binary frame, escaped or raw UTF-8. A raw lone surrogate cannot be
    UTF-8: it goes out as invalid bytes, so the server cannot read the frame (or its id)."""
    raw = json.dumps(value, ensure_ascii=draw(st.booleans()))
    sendable = _sendable(raw)
    if isinstance(sendable, bytes):
        return None, sendable
    return value, raw.encode("utf-8") if draw(st.booleans()) else raw


def _sendable(raw: str) -> str | bytes:
    try:
        raw.encode("utf-8")
    except UnicodeEncodeError:
        return raw.encode("utf-8", "surrogatepass")
    return raw


@st.composite
def _raw(draw: st.DrawFn, ids: st.SearchStrategy[str]) -> tuple[Any, str | bytes]:
    kind = draw(st.sampled_from(["frame"] * 12 + ["padded", "text", "bytes", "truncated", "deep"]))
    if kind == "frame":
        return _encoded(draw(_frames(ids)), draw)
    if kind == "padded":
        return draw(_padded(ids))
    if kind == "text":
        return None, _sendable(draw(text.filter(lambda t: not _is_json(t))))
    if kind == "bytes":
        return None, draw(st.binary(max_size=64).filter(lambda b: not _is_json(b)))
    if kind == "truncated":
        whole = json.dumps(draw(_frames(ids)))
        return None, _sendable(whole[: draw(st.integers(0, max(len(whole) - 1, 0)))] + "\x00")
    depth = draw(st.sampled_from([10_000, 100_000, 400_000]))
    nested = "[" * depth + "]" * depth  # past the JSON parser's recursion limit
    if draw(st.booleans()):
        return None, nested
    return None, '{"type": "create_session", "id": "deep", "data": {"content": ' + nested + "}}"


def _is_json(raw: str | bytes) -> bool:
    try:
        json.loads(raw)
    except (ValueError, RecursionError):
        return False
    return True


def raw_frames(ids: st.SearchStrategy[str]) -> st.SearchStrategy[tuple[Any, str | bytes]]:
    return _raw(ids)
