"""The chaos workload honours an `overloaded` refusal (ADR 0041) as a client should: it waits
the hint (bounded) and asks again, counting it, instead of giving the session up."""

from __future__ import annotations

import time

from chaos.driver import after_shedding
from chaos.outcome import Outcome


def outcome() -> Outcome:
    return Outcome(index=1, kind="plain", user="u", title="t", expect="COMPLETED")


async def test_an_overloaded_refusal_is_waited_out_and_counted() -> None:
    out = outcome()
    refusal = {"type": "error", "id": "r1", "data": {"code": "overloaded", "retryAfterMs": 150}}
    started = time.monotonic()
    assert await after_shedding(refusal, out, "create_session")
    assert time.monotonic() - started >= 0.15
    assert out.shed == 1


async def test_an_ack_or_another_error_is_not_retried() -> None:
    out = outcome()
    assert not await after_shedding({"type": "ack", "id": "r1", "data": {}}, out, "create_session")
    other = {"type": "error", "id": "r2", "data": {"code": "rate_limited", "retryAfterMs": 10}}
    assert not await after_shedding(other, out, "create_session")
    assert out.shed == 0

