"""The asyncpg json/jsonb codecs (orjson) read and write what `json` did."""

from __future__ import annotations

import json
from typing import Any

import pytest
from muster_runtime.process.db import _decode_jsonb, _encode_jsonb, decode_json, json_bytes

VALUES: list[Any] = [
    {"a": 1, "b": [1.5, -0.0, 1e16, 0.1, None, True], "nested": {"x": "y"}},
    {"unicode": "héllo — 世界 \u2028", "escapes": 'quote" back\\ nl\n tab\t'},
    {1: "int key", "s": "str key"},
    [2**63, -(2**63), 2**64 - 1],
    [2**70, -(2**80)],  # beyond 64 bits: orjson refuses, `json` encodes exactly
    ("tuple", 1),
    "plain string",
    12,
]


@pytest.mark.parametrize("value", VALUES)
def test_encoding_means_what_json_dumps_meant(value: Any) -> None:
    assert json.loads(json_bytes(value)) == json.loads(json.dumps(value))


TEXTS = [
    '{"a": 1, "b": [1.5, -0.0, 1e16, 0.1, null, true]}',
    '{"id": 123456789012345678901234567890, "f": 1.0}',  # exact, not a float
    "[-9223372036854775809, 18446744073709551616]",
    '{"digits": "12345678901234567890"}',
    "[1e400]",  # jsonb numerics are unbounded; `json` reads inf
    '"h\\u00e9llo \\ud83d\\ude00"',
    '{"a": 1, "a": 2}',
]


@pytest.mark.parametrize("text", TEXTS)
def test_decoding_reads_what_json_loads_read(text: str) -> None:
    decoded = decode_json(text.encode())
    expected = json.loads(text)
    assert decoded == expected == decode_json(text)
    assert json.dumps(decoded) == json.dumps(expected)  # same types (int stays int)


def test_unencodable_values_still_fail_as_before() -> None:
    from decimal import Decimal

    with pytest.raises(TypeError):
        json_bytes({"d": Decimal("1.5")})


@pytest.mark.parametrize("value", VALUES[:4])
def test_jsonb_binary_format_round_trips(value: Any) -> None:
    data = _encode_jsonb(value)
    assert data[:1] == b"\x01"  # the format version PostgreSQL writes and expects
    assert _decode_jsonb(data) == json.loads(json.dumps(value))


def test_an_unknown_jsonb_format_version_is_refused() -> None:
    with pytest.raises(ValueError, match="version"):
        _decode_jsonb(b"\x02{}")
