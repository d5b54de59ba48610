"""Fetch bells: whoever publishes to a topic tells this machine's consumers of it at once.

The local broker (Tansu) cannot be trusted to answer a waiting fetch before its
`fetch_max_wait_ms` elapses (it usually answers when a record arrives, but misses some: ADR
0024's amendment), so a consumer that wants every record promptly polls it: with 5 ms a hop
waits 2.5 ms on average, and each latency-sensitive consumer sends 200 fetches a second,
which cost the broker about half a core with one turn in flight. With a bells directory
(`MUSTER_BELLS_DIR`, which `muster run` sets when it runs the broker itself), each such
consumer binds a Unix datagram socket in `DIR/<topic>/`, and a process that has published
records to a topic (the broker has acknowledged them) sends a datagram to each socket
there. A consumer whose fetch came back empty sends the next one when rung, or after a
fallback interval.

A ring names the keys of the records it announces (up to `MAX_RING_KEYS`; more, or a key
that cannot be named, and it names none: "anything"). A consumer that acts on the records
of a few keys only (the gateway, on watched streams) opens its bell with `relevant` and is
not woken by rings naming none of them: those records wait for its next fetch.

A ring is only a hint: the records are in the broker whether or not it arrives. A record
whose publisher does not ring (a process outside the cluster), or a ring lost (a consumer
started after the ringer last listed the directory), waits at most the fallback.
Real Kafka (deploy/) answers a waiting fetch as soon as data arrives: no directory there.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import os
import socket
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

log = logging.getLogger("muster.bells")

# The longest AF_UNIX address Linux takes (108 bytes with the terminating NUL).
MAX_SOCKET_PATH = 107
# The longest name a bell gets inside its topic's directory: `<pid>.<serial>`.
_NAME_ROOM = len("/4194304.999999")
_serial = itertools.count(1)
# Keys a ring names at most: past this it names none (any consumer wakes), which is what a
# burst with that many keys would do to a filtering consumer anyway.
MAX_RING_KEYS = 64
_KEY_SEPARATOR = b"\n"
# What a bell reads of a ring: room for MAX_RING_KEYS stream ids (36 characters each).
_RING_BYTES = 4096

Relevant = Callable[[bytes], bool]


def fits(directory: Path, topics: Iterable[str]) -> bool:
    """Whether every bell of `topics` under `directory` has a valid socket address."""
    return all(len(str(directory / topic)) + _NAME_ROOM <= MAX_SOCKET_PATH for topic in topics)


class Bell:
    """A consumer's bell: one socket per topic it consumes, counting the rings of all (with
    `relevant`, only those naming no key or a key it accepts)."""

    def __init__(self, sockets: list[tuple[socket.socket, Path]], relevant: Relevant | None = None) -> None:
        self._sockets = sockets
        self._relevant = relevant
        self.rings = 0
        self._waiters: list[asyncio.Future[None]] = []
        loop = asyncio.get_running_loop()
        for sock, _ in sockets:
            loop.add_reader(sock.fileno(), self._drain, sock)

    @classmethod
    def open(cls, directory: Path, topics: Iterable[str], relevant: Relevant | None = None) -> Bell:
        """Bind this consumer's sockets (inside a running event loop)."""
        sockets: list[tuple[socket.socket, Path]] = []
        name = f"{os.getpid()}.{next(_serial)}"
        try:
            for topic in sorted(set(topics)):
                path = directory / topic / name
                path.parent.mkdir(parents=True, exist_ok=True)
                sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
                sockets.append((sock, path))
                sock.setblocking(False)
                with contextlib.suppress(FileNotFoundError):
                    path.unlink()  # a dead process of the same pid left it
                sock.bind(str(path))
        except BaseException:
            _close_all(sockets)
            raise
        return cls(sockets, relevant)

    def _drain(self, sock: socket.socket) -> None:
        rung = False
        while True:
            try:
                named = sock.recv(_RING_BYTES)
            except OSError:  # drained (BlockingIOError), or closed meanwhile
                break
            rung = rung or self._wakes(named)
        if rung:
            self.rings += 1
            waiters, self._waiters = self._waiters, []
            for waiter in waiters:
                if not waiter.done():
                    waiter.set_result(None)

    def _wakes(self, named: bytes) -> bool:
        if self._relevant is None or not named:
            return True
        return any(self._relevant(key) for key in named.split(_KEY_SEPARATOR))

    async def wait_beyond(
        self, seen: int, timeout_s: float, *, unless: asyncio.Future[Any] | None = None
    ) -> None:
        """Return once rung after `seen` rings had been counted, after `timeout_s`, or
        once `unless` is done."""
        if self.rings > seen or (unless is not None and unless.done()):
            return
        waiter = asyncio.get_running_loop().create_future()
        self._waiters.append(waiter)
        waits: set[asyncio.Future[Any]] = {waiter} if unless is None else {waiter, unless}
        await asyncio.wait(waits, timeout=timeout_s, return_when=asyncio.FIRST_COMPLETED)
        if not waiter.done():
            waiter.cancel()
            self._waiters.remove(waiter)

    def close(self) -> None:
        loop = asyncio.get_running_loop()
        for sock, _ in self._sockets:
            loop.remove_reader(sock.fileno())
        _close_all(self._sockets)
        self._sockets = []


