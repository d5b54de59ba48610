"""The soak's load and its kills, composed of the chaos run's pieces.

Sessions are the chaos workload's (`chaos.workload.plan_workload`: delegation, follow-ups,
side tasks, approvals, LOCAL sessions whose device drops its socket, cancels, editors),
released at a steady rate instead of after kill steps; a follow-up
session that completes is then compacted on request and its compaction awaited. Kills are
the chaos `KillRunner`'s, one random target at a fixed period instead of a seeded burst.
"""

from __future__ import annotations

import asyncio
import random
import time
from dataclasses import dataclass
from typing import Any

import httpx

from chaos.cluster import TARGETS, ChaosCluster
from chaos.driver import Driver
from chaos.outcome import Outcome
from chaos.schedule import KillRunner, KillStep
from chaos.workload import SessionPlan, plan_workload


@dataclass
class Finished:
    index: int
    kind: str
    phase: str | None
    at_s: float  # when the session's driving ended, since the soak started
    seconds: float  # how long it took from its first frame
    error: str | None


class PeriodicKills(KillRunner):
    """One random target every `every_s` from `start_s` until `until_s` (soak time)."""

    tag = "soak"

    def __init__(self, cluster: ChaosCluster, seed: int, every_s: float, until_s: float, t0: float) -> None:
        super().__init__(cluster, [], t0)
        self.rng = random.Random(f"soak-kills-{seed}")
        self.every_s, self.until_s = every_s, until_s

    async def run(self) -> None:
        at = self.every_s
        while at <= self.until_s:
            await asyncio.sleep(max(0.0, self.t0 + at - time.monotonic()))
            step = KillStep(len(self.steps), self.every_s, [self.rng.choice(TARGETS)])
            self.steps.append(step)
            await self.perform(step)
            # The next kill keeps to the period; one that a slow restart overran comes next.
            at = max(at + self.every_s, time.monotonic() - self.t0)


class SoakDriver(Driver):
    def __init__(self, *args: Any, gateway_url: str, tokens: dict[str, str], t0: float) -> None:
        super().__init__(*args)
        self.t0 = t0
        self.finished: list[Finished] = []
        self.compactions = {"asked": 0, "recorded": 0, "refused": 0}
        self.http = {
            user: httpx.AsyncClient(
                base_url=gateway_url, headers={"Authorization": f"Bearer {token}"}, timeout=10
            )
            for user, token in tokens.items()
        }

    async def run(self, plan: SessionPlan) -> Outcome:
        out = await super().run(plan)
        self.finished.append(
            Finished(
                plan.index, plan.kind, out.phase, round(time.monotonic() - self.t0, 2), out.seconds, out.error
            )
        )
        return out

    async def _drive(self, plan: SessionPlan, out: Outcome) -> None:
        await super()._drive(plan, out)
        if plan.kind == "followup" and out.phase == "COMPLETED" and out.session_id:
            await self._compact(plan.user, out.session_id)

    async def _compact(self, user: str, session_id: str) -> None:
        """Ask until a gateway answers (it may be restarting), then await the compaction."""
        conn = self.conns[user]
        for _ in range(30):
            try:
                response = await self.http[user].post(f"/v1/sessions/{session_id}/compact")
            except httpx.TransportError:
                await asyncio.sleep(1.0)
                continue
            if response.status_code >= 500:
                await asyncio.sleep(1.0)
                continue
            if response.status_code != 202:
                self.compactions["refused"] += 1
                return
            self.compactions["asked"] += 1
            if await conn.wait_for(lambda: bool(conn.of_type(session_id, "compaction_recorded")), 60.0):
                self.compactions["recorded"] += 1
            return

    async def close(self) -> None:
        for client in self.http.values():
            await client.aclose()


def plans(seed: int, count: int) -> list[SessionPlan]:
    """`count` chaos sessions of one seed (one plan, so that each has its own paths in the
    workspaces), released in order rather than after kill steps."""
    planned = plan_workload(seed, count, 0)
    for plan in planned:
        plan.start_after_kill = 0
    return planned


async def release(
    driver: SoakDriver, seed: int, rate: float, until_s: float, t0: float
) -> list[asyncio.Task[Outcome]]:
    """Start one planned session every 1/rate seconds until `until_s`."""
    tasks: list[asyncio.Task[Outcome]] = []
    for n, plan in enumerate(plans(seed, int(until_s * rate) + 1)):
        at = n / rate
        await asyncio.sleep(max(0.0, t0 + at - time.monotonic()))
        tasks.append(asyncio.create_task(driver.run(plan)))
    return tasks
