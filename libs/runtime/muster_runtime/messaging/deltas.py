"""Publishing answer previews (`muster.deltas`, ADR 0039 and 0044) without slowing the loop.

`offer` never waits: a piece joins the pieces of its message waiting to be sent, or is
dropped when the buffer is full (a delta is a preview; the durable message follows whatever
happens). One background task hands what has gathered to the producer as one batch and goes
on; once the broker has acknowledged it (awaited neither in the loop nor before the next
batch), the local broker's bells are rung so the gateway fetches at once.

What one record carries (ADR 0044): a message's first piece travels alone and at once (the
wait for the first text is what a reader notices); the pieces after it gather until
`interval_s` (25 ms) after the previous send, or until the model call ends (`end`), and
travel as one record per message. Every record of a message gets the next `index` from 0,
so the pieces a client sees count without a gap. A piece lost (a full buffer, a failed
send) ends its message's preview: what a client sees is always a beginning of the answer,
and the durable message brings the rest.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections import OrderedDict
from typing import Any

from muster_contracts.deltas import encode_delta

from muster_runtime.messaging import topics
from muster_runtime.messaging.local_broker.bells import Ringer
from muster_runtime.messaging.outbox import Record

log = logging.getLogger("muster.deltas")

DEFAULT_BUFFER = 2_000  # pieces waiting to be sent, over every session of the process
DEFAULT_INTERVAL_S = 0.025  # how long the pieces after a message's first gather, at most
MESSAGES_KEPT = 4_096  # messages whose next index this process remembers (the latest used)


class _Message:
    """One answer's preview as this process publishes it."""

    __slots__ = ("after_version", "expected", "lost", "message_id", "open", "sent", "session_id")

    def __init__(self, session_id: str, message_id: str, after_version: int) -> None:
        self.session_id, self.message_id, self.after_version = session_id, message_id, after_version
        self.expected = 0  # the loop's index of the next piece
        self.sent = 0  # records published (or taken for publishing): the next record's index
        self.lost = False
        self.open: _Group | None = None  # its waiting group that takes more pieces


class _Group:
    """Pieces of one message waiting to travel as one record."""

    __slots__ = ("at", "message", "parts")

    def __init__(self, message: _Message, text: str) -> None:
        self.message, self.parts, self.at = message, [text], time.time()


class DeltaPublisher:
    def __init__(
        self,
        producer: Any,
        ringer: Ringer | None = None,
        *,
        buffer: int = DEFAULT_BUFFER,
        interval_s: float = DEFAULT_INTERVAL_S,
    ) -> None:
        self._producer = producer
        self._ringer = ringer
        self._buffer = buffer
        self._interval_s = interval_s
        self._messages: OrderedDict[str, _Message] = OrderedDict()
        self._waiting: list[_Group] = []
        self._pieces = 0  # pieces in `_waiting`
        self._ready = asyncio.Event()  # something waits
        self._urgent = asyncio.Event()  # a message's first piece waits: send now
        self.dropped = 0

    def offer(self, session_id: str, message_id: str, index: int, text: str, after_version: int = 0) -> None:
        """Queue one piece (the loop's `index` counts a message's pieces from 0), or drop
        it — and the rest of its message's preview — when it cannot be sent whole."""
        message = self._messages.get(message_id)
        if message is None:
            if index != 0:  # its beginning is forgotten: a preview shows a beginning only
                self._drop(1)
                return
            message = self._remember(_Message(session_id, message_id, after_version))
        else:
            self._messages.move_to_end(message_id)
        if message.lost or index != message.expected or self._pieces >= self._buffer:
            message.lost = True
            self._drop(1)
            return
        message.expected = index + 1
        self._pieces += 1
        if message.open is not None:
            message.open.parts.append(text)
        else:
            group = _Group(message, text)
            self._waiting.append(group)
            if message.sent == 0 and index == 0:
                self._urgent.set()  # alone and at once; the pieces after it gather apart
            else:
                message.open = group
        self._ready.set()

    def end(self, message_id: str) -> None:
        """The model has given the whole answer: what waits of it goes now, and the message
        is forgotten (a piece offered after this is dropped)."""
        message = self._messages.pop(message_id, None)
        if message is not None and message.open is not None:
            self._urgent.set()

    def _remember(self, message: _Message) -> _Message:
        self._messages[message.message_id] = message
        if len(self._messages) > MESSAGES_KEPT:
            self._messages.popitem(last=False)
        return message

    def _drop(self, pieces: int) -> None:
        before, self.dropped = self.dropped, self.dropped + pieces
        if before == 0 or before // 1000 != self.dropped // 1000:
            log.warning("deltas_dropped count=%d", self.dropped)

    def _take(self) -> tuple[list[Record], list[_Group]]:
        """The waiting groups as records, each with its message's next index."""
        groups, self._waiting, self._pieces = self._waiting, [], 0
        self._ready.clear()
        self._urgent.clear()
        records: list[Record] = []
        for group in groups:
            message = group.message
            message.open = None
            text = group.parts[0] if len(group.parts) == 1 else "".join(group.parts)
            value = encode_delta(
                message.session_id, message.message_id, message.sent, text, group.at, message.after_version
            )
            message.sent += 1
            records.append((topics.DELTAS, message.session_id.encode(), value, None))
        return records, groups

    async def run(self) -> None:
        """Send what has gathered, batch after batch, until cancelled."""
        loop = asyncio.get_running_loop()
        next_at = 0.0
        try:
            while True:
                await self._ready.wait()
                delay = next_at - loop.time()
                if delay > 0 and not self._urgent.is_set():
                    with contextlib.suppress(TimeoutError):
                        async with asyncio.timeout(delay):
                            await self._urgent.wait()
                records, groups = self._take()
                next_at = loop.time() + self._interval_s
                try:
                    await self._send(records, groups)
                except asyncio.CancelledError:
                    raise
                except Exception as exc:
                    self._lost(groups, exc)
        finally:
            if self._ringer is not None:
                self._ringer.close()

    async def _send(self, records: list[Record], groups: list[_Group]) -> None:
        """Hand the records to the producer and go on: the acknowledgement is awaited apart,
        so what gathers meanwhile joins the producer's next request instead of waiting for
        this one's answer (under load that answer took tens of milliseconds)."""
        acks = [await self._producer.send(topic, value, key=key) for topic, key, value, _ in records]
        gathered = asyncio.gather(*acks, return_exceptions=True)
        gathered.add_done_callback(lambda done: self._acked(done, records, groups))

    def _acked(self, done: asyncio.Future[list[Any]], records: list[Record], groups: list[_Group]) -> None:
        """The broker has them: ring, so the gateway fetches at once."""
        if done.cancelled():
            self._lost(groups, asyncio.CancelledError())
            return
        failed = next((r for r in done.result() if isinstance(r, BaseException)), None)
        if failed is not None:
            self._lost(groups, failed)
        elif self._ringer is not None:
            self._ringer.ring_records((topic, key) for topic, key, _, _ in records)

    def _lost(self, groups: list[_Group], exc: BaseException) -> None:
        """A preview lost: the durable message still follows."""
        for group in groups:
            group.message.lost = True
        self._drop(sum(len(group.parts) for group in groups))
        log.warning("deltas_publish_failed count=%d error=%s", len(groups), type(exc).__name__)