def _close_all(sockets: list[tuple[socket.socket, Path]]) -> None:
    for sock, path in sockets:
        sock.close()
        with contextlib.suppress(OSError):
            path.unlink()


class Ringer:
    """Rings the bells of a topic's consumers. A topic's directory is listed at most once
    per `ttl_s`: a consumer that has just started hears its first rings after that."""

    def __init__(self, directory: Path, *, ttl_s: float = 1.0, clock: Callable[[], float] = time.monotonic):
        self._directory = directory
        self._ttl_s = ttl_s
        self._clock = clock
        self._listed: dict[str, tuple[float, list[str]]] = {}
        self._socket = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self._socket.setblocking(False)

    def ring(self, topics: Iterable[str]) -> None:
        """Ring for records of `topics`, naming no key."""
        self.ring_records((topic, None) for topic in topics)

    def ring_records(self, records: Iterable[tuple[str, bytes | None]]) -> None:
        """Ring for published records, given as (topic, key): each topic's bells once."""
        keys: dict[str, set[bytes | None]] = {}
        for topic, key in records:
            keys.setdefault(topic, set()).add(key)
        for topic, named in keys.items():
            self._ring(topic, _naming(named))

    def _ring(self, topic: str, payload: bytes) -> None:
        # A copy: `_forget` drops dead bells from the cached listing meanwhile.
        for address in list(self._bells(topic)):
            try:
                self._socket.sendto(payload, address)
            except BlockingIOError:
                pass  # its queue is full: it has rings to read (a lost one waits the fallback)
            except (ConnectionRefusedError, FileNotFoundError):
                self._forget(topic, address)
            except OSError as exc:  # a hint only: the consumer falls back to polling
                log.debug("ring_failed topic=%s error=%s", topic, type(exc).__name__)

    def _bells(self, topic: str) -> list[str]:
        now = self._clock()
        listed = self._listed.get(topic)
        if listed is None or now - listed[0] >= self._ttl_s:
            try:
                names = [str(p) for p in (self._directory / topic).iterdir()]
            except FileNotFoundError:
                names = []
            listed = (now, names)
            self._listed[topic] = listed
        return listed[1]

    def _forget(self, topic: str, address: str) -> None:
        """Nobody is bound there: its consumer died without removing it."""
        with contextlib.suppress(OSError):
            os.unlink(address)
        listed = self._listed.get(topic)
        if listed is not None and address in listed[1]:
            listed[1].remove(address)

    def close(self) -> None:
        self._socket.close()


def _naming(keys: set[bytes | None]) -> bytes:
    """A ring's datagram: the keys, or nothing (every consumer wakes) when there are too
    many, one is missing or holds the separator, or they exceed what a bell reads."""
    if None in keys or len(keys) > MAX_RING_KEYS or any(_KEY_SEPARATOR in k for k in keys if k):
        return b""
    payload = _KEY_SEPARATOR.join(sorted(k for k in keys if k is not None))
    return payload if len(payload) <= _RING_BYTES else b""


def ringer(directory: Path | None) -> Ringer | None:
    """The process's ringer when the cluster has a bells directory."""
    return Ringer(directory) if directory is not None else None
