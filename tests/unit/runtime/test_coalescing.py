"""The coalescer: decisions made at the same moment share one statement, each gets its own
answer, and anything that goes wrong with the shared statement sends each alone."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from muster_runtime.uow.coalescing import Coalescer

CONN: Any = object()  # the fakes never touch a connection


class Calls:
    def __init__(self, fail_together: BaseException | None = None) -> None:
        self.together: list[list[int]] = []
        self.alone: list[int] = []
        self.fail_together = fail_together
        self.gate = asyncio.Event()
        self.gate.set()

    async def send_together(self, _conn: Any, items: list[int]) -> list[str]:
        self.together.append(items)
        await self.gate.wait()
        if self.fail_together is not None:
            raise self.fail_together
        return [f"together:{i}" for i in items]

    async def send_alone(self, _conn: Any, item: int) -> str:
        self.alone.append(item)
        return f"alone:{item}"

    def coalescer(self) -> Coalescer[int, str]:
        return Coalescer(self.send_together, self.send_alone, lambda i: i % 10)


async def test_calls_made_at_the_same_moment_share_one_statement_each_with_its_answer() -> None:
    calls = Calls()
    coalescer = calls.coalescer()
    answers = await asyncio.gather(*(coalescer.call(CONN, i) for i in (1, 2, 3)))
    assert answers == ["together:1", "together:2", "together:3"]
    assert calls.together == [[1, 2, 3]] and calls.alone == []
    assert coalescer.sent_together == 1


async def test_a_call_on_its_own_is_sent_alone_and_later_calls_start_a_new_statement() -> None:
    calls = Calls()
    coalescer = calls.coalescer()
    assert await coalescer.call(CONN, 1) == "alone:1"
    assert await asyncio.gather(coalescer.call(CONN, 2), coalescer.call(CONN, 3)) == ["together:2", "together:3"]
    assert calls.alone == [1] and calls.together == [[2, 3]]


async def test_two_calls_about_the_same_thing_never_share_a_statement() -> None:
    calls = Calls()
    coalescer = calls.coalescer()
    answers = await asyncio.gather(*(coalescer.call(CONN, i) for i in (1, 11, 2)))
    assert answers == ["together:1", "alone:11", "together:2"]
    assert calls.together == [[1, 2]] and calls.alone == [11]


async def test_a_failing_shared_statement_sends_each_alone() -> None:
    calls = Calls(fail_together=RuntimeError("lock not available"))
    coalescer = calls.coalescer()
    answers = await asyncio.gather(*(coalescer.call(CONN, i) for i in (1, 2, 3)))
    assert answers == ["alone:1", "alone:2", "alone:3"]
    assert sorted(calls.alone) == [1, 2, 3] and coalescer.sent_together == 0


@pytest.mark.parametrize("while_sending", [False, True], ids=["before-sending", "while-sending"])
async def test_a_cancelled_leader_leaves_the_others_to_go_alone(while_sending: bool) -> None:
    calls = Calls()
    coalescer = calls.coalescer()
    if while_sending:
        calls.gate.clear()  # the shared statement hangs until the leader is cancelled
    leader = asyncio.create_task(coalescer.call(CONN, 1))
    followers = [asyncio.create_task(coalescer.call(CONN, i)) for i in (2, 3)]
    if while_sending:
        while not calls.together:
            await asyncio.sleep(0)
        assert calls.together == [[1, 2, 3]]
        leader.cancel()
    else:
        # Runs after the followers joined and before the leader sends.
        asyncio.get_running_loop().call_soon(leader.cancel)
    assert await asyncio.gather(*followers) == ["alone:2", "alone:3"]
    with pytest.raises(asyncio.CancelledError):
        await leader
    assert calls.alone == [2, 3]
    assert calls.together == ([[1, 2, 3]] if while_sending else [])
