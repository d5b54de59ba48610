"""asyncpg connection pools, created in a service's lifespan, never at import time."""

from __future__ import annotations

import json
from typing import Any, TypeAlias

import asyncpg
import orjson

Pool: TypeAlias = asyncpg.Pool
Connection: TypeAlias = asyncpg.Connection
UniqueViolation = asyncpg.UniqueViolationError


# orjson reads integers beyond 64 bits as floats (losing digits) where `json` keeps them
# exact: a text with 19 or more digits in a row is read by `json`. Found by mapping every
# digit to "0" and everything else to " " (C speed; a regex took ten times as long).
_DIGITS_AS_ZEROS = bytes(0x30 if 0x30 <= b <= 0x39 else 0x20 for b in range(256))
_LONG_NUMBER = b"0" * 19
# jsonb's binary format is a version byte, then the JSON text; json's is the text.
_JSONB_VERSION = b"\x01"


def json_bytes(value: Any) -> bytes:
    """Compact UTF-8 JSON: orjson, or `json` for what orjson refuses (integers beyond 64
    bits, unknown types), so nothing that encoded before fails now. The text is compact
    UTF-8 where `json.dumps` spaced and escaped; the value is the same. NaN/Infinity, which
    PostgreSQL rejects, become null. For Kafka records too (frames keep `json`, see ws.py)."""
    try:
        return orjson.dumps(value, option=orjson.OPT_NON_STR_KEYS)
    except TypeError:
        return json.dumps(value).encode()


def decode_json(text: str | bytes) -> Any:
    """The value of a json/jsonb column, as `json.loads` would read it."""
    if isinstance(text, str):
        text = text.encode()
    if _LONG_NUMBER not in text.translate(_DIGITS_AS_ZEROS):
        try:
            return orjson.loads(text)
        except orjson.JSONDecodeError:
            pass  # e.g. a number beyond a double's range, which `json` reads as inf
    return json.loads(text)


def _encode_jsonb(value: Any) -> bytes:
    return _JSONB_VERSION + json_bytes(value)


def _decode_jsonb(data: bytes) -> Any:
    if data[:1] != _JSONB_VERSION:
        raise ValueError(f"unknown jsonb binary format version {data[:1]!r}")
    return decode_json(data[1:])


async def _init_connection(conn: asyncpg.Connection) -> None:
    # Binary, not text: a row of a table with json columns (a composite, as
    # `muster_lock_session` returns) can only be decoded when every column's codec is binary.
    await conn.set_type_codec(
        "json", encoder=json_bytes, decoder=decode_json, schema="pg_catalog", format="binary"
    )
    await conn.set_type_codec(
        "jsonb", encoder=_encode_jsonb, decoder=_decode_jsonb, schema="pg_catalog", format="binary"
    )


async def _keep_session_state(conn: asyncpg.Connection) -> None:
    """Pooled connections hold no session state (LISTEN and session locks live on their own
    connections), so skip asyncpg's default reset: it costs a round trip per release."""


async def create_pool(database_url: str, *, min_size: int = 2, max_size: int = 10) -> Pool:
    pool: Pool = await asyncpg.create_pool(
        database_url,
        min_size=min_size,
        max_size=max_size,
        init=_init_connection,
        reset=_keep_session_state,
    )
    return pool
