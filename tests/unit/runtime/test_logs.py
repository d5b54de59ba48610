"""Log lines never carry credentials, whichever library wrote them."""

from __future__ import annotations

import logging

import pytest
from muster_runtime.process.logs import RedactSecrets


@pytest.mark.parametrize(
    ("message", "args", "expected"),
    [
        ('"WebSocket /v1/ws?token=%s" [accepted]', ("tok-alice",), '"WebSocket /v1/ws?token=***" [accepted]'),
        ("Authorization: Bearer %s", ("sk-secret",), "Authorization: Bearer ***"),
        ("url=http://x/?a=1&api_key=abc&b=2", None, "url=http://x/?a=1&api_key=***&b=2"),
        ("execution_run_start execution=%s", ("e-1",), "execution_run_start execution=e-1"),
    ],
)
def test_credentials_are_redacted(message: str, args: tuple[str, ...] | None, expected: str) -> None:
    record = logging.LogRecord("uvicorn.error", logging.INFO, __file__, 1, message, args, None)
    assert RedactSecrets().filter(record)
    assert record.getMessage() == expected
