"""The seeded kill schedule and its executor.

A step waits `delay_s`, SIGKILLs its targets at once, then waits for the supervisor to
restart every one of them before the next step. Re-running with the same seed gives the same
steps (the instants drift with how long restarts take)."""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any

from chaos.cluster import TARGETS, ChaosCluster

IDLE_WAIT_S = 15.0  # at most this long for a session to be in flight before a kill


@dataclass
class KillStep:
    index: int
    delay_s: float
    targets: list[str]
    # filled in when run
    at_s: float | None = None
    old_pids: dict[str, int] = field(default_factory=dict)
    new_pids: dict[str, int] = field(default_factory=dict)
    restart_s: float | None = None
    inflight: int | None = None  # workload sessions not yet finished at the kill
    error: str | None = None

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def plan_kills(seed: int, kills: int) -> list[KillStep]:
    rng = random.Random(seed)
    steps: list[KillStep] = []
    total, previous = 0, None
    while total < kills:
        roll = rng.random()
        if previous is not None and roll < 0.2:
            targets = list(previous)  # the same again, right after its restart
        elif roll < 0.4:
            targets = rng.sample(TARGETS, 2)
        else:
            targets = [rng.choice(TARGETS)]
        steps.append(KillStep(len(steps), round(rng.uniform(0.5, 4.0), 2), targets))
        total += len(targets)
        previous = targets
    return steps


class KillRunner:
    tag = "chaos"  # what its lines start with

    def __init__(self, cluster: ChaosCluster, steps: list[KillStep], t0: float) -> None:
        self.inflight: Callable[[], int] = lambda: 0
        self.none_starting: Callable[[], bool] = lambda: True
        self.cluster = cluster
        self.steps = steps
        self.t0 = t0
        self.done = 0
        self.progress = asyncio.Condition()
        self.last_kill_at: float | None = None

    async def wait_steps(self, count: int) -> None:
        async with self.progress:
            await self.progress.wait_for(lambda: self.done >= count)

    async def run(self) -> None:
        for step in self.steps:
            await asyncio.sleep(step.delay_s)
            # Kills land while work is in flight: sessions about to start are waited for.
            for _ in range(int(IDLE_WAIT_S / 0.1)):
                if self.inflight() or self.none_starting():
                    break
                await asyncio.sleep(0.1)
            await self.perform(step)

    async def perform(self, step: KillStep) -> None:
        """Kill `step`'s targets now and wait for their restarts; print how it went (once
        done: `_execute` sets the step's time) and count it for `wait_steps`."""
        step.inflight = self.inflight()
        await asyncio.to_thread(self._execute, step)
        self.last_kill_at = time.monotonic()
        status = "ok" if step.error is None else f"ERROR {step.error.splitlines()[0]}"
        print(
            f"[{self.tag}] kill {step.index:2d} at {step.at_s:7.1f}s {'+'.join(step.targets):<28} "
            f"restarted in {step.restart_s or 0:.1f}s, {step.inflight} sessions in flight {status}",
            flush=True,
        )
        async with self.progress:
            self.done += 1
            self.progress.notify_all()

    def _execute(self, step: KillStep) -> None:
        after = self.cluster.line_count()
        step.at_s = round(time.monotonic() - self.t0, 2)
        started = time.monotonic()
        try:
            step.old_pids = self.cluster.kill(step.targets)
            for name, pid in step.old_pids.items():
                step.new_pids[name] = self.cluster.wait_restarted(name, pid, after)
        except (LookupError, TimeoutError, RuntimeError, ProcessLookupError) as exc:
            step.error = f"{type(exc).__name__}: {exc}"
        step.restart_s = round(time.monotonic() - started, 2)


def describe(steps: list[KillStep]) -> str:
    return ", ".join(f"{s.index}:+{s.delay_s}s {'+'.join(s.targets)}" for s in steps)
