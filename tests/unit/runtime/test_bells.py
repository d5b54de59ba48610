"""Fetch bells: a ringer wakes the bells bound in a topic's directory, and only those."""

from __future__ import annotations

import asyncio
import socket
from pathlib import Path

import pytest
from muster_runtime.messaging.local_broker import bells
from muster_runtime.messaging.local_broker.bells import Bell, Ringer

from tests.unit.runtime.fakes import Clock


async def test_a_ring_wakes_the_bells_of_its_topic_only(bells_dir: Path) -> None:
    commands, events = Bell.open(bells_dir, ["commands"]), Bell.open(bells_dir, ["events"])
    ringer = Ringer(bells_dir)
    try:
        waiting = asyncio.ensure_future(commands.wait_beyond(commands.rings, timeout_s=30))
        ringer.ring(["commands"])
        await asyncio.wait_for(waiting, 5)  # without the ring: 30 s
        assert commands.rings == 1
        assert events.rings == 0
    finally:
        commands.close()
        events.close()
        ringer.close()


async def test_a_ring_counted_before_the_wait_ends_it_at_once(bells_dir: Path) -> None:
    bell, ringer = Bell.open(bells_dir, ["t"]), Ringer(bells_dir)
    try:
        seen = bell.rings
        ringer.ring(["t"])
        waiting = asyncio.ensure_future(bell.wait_beyond(seen, timeout_s=30))
        await asyncio.wait_for(waiting, 5)
        # Later waits count from what they have seen: an old ring does not end them.
        quiet = asyncio.ensure_future(bell.wait_beyond(bell.rings, timeout_s=30))
        await asyncio.sleep(0)
        assert not quiet.done()
        quiet.cancel()
    finally:
        bell.close()
        ringer.close()


async def test_a_wait_ends_after_its_timeout_or_when_its_other_future_is_done(bells_dir: Path) -> None:
    bell = Bell.open(bells_dir, ["t"])
    try:
        await asyncio.wait_for(bell.wait_beyond(bell.rings, timeout_s=0.01), 5)
        consumed: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        waiting = asyncio.ensure_future(bell.wait_beyond(bell.rings, timeout_s=30, unless=consumed))
        await asyncio.sleep(0)
        assert not waiting.done()
        consumed.set_result(None)
        await asyncio.wait_for(waiting, 5)
        assert bell._waiters == []  # a wait that was not rung leaves nothing behind
    finally:
        bell.close()


async def test_a_bell_opened_after_the_listing_hears_rings_once_the_listing_expires(bells_dir: Path) -> None:
    clock = Clock()
    ringer = Ringer(bells_dir, ttl_s=1.0, clock=clock)
    ringer.ring(["t"])  # lists an empty (missing) directory
    bell = Bell.open(bells_dir, ["t"])
    try:
        ringer.ring(["t"])
        # A Unix datagram is queued by the time `sendto` returns: none was sent.
        [(sock, _)] = bell._sockets
        with pytest.raises(BlockingIOError):
            sock.recv(16)  # the listing is still the empty one
        clock.now = 1.0
        waiting = asyncio.ensure_future(bell.wait_beyond(0, timeout_s=30))
        ringer.ring(["t"])
        await asyncio.wait_for(waiting, 5)
        assert bell.rings == 1
    finally:
        bell.close()
        ringer.close()


async def test_a_dead_consumers_socket_is_removed_by_the_next_ring(bells_dir: Path) -> None:
    (bells_dir / "t").mkdir()
    stale = bells_dir / "t" / "999999.1"
    dead = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    dead.bind(str(stale))
    dead.close()  # killed: the file stays, nobody listens
    live = Bell.open(bells_dir, ["t"])
    ringer = Ringer(bells_dir)
    try:
        waiting = asyncio.ensure_future(live.wait_beyond(0, timeout_s=30))
        ringer.ring(["t"])
        await asyncio.wait_for(waiting, 5)
        assert not stale.exists()
    finally:
        live.close()
        ringer.close()


async def test_closing_a_bell_removes_its_sockets(bells_dir: Path) -> None:
    bell = Bell.open(bells_dir, ["a", "b"])
    assert len(list(bells_dir.glob("*/*"))) == 2
    bell.close()
    assert list(bells_dir.glob("*/*")) == []


def test_fits_says_whether_every_socket_address_is_short_enough() -> None:
    assert bells.fits(Path("/tmp/x/bells"), ["muster.delegations"])
    assert not bells.fits(Path("/tmp/" + "d" * 80), ["muster.delegations"])


async def test_a_filtering_bell_wakes_only_for_rings_naming_a_key_it_acts_on(bells_dir: Path) -> None:
    asked: list[bytes] = []

    def mine(key: bytes) -> bool:
        asked.append(key)
        return key == b"mine"

    filtering, plain = Bell.open(bells_dir, ["t"], relevant=mine), Bell.open(bells_dir, ["t"])
    ringer = Ringer(bells_dir)
    try:
        ringer.ring_records([("t", b"other"), ("t", b"another")])
        await asyncio.wait_for(plain.wait_beyond(0, timeout_s=30), 5)
        # Both sockets got the datagram before the loop polled: both were drained at once.
        assert sorted(asked) == [b"another", b"other"]
        assert filtering.rings == 0 and plain.rings == 1
        ringer.ring_records([("t", b"other"), ("t", b"mine")])
        await asyncio.wait_for(filtering.wait_beyond(0, timeout_s=30), 5)
        assert filtering.rings == 1
        ringer.ring(["t"])  # names no key: wakes everyone
        await asyncio.wait_for(filtering.wait_beyond(1, timeout_s=30), 5)
        assert filtering.rings == 2
    finally:
        filtering.close()
        plain.close()
        ringer.close()


@pytest.mark.parametrize(
    "keys",
    [
        [f"stream-{i}".encode() for i in range(bells.MAX_RING_KEYS + 1)],  # too many to name
        [b"one", None],  # a keyless record
        [b"two\nlines"],  # a key the separator would split
        [b"k" * 3000, b"l" * 3000],  # longer than a bell reads of a ring
    ],
)
async def test_a_ring_that_cannot_name_its_keys_names_none(bells_dir: Path, keys: list[bytes | None]) -> None:
    nothing = Bell.open(bells_dir, ["t"], relevant=lambda key: False)
    ringer = Ringer(bells_dir)
    try:
        ringer.ring_records(("t", key) for key in keys)
        await asyncio.wait_for(nothing.wait_beyond(0, timeout_s=30), 5)
        assert nothing.rings == 1
    finally:
        nothing.close()
        ringer.close()
