"""Start `muster run` for a benchmark and find its processes (as an operator would)."""

from __future__ import annotations

import os
import socket
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path

import psutil

ROOT = Path(__file__).resolve().parents[1]
SERVICES = ("gateway", "harness", "subagent-worker", "recovery")
ROLES = (*SERVICES, "tansu", "postgres", "launcher")
# The launcher honours MUSTER_<SERVICE>_INSTANCES; these are the ones the bench can scale.
INSTANCE_ENV = {"harness": "MUSTER_HARNESS_INSTANCES", "subagent-worker": "MUSTER_SUBAGENT_WORKER_INSTANCES"}


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class BenchCluster:
    def __init__(
        self, token: str = "bench-token", instances: dict[str, int] | None = None, env: dict[str, str] | None = None
    ) -> None:
        """`instances` ({"harness": 2, "subagent-worker": 2}) overrides the environment's
        MUSTER_*_INSTANCES; without it they pass through from the caller's environment.
        `env` overrides the rest (the overload bench turns shedding back on)."""
        self.token = token
        self.data_dir = Path(tempfile.mkdtemp(prefix="muster-bench-"))
        self.ready: dict[str, str] = {}
        self.proc: subprocess.Popen[str] | None = None
        self.env_overrides = {INSTANCE_ENV[role]: str(n) for role, n in (instances or {}).items()}
        self.env_overrides.update(env or {})

    def __enter__(self) -> BenchCluster:
        env = dict(
            os.environ,
            MUSTER_DATA_DIR=str(self.data_dir),
            MUSTER_GATEWAY_PORT=str(free_port()),
            MUSTER_TOKENS=f"{self.token}=bench",
            # One user offers the whole load: the per-user limits would cap it; the
            # benches measure the cluster past saturation, so nothing is shed either.
            MUSTER_USER_MAX_RUNNING="0",
            MUSTER_USER_MAX_SOCKETS="0",
            MUSTER_USER_MESSAGES_PER_MINUTE="0",
            MUSTER_OVERLOAD_BACKLOG="0",
            MUSTER_OVERLOAD_BACKLOG_AGE_MS="0",
            MUSTER_OVERLOAD_POOL_WAIT_MS="0",
            MUSTER_OVERLOAD_RUNNING="0",
            MUSTER_OVERLOAD_EVENTS_LAG_MS="0",
            MUSTER_OVERLOAD_TURN_LATENCY_MS="0",
            MUSTER_LOG_LEVEL=os.environ.get("MUSTER_LOG_LEVEL", "WARNING"),
            PYTHONUNBUFFERED="1",
        )
        env.update(self.env_overrides)
        self.env = env
        self.proc = subprocess.Popen(
            [str(ROOT / ".venv/bin/muster"), "run"],
            cwd=ROOT,
            env=env,
            text=True,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        log = open(self.data_dir / "launcher.log", "w")
        ready = threading.Event()

        def read() -> None:
            assert self.proc is not None and self.proc.stdout is not None
            for line in self.proc.stdout:
                log.write(line)
                key, sep, value = line.rstrip("\n").partition(": ")
                if sep and key in ("gateway", "kafka", "token", "database"):
                    self.ready[key] = value
                    if len(self.ready) == 4:
                        ready.set()
            log.close()

        threading.Thread(target=read, daemon=True).start()
        deadline = time.monotonic() + 180
        while not ready.wait(0.5):
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.__exit__()
                why = (
                    f"exited {self.proc.returncode}" if self.proc.poll() is not None else "not ready in 180 s"
                )
                raise RuntimeError(f"muster run {why}; see {self.data_dir / 'launcher.log'}")
        return self

    def __exit__(self, *_: object) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, 9)

    @property
    def ws_url(self) -> str:
        return self.ready["gateway"].replace("http://", "ws://") + "/v1/ws"

    def configured_instances(self) -> dict[str, int]:
        """Instance counts the launcher was asked for (MUSTER_*_INSTANCES, default 1)."""
        return {role: int(self.env.get(key, "1") or "1") for role, key in INSTANCE_ENV.items()}

    def processes(self) -> dict[str, list[psutil.Process]]:
        """Supervised children by role; postgres includes its backends."""
        assert self.proc is not None
        return role_processes(self.proc.pid)

    def instance_counts(self) -> dict[str, int]:
        """Running processes per service, as found now."""
        procs = self.processes()
        return {role: len(procs.get(role, [])) for role in SERVICES}

    def cpu_seconds(self) -> dict[str, float]:
        """User+system CPU seconds so far, per role. PostgreSQL counts its live backends and,
        through the postmaster's children times, the backends that already exited."""
        totals: dict[str, float] = {}
        for role, procs in self.processes().items():
            total = 0.0
            for proc in procs:
                try:
                    family = [proc] + (proc.children(recursive=True) if role == "postgres" else [])
                except psutil.Error:
                    family = [proc]
                for member in family:
                    try:
                        times = member.cpu_times()
                    except psutil.Error:
                        continue
                    total += times.user + times.system
                    if role == "postgres" and member is proc:
                        total += times.children_user + times.children_system
            totals[role] = total
        return totals


def role_processes(launcher_pid: int) -> dict[str, list[psutil.Process]]:
    """The children of `muster run` (pid `launcher_pid`) by role, and the launcher itself."""
    roles: dict[str, list[psutil.Process]] = {}
    for child in psutil.Process(launcher_pid).children():
        try:
            names = " ".join(os.path.basename(a) for a in child.cmdline()[:2])
        except psutil.Error:
            continue
        for role in ROLES[:-1]:
            if role in names:
                roles.setdefault(role, []).append(child)
    roles["launcher"] = [psutil.Process(launcher_pid)]
    return roles


def wait_until(predicate: Callable[[], bool], timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise TimeoutError
        time.sleep(0.05)
