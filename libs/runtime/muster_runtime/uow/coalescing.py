"""Single-statement decisions that become ready together, sent as one statement (ADR 0027).

The four `RunExecution` commands of a delegation reach a worker in one fetch, and it claims
the four executions at the same moment: four statements of their own, each a round trip,
a commit and the server's work around it, the last child starting after the fourth. A
`Coalescer` sends the ones made while the event loop runs the same batch of ready
callbacks as one statement instead: the first caller leads, lets the callbacks already
ready run (one `sleep(0)`: whatever the same I/O woke joins, nothing waits for a timer),
then sends them all on its own connection. It is one implicit transaction: all of them
commit or none does, and each is still decided on its own (its own checks, its own
outcome). Whatever goes wrong with the statement sends each again alone, on its caller's
connection, so a lost race of one never fails the others.

The caller's own work after the statement (building its result, dispatching what it
wrote) stays in the caller's task: only rows cross between tasks.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Hashable
from dataclasses import dataclass, field
from typing import Generic, TypeVar

from muster_runtime.process.db import Connection

Item = TypeVar("Item")
Result = TypeVar("Result")

# A statement's arrays grow with its items; a bigger batch would only delay its first.
MAX_ITEMS = 64


class _Alone:
    """A follower's answer when the batch did not decide for it: send yours alone."""


ALONE = _Alone()


@dataclass
class Coalescer(Generic[Item, Result]):
    """`together(conn, items)` answers one result per item, in order, in one statement;
    `alone(conn, item)` is the same decision as a statement of its own. Items whose
    `distinct` keys are equal never share a statement (two decisions about one row)."""

    together: Callable[[Connection, list[Item]], Awaitable[list[Result]]]
    alone: Callable[[Connection, Item], Awaitable[Result]]
    distinct: Callable[[Item], Hashable]
    sent_together: int = 0  # statements that carried more than one item
    _pending: list[tuple[Item, asyncio.Future[Result | _Alone]]] | None = field(default=None, repr=False)
    _keys: set[Hashable] = field(default_factory=set, repr=False)

    async def call(self, conn: Connection, item: Item) -> Result:
        if self._pending is None:
            return await self._lead(conn, item)
        key = self.distinct(item)
        if key in self._keys or len(self._pending) + 1 >= MAX_ITEMS:
            return await self.alone(conn, item)
        self._keys.add(key)
        answer: asyncio.Future[Result | _Alone] = asyncio.get_running_loop().create_future()
        self._pending.append((item, answer))
        result = await answer
        if isinstance(result, _Alone):
            return await self.alone(conn, item)
        return result

    async def _lead(self, conn: Connection, item: Item) -> Result:
        self._pending, self._keys = [], {self.distinct(item)}
        try:
            await asyncio.sleep(0)  # the callbacks already ready run, and may join
        except BaseException:  # cancelled before sending: whoever joined goes on alone
            for _, answer in self._take():
                _settle(answer, ALONE)
            raise
        followers = self._take()
        if not followers:
            return await self.alone(conn, item)
        try:
            results = await self.together(conn, [item, *(i for i, _ in followers)])
            if len(results) != len(followers) + 1:
                raise RuntimeError(f"{len(results)} results for {len(followers) + 1} items")
        except BaseException as exc:
            for _, answer in followers:
                _settle(answer, ALONE)
            if isinstance(exc, Exception):  # the batch refused: each decides alone
                return await self.alone(conn, item)
            raise  # cancelled: the followers go on alone, the leader stops
        self.sent_together += 1
        for (_, answer), result in zip(followers, results[1:], strict=True):
            _settle(answer, result)
        return results[0]

    def _take(self) -> list[tuple[Item, asyncio.Future[Result | _Alone]]]:
        followers, self._pending, self._keys = self._pending or [], None, set()
        return followers


def _settle(answer: asyncio.Future[Result | _Alone], value: Result | _Alone) -> None:
    if not answer.done():  # a follower cancelled meanwhile no longer listens
        answer.set_result(value)
