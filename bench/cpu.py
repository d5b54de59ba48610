"""CPU accounting over a window: the cluster per role, the bench driver itself, the machine.

The machine figure (busy cores from /proc/stat) minus the cluster and the driver is CPU that
something else on the box used during the window — other engineers' tests, say — which is
what makes a run noisy.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass
from typing import Any

import psutil

from bench.cluster import ROLES, BenchCluster


@dataclass(frozen=True)
class Snapshot:
    wall: float
    roles: dict[str, float]
    driver: float
    machine_busy: float  # CPU seconds, all cores together


def snapshot(cluster: BenchCluster) -> Snapshot:
    me = psutil.Process().cpu_times()
    machine = psutil.cpu_times()
    busy = sum(machine) - machine.idle - getattr(machine, "iowait", 0.0)
    # guest time is already part of user on Linux; do not count it twice
    busy -= getattr(machine, "guest", 0.0) + getattr(machine, "guest_nice", 0.0)
    return Snapshot(time.perf_counter(), cluster.cpu_seconds(), me.user + me.system, busy)


@dataclass(frozen=True)
class Window:
    wall_s: float
    cpu_s: dict[str, float]  # per role
    driver_cpu_s: float
    machine_busy_cores: float

    @property
    def total_cpu_s(self) -> float:
        return sum(self.cpu_s.values())

    @property
    def other_cores(self) -> float:
        """Busy cores not accounted for by the cluster or the driver."""
        return max(0.0, self.machine_busy_cores - (self.total_cpu_s + self.driver_cpu_s) / self.wall_s)


def window(before: Snapshot, after: Snapshot) -> Window:
    wall = max(after.wall - before.wall, 1e-9)
    roles = [r for r in ROLES if r in after.roles or r in before.roles]
    cpu = {r: max(0.0, after.roles.get(r, 0.0) - before.roles.get(r, 0.0)) for r in roles}
    return Window(wall, cpu, after.driver - before.driver, (after.machine_busy - before.machine_busy) / wall)


def per_turn_ms(w: Window, turns: int) -> dict[str, Any]:
    """CPU milliseconds per turn: per role, their total, the driver, and load context."""
    return {
        "cpu_s_per_turn": {r: round(s / turns, 5) for r, s in w.cpu_s.items()},
        "cpu_ms_per_turn": {r: round(1000 * s / turns, 2) for r, s in w.cpu_s.items()},
        "cpu_ms_per_turn_total": round(1000 * w.total_cpu_s / turns, 2),
        "driver_cpu_ms_per_turn": round(1000 * w.driver_cpu_s / turns, 2),
        "cluster_cores": round(w.total_cpu_s / w.wall_s, 3),
        "machine_busy_cores": round(w.machine_busy_cores, 3),
        "other_busy_cores": round(w.other_cores, 3),
    }


async def idle_cpu(cluster: BenchCluster, seconds: float, settle_s: float = 3.0) -> dict[str, Any]:
    """CPU the cluster burns with no traffic, in % of one core (CPU s / wall s * 100)."""
    await asyncio.sleep(settle_s)  # let the last turns' trailing work finish
    before = snapshot(cluster)
    await asyncio.sleep(seconds)
    w = window(before, snapshot(cluster))
    return {
        "seconds": round(w.wall_s, 2),
        "cpu_pct": {r: round(100 * s / w.wall_s, 2) for r, s in w.cpu_s.items()},
        "cpu_pct_total": round(100 * w.total_cpu_s / w.wall_s, 2),
        "machine_busy_cores": round(w.machine_busy_cores, 3),
        "other_busy_cores": round(w.other_cores, 3),
    }
