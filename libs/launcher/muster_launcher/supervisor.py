"""Runs named child processes, relays their output and restarts those that die.

Children stay in the launcher's process group (nothing is daemonised), so a terminal's
Ctrl-C reaches all of them and `kill -- -PGID` cleans up everything.
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
import sys
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import TextIO

from .backoff import Backoff
from .procs import die_with_parent

_LINE_LIMIT = 1 << 20


def log(message: str) -> None:
    _write(sys.stderr, f"supervisor: {message}\n")


def _write(out: TextIO, text: str) -> None:
    with contextlib.suppress(OSError, ValueError):  # our reader went away: keep running
        out.write(text)
        out.flush()


@dataclass
class ChildSpec:
    name: str
    argv: list[str]
    # Stop order: higher tiers stop first (services, then broker, then database).
    tier: int = 2
    env: dict[str, str] | None = None
    user: str | None = None
    cwd: str | None = None
    stop_signal: int = signal.SIGTERM
    stop_timeout: float = 8.0
    # Runs before every start, e.g. to clear what a killed predecessor left behind.
    prepare: Callable[[], Awaitable[None]] | None = None
    # Runs after every start; raising (or the process exiting first) fails the start.
    ready: Callable[[], Awaitable[None]] | None = None
    backoff: Backoff = field(default_factory=Backoff)


class Child:
    def __init__(self, spec: ChildSpec, supervisor: Supervisor) -> None:
        self.spec = spec
        self._supervisor = supervisor
        self.proc: asyncio.subprocess.Process | None = None
        self.started_at = 0.0
        self.restarts = 0
        self._pumps: list[asyncio.Task[None]] = []
        self.watcher: asyncio.Task[None] | None = None

    @property
    def pid(self) -> int | None:
        return self.proc.pid if self.proc else None

    async def spawn(self) -> None:
        spec = self.spec
        if spec.prepare:
            await spec.prepare()
        self.proc = proc = await asyncio.create_subprocess_exec(
            *spec.argv,
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            env=spec.env,
            cwd=spec.cwd,
            user=spec.user,
            preexec_fn=die_with_parent(spec.stop_signal),
            limit=_LINE_LIMIT,
        )
        self.started_at = time.monotonic()
        assert proc.stdout and proc.stderr
        self._pumps = [
            asyncio.create_task(self._pump(proc.stdout, sys.stdout)),
            asyncio.create_task(self._pump(proc.stderr, sys.stderr)),
        ]
        if spec.ready is None:
            return
        readiness = asyncio.ensure_future(spec.ready())
        exited = asyncio.ensure_future(proc.wait())
        try:
            await asyncio.wait({readiness, exited}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            exited.cancel()
            if not readiness.done():
                readiness.cancel()
        if not readiness.done() or readiness.cancelled():
            raise RuntimeError(f"{spec.name} exited with {proc.returncode} while starting")
        if exc := readiness.exception():
            await self.terminate()
            raise exc

    async def _pump(self, stream: asyncio.StreamReader, out: TextIO) -> None:
        prefix = f"[{self.spec.name}] "
        while True:
            try:
                line = await stream.readline()
            except ValueError:  # asyncio drops a line longer than the limit
                _write(out, f"{prefix}<line over {_LINE_LIMIT} bytes dropped>\n")
                continue
            if not line:
                return
            _write(out, prefix + line.decode(errors="replace").rstrip("\r\n") + "\n")

    async def watch(self) -> None:
        """Restart the child whenever it exits, until the supervisor stops."""
        while True:
            assert self.proc is not None
            code: int | None = await self.proc.wait()
            await self._drain()
            delay = self.spec.backoff.delay(time.monotonic() - self.started_at)
            while True:
                # Let Ctrl-C, which reaches children too, win over a restart.
                await asyncio.sleep(0)
                if self._supervisor.stopping:
                    return
                log(f"{self.spec.name} exited with {code}, restarting in {delay:g}s")
                await asyncio.sleep(delay)
                if self._supervisor.stopping:
                    return
                try:
                    await self.spawn()
                except Exception as exc:
                    code = self.proc.returncode if self.proc else None
                    log(f"{self.spec.name} failed to start: {exc}")
                    delay = self.spec.backoff.delay(0.0)
                    continue
                self.restarts += 1
                log(f"{self.spec.name} restarted (pid {self.pid})")
                break

    async def _drain(self) -> None:
        # Grandchildren (PostgreSQL backends) may hold the pipes open; do not wait forever.
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(asyncio.gather(*self._pumps), timeout=1.0)
        for pump in self._pumps:
            pump.cancel()

    async def terminate(self) -> None:
        proc = self.proc
        if proc is None or proc.returncode is not None:
            await self._drain()
            return
        with contextlib.suppress(ProcessLookupError):
            proc.send_signal(self.spec.stop_signal)
        try:
            await asyncio.wait_for(proc.wait(), timeout=self.spec.stop_timeout)
        except TimeoutError:
            log(f"{self.spec.name} did not stop in {self.spec.stop_timeout:g}s, killing it")
            with contextlib.suppress(ProcessLookupError):
                proc.kill()
            await proc.wait()
        await self._drain()


class Supervisor:
    def __init__(self) -> None:
        self.children: dict[str, Child] = {}
        self.stopping = False

    async def start(self, spec: ChildSpec) -> Child:
        """First start: a failure raises instead of retrying, so `muster run` fails loudly."""
        child = Child(spec, self)
        self.children[spec.name] = child
        await child.spawn()
        child.watcher = asyncio.create_task(child.watch(), name=f"watch-{spec.name}")
        return child

    async def stop(self) -> None:
        """Stop services, then the broker, then the database (each tier concurrently)."""
        self.stopping = True
        children = list(self.children.values())
        for child in children:
            if child.watcher is not None:
                child.watcher.cancel()
        for tier in sorted({c.spec.tier for c in children}, reverse=True):
            await asyncio.gather(*(c.terminate() for c in children if c.spec.tier == tier))
