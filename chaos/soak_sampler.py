"""What the soak samples every few seconds: each service's RSS and open file descriptors
(summed over its instances), the database's client connections, its size against the events
written, and the consumer lag of the durable groups.

The process roles are `bench.cluster`'s. PostgreSQL's own RSS is not sampled (its backends
share their buffers, so their RSS says little); its connections are. The soak's own pools
name themselves `muster-soak` and are not counted.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import asdict, dataclass, field
from itertools import pairwise
from typing import Any

import asyncpg
import psutil

from bench.cluster import role_processes
from chaos.soak_lag import LagReader

ROLES = ("gateway", "harness", "subagent-worker", "recovery", "tansu")
APPLICATION = "muster-soak"

DATABASE = f"""
SELECT
  (SELECT count(*) FROM pg_stat_activity
    WHERE datname = current_database() AND backend_type = 'client backend'
      AND application_name <> '{APPLICATION}') AS connections,
  pg_database_size(current_database()) AS size_bytes,
  (SELECT coalesce(max(position), 0) FROM events) AS events
"""


@dataclass
class Sample:
    t: float  # seconds since the soak started
    rss_mb: dict[str, float] = field(default_factory=dict)
    fds: dict[str, int] = field(default_factory=dict)
    pids: dict[str, list[int]] = field(default_factory=dict)
    cpu_s: dict[int, float] = field(default_factory=dict)  # CPU seconds so far, by pid
    db_connections: int | None = None
    db_size_bytes: int | None = None
    events: int | None = None
    lag: dict[str, int] | None = None  # None: the broker did not answer (killed, say)
    # The offsets behind `lag` (S4 reads them; the report leaves them out: they are many).
    ends: dict[str, int] | None = None
    committed: dict[str, dict[str, int]] | None = None

    @property
    def lag_total(self) -> int | None:
        return None if self.lag is None else sum(self.lag.values())

    def as_dict(self) -> dict[str, Any]:
        fields = asdict(self)
        for kept_out in ("cpu_s", "ends", "committed"):
            del fields[kept_out]
        return {**fields, "lag_total": self.lag_total}


def processes(
    launcher_pid: int,
) -> tuple[dict[str, float], dict[str, int], dict[str, list[int]], dict[int, float]]:
    rss: dict[str, float] = {}
    fds: dict[str, int] = {}
    pids: dict[str, list[int]] = {}
    cpu: dict[int, float] = {}
    for role, procs in role_processes(launcher_pid).items():
        for proc in procs:
            try:
                with proc.oneshot():
                    times = proc.cpu_times()
                    cpu[proc.pid] = times.user + times.system
                    if role == "postgres":  # its backends, live and exited
                        cpu[proc.pid] += times.children_user + times.children_system
                        for backend in proc.children():
                            backend_times = backend.cpu_times()
                            cpu[backend.pid] = backend_times.user + backend_times.system
                    if role not in ROLES:
                        continue
                    memory, handles = proc.memory_info().rss, proc.num_fds()
            except psutil.Error:
                continue  # it died between the listing and the read: a kill
            rss[role] = rss.get(role, 0.0) + memory / 2**20
            fds[role] = fds.get(role, 0) + handles
            pids.setdefault(role, []).append(proc.pid)
    return {r: round(v, 1) for r, v in rss.items()}, fds, pids, cpu


def cluster_cores(samples: list[Sample]) -> list[tuple[float, float]]:
    """(t, cores the cluster used since the previous sample), over the processes alive at
    both samples (a process killed in between loses its last interval)."""
    series = []
    for before, after in pairwise(samples):
        used = sum(
            max(0.0, cpu - before.cpu_s[pid]) for pid, cpu in after.cpu_s.items() if pid in before.cpu_s
        )
        series.append((after.t, round(used / max(after.t - before.t, 1e-6), 3)))
    return series


class Sampler:
    def __init__(
        self, launcher_pid: int, database_url: str, bootstrap: str, every_s: float, t0: float
    ) -> None:
        self.launcher_pid, self.database_url, self.every_s, self.t0 = launcher_pid, database_url, every_s, t0
        self.lags = LagReader(bootstrap)
        self.samples: list[Sample] = []
        self.stopping = asyncio.Event()
        self.errors: dict[str, int] = {}

    async def sample(self, db: asyncpg.Connection | None) -> Sample:
        s = Sample(round(time.monotonic() - self.t0, 2))
        s.rss_mb, s.fds, s.pids, s.cpu_s = await asyncio.to_thread(processes, self.launcher_pid)
        if db is not None:
            row = await asyncio.wait_for(db.fetchrow(DATABASE), 10)
            assert row is not None
            s.db_connections, s.db_size_bytes, s.events = int(row[0]), int(row[1]), int(row[2])
        try:
            reading = await asyncio.wait_for(self.lags.lag(), 10)
            s.lag, s.ends, s.committed = reading.lags, reading.ends, reading.committed
        except Exception as exc:
            self._count(f"lag: {type(exc).__name__}")
        return s

    def _count(self, what: str) -> None:
        self.errors[what] = self.errors.get(what, 0) + 1

    async def run(self) -> None:
        db: asyncpg.Connection | None = None
        next_at = time.monotonic()
        try:
            while not self.stopping.is_set():
                if db is None or db.is_closed():
                    try:
                        db = await asyncpg.connect(
                            self.database_url, server_settings={"application_name": APPLICATION}
                        )
                    except (OSError, asyncpg.PostgresError) as exc:
                        self._count(f"db: {type(exc).__name__}")
                        db = None
                try:
                    self.samples.append(await self.sample(db))
                except (OSError, asyncpg.PostgresError, TimeoutError) as exc:
                    self._count(f"sample: {type(exc).__name__}")
                    if db is not None:
                        db.terminate()
                        db = None
                next_at += self.every_s
                try:
                    await asyncio.wait_for(self.stopping.wait(), max(0.0, next_at - time.monotonic()))
                except TimeoutError:
                    pass
        finally:
            if db is not None:
                await db.close()
            await self.lags.close()

    async def final(self, within_s: float) -> Sample:
        """Samples after the workload has quiesced, a second apart, until the lag reads 0 or
        `within_s` passed (the last commits of a batch trail the database); the last one."""
        db = await asyncpg.connect(self.database_url, server_settings={"application_name": APPLICATION})
        deadline = time.monotonic() + within_s
        try:
            while True:
                sample = await self.sample(db)
                if sample.lag_total == 0 or time.monotonic() > deadline:
                    break
                await asyncio.sleep(1.0)  # pacing the samples
        finally:
            await db.close()
            await self.lags.close()
        self.samples.append(sample)
        return sample
