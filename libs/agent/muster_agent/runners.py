"""Runs session loops as background tasks under a renewed lease, one task per session."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable
from uuid import UUID

from muster_runtime.process.db import Pool
from muster_runtime.uow import leases

log = logging.getLogger("muster.runners")


class Runners:
    """Owns the running loops of this process.

    A lease stays with this instance after its loop goes idle (a later command for the key
    re-acquires it at once); `stop_all` releases them on shutdown so another instance can
    take over without waiting for expiry. A `start` for a key that is still running marks it
    to run again, so a command arriving while a loop winds down is never lost."""

    def __init__(self, pool: Pool, owner: str, lease_ttl_s: float, limit: int = 1000):
        self._pool = pool
        self._owner = owner
        self._ttl = lease_ttl_s
        self._tasks: dict[UUID, asyncio.Task[None]] = {}
        self._again: set[UUID] = set()
        self._slots = asyncio.Semaphore(limit)

    @property
    def owner(self) -> str:
        return self._owner

    def is_running(self, key: UUID) -> bool:
        return key in self._tasks

    def running_count(self) -> int:
        return len(self._tasks)

    def start(self, key: UUID, body: Callable[[], Awaitable[None]]) -> None:
        """Run `body` for `key` in a task (the caller holds the lease)."""
        if key in self._tasks:
            self._again.add(key)
            return
        task = asyncio.create_task(self._guarded(key, body), name=f"run-{key}")
        self._tasks[key] = task

    async def _guarded(self, key: UUID, body: Callable[[], Awaitable[None]]) -> None:
        renewer = asyncio.create_task(self._renew(key))
        try:
            async with self._slots:
                while True:
                    self._again.discard(key)
                    await body()
                    if key not in self._again:
                        break
        except asyncio.CancelledError:
            log.info("run_cancelled key=%s", key)
        except Exception:
            # The lease expires unrenewed, so recovery re-drives this key from the store.
            log.exception("run_crashed key=%s", key)
        finally:
            # No await between the `_again` check above and this pop: a concurrent start
            # either re-ran the body or sees the key gone and starts a new task.
            renewer.cancel()
            self._tasks.pop(key, None)
            self._again.discard(key)

    async def _renew(self, key: UUID) -> None:
        while True:
            await asyncio.sleep(self._ttl / 3)
            try:
                held = await leases.renew(self._pool, str(key), self._owner, self._ttl)
            except Exception:
                log.warning("lease_renew_failed key=%s", key)
                continue
            if not held:
                log.warning("lease_lost key=%s", key)
                task = self._tasks.get(key)
                if task is not None:
                    task.cancel()
                return

    async def join(self, key: UUID) -> None:
        """Wait until the run of `key` (if any) has ended, re-runs included."""
        task = self._tasks.get(key)
        if task is not None:
            await asyncio.gather(task, return_exceptions=True)

    def cancel(self, key: UUID) -> bool:
        task = self._tasks.get(key)
        if task is None:
            return False
        task.cancel()
        return True

    async def stop_all(self) -> None:
        keys = list(self._tasks)
        tasks = list(self._tasks.values())
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        for key in keys:
            with contextlib.suppress(Exception):
                await leases.release(self._pool, str(key), self._owner)
