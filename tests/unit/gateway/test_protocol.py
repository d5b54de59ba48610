from __future__ import annotations

import json

import pytest
from muster_gateway.protocol import (
    MAX_FRAME_BYTES,
    CreateSessionData,
    FrameError,
    SendMessageData,
    SubscribeData,
    parse_frame,
)


def error_of(raw: str | bytes) -> FrameError:
    with pytest.raises(FrameError) as info:
        parse_frame(raw)
    return info.value


def test_valid_frames_parse_into_typed_data() -> None:
    frame = parse_frame(json.dumps({
        "type": "send_message", "id": "r1", "sessionId": "s",
        "data": {"content": "hello", "clientMessageId": "c1"},
    }))
    assert frame.type == "send_message" and frame.id == "r1" and frame.session_id == "s"
    assert frame.data == SendMessageData(content="hello", clientMessageId="c1")
    assert parse_frame('{"type": "create_session"}').data == CreateSessionData()
    sub = parse_frame('{"type": "subscribe", "sessionId": "s", "data": {"afterPosition": 7}}')
    assert sub.data == SubscribeData(afterPosition=7)
    top = parse_frame('{"type": "subscribe", "sessionId": "s", "data": {"afterPosition": 9223372036854775807}}')
    assert top.data == SubscribeData(afterPosition=2**63 - 1)
    assert parse_frame('{"type": "ping", "id": 3}').id == 3


def test_malformed_json_is_bad_request() -> None:
    err = error_of("{nope")
    assert err.code == "bad_request" and err.message.startswith("malformed JSON: ")
    assert err.frame_id is None


@pytest.mark.parametrize("raw", ["[1, 2]", '"text"', "42", "null"])
def test_non_object_is_bad_request(raw: str) -> None:
    err = error_of(raw)
    assert (err.code, err.message) == ("bad_request", "frame must be a JSON object")


def test_missing_type_names_the_field_and_echoes_id() -> None:
    err = error_of('{"id": "x1"}')
    assert (err.code, err.message, err.frame_id) == ("bad_request", "type: field required", "x1")


def test_unknown_type() -> None:
    err = error_of('{"type": "xyz", "id": 9}')
    assert err.code == "unknown_type"
    assert err.message == "unknown message type 'xyz'"
    assert err.frame_id == 9


def test_missing_data_field_is_named() -> None:
    err = error_of('{"type": "send_message", "id": "a", "sessionId": "s", "data": {}}')
    assert (err.code, err.message, err.frame_id) == (
        "bad_request", "data.content: field required", "a"
    )


def test_missing_session_id() -> None:
    err = error_of('{"type": "cancel", "id": "a"}')
    assert (err.code, err.message) == ("bad_request", "sessionId: field required")


@pytest.mark.parametrize(("data", "message"), [
    ({"content": 5}, "data.content: must be a string"),
    ({"content": ""}, "data.content: must not be empty"),
    ({"content": "x", "contnet": "y"}, "data.contnet: unknown field"),
])
def test_wrong_field_types_are_named(data: dict[str, object], message: str) -> None:
    err = error_of(json.dumps({"type": "send_message", "sessionId": "s", "data": data}))
    assert (err.code, err.message) == ("bad_request", message)


@pytest.mark.parametrize(("value", "message"), [
    (True, "data.afterPosition: must be an integer"),
    ("3", "data.afterPosition: must be an integer"),
    (-1, "data.afterPosition: must be >= 0"),
    # Regression (fuzzer): past PostgreSQL's bigint the store query overflowed -> `internal`.
    (2**63, "data.afterPosition: must be <= 9223372036854775807"),
    (2**70, "data.afterPosition: must be <= 9223372036854775807"),
])
def test_after_position_is_strict(value: object, message: str) -> None:
    err = error_of(json.dumps({"type": "subscribe", "sessionId": "s",
                               "data": {"afterPosition": value}}))
    assert err.message == message


def test_data_and_session_id_must_have_the_right_shape() -> None:
    assert error_of('{"type": "cancel", "sessionId": 4}').message == "sessionId: must be a string"
    err = error_of('{"type": "subscribe", "sessionId": "s", "data": [1]}')
    assert err.message == "data: must be an object"
    err = error_of('{"type": "ping", "id": 1.5}')
    assert err.message == "id: must be a string or an integer" and err.frame_id == 1.5


def test_too_large_frame_echoes_id() -> None:
    raw = json.dumps({"type": "send_message", "id": "big", "sessionId": "s",
                      "data": {"content": "x" * MAX_FRAME_BYTES}})
    err = error_of(raw)
    assert (err.code, err.frame_id) == ("too_large", "big")
    # exactly at the limit is still accepted
    filler = MAX_FRAME_BYTES - len(json.dumps({"type": "ping", "pad": ""}))
    assert parse_frame(json.dumps({"type": "ping", "pad": "y" * filler})).type == "ping"


def test_too_large_counts_bytes_not_characters() -> None:
    raw = json.dumps({"type": "ping", "pad": "é" * (MAX_FRAME_BYTES // 2)}, ensure_ascii=False)
    assert len(raw) < MAX_FRAME_BYTES < len(raw.encode())
    assert error_of(raw).code == "too_large"


def test_binary_frames_are_decoded_as_utf8() -> None:
    assert parse_frame(b'{"type": "ping", "id": 1}').id == 1
    err = error_of(b"\xff\xfe")
    assert err.code == "bad_request" and "UTF-8" in err.message


@pytest.mark.parametrize(("escape", "reason"), [
    ("\\u0000", "must not contain NUL characters"),
    ("\\ud800", "must not contain unpaired surrogates"),
])
def test_text_the_database_cannot_store_is_bad_request(escape: str, reason: str) -> None:
    raw = '{"type": "send_message", "sessionId": "s", "data": {"content": "a' + escape + 'b"}}'
    assert error_of(raw).message == f"data.content: {reason}"
    emoji = '{"type": "send_message", "sessionId": "s", "data": {"content": "\\ud83d\\ude00"}}'
    assert parse_frame(emoji).data.content == "\N{GRINNING FACE}"
